"""scripts/run_triton_tutorials.py on a folder of small tutorial-like files it is given here:
only import lines change in the copies; a working file passes (on the interpreter), a failing
one reports its exception line, a slow one times out; --checks-only skips benchmark sweeps (and
fails a file that prints a cross mark), --pytest runs the parametrized test functions."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                      "run_triton_tutorials.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

from run_triton_tutorials import parametrized_tests, substitute  # noqa: E402

GOOD = '''"""A vector add written for Triton."""
import torch

import triton
import triton.language as tl
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


x, y = torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)
out = torch.full_like(x, float("nan"))
add_kernel[(triton.cdiv(1000, 256),)](x, y, out, 1000, BLOCK=256)
torch.testing.assert_close(out, x + y)
print("import triton stays as it is in this string")
'''
BAD = '''import triton
import triton.language as tl

print("working...")
raise ValueError("boom at step 2")
'''
SLOW = '''import time
print("checks passed", flush=True)
import triton
time.sleep(60)
'''


def test_only_import_lines_change():
    out = substitute(GOOD)
    changed = [(a, b) for a, b in zip(GOOD.splitlines(), out.splitlines()) if a != b]
    assert changed == [("import triton", "import newt as triton"),
                       ("import triton.language as tl", "import newt.language as tl"),
                       ("from triton.runtime import driver", "from newt.runtime import driver")]
    assert substitute("    import triton.tools.x  # note\r\n") == \
        "    import newt.tools.x; import newt as triton  # note\r\n"


def _run(folder, *args):
    return subprocess.run([sys.executable, SCRIPT, str(folder), *args], capture_output=True,
                          text=True, timeout=600)


def test_runs_and_reports(tmp_path):
    tut = tmp_path / "tutorials"
    tut.mkdir()
    (tut / "01-good.py").write_text(GOOD)
    (tut / "02-bad.py").write_text(BAD)
    (tut / "03-slow.py").write_text(SLOW)
    (tut / "notes.txt").write_text("not a tutorial")
    r = _run(tut, "--interpret", "-k", "good", "-k", "bad", "--timeout", "300")
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("0")}
    assert r.returncode == 1, r.stdout + r.stderr       # one did not pass
    assert rows["01-good.py"].split()[1] == "pass"
    assert rows["02-bad.py"].split()[1] == "fail"
    assert rows["02-bad.py"].endswith("ValueError: boom at step 2")
    assert (tut / "01-good.py").read_text() == GOOD      # the originals are untouched
    r = _run(tut, "-k", "slow", "--timeout", "5", "--logs", str(tmp_path / "logs"))
    assert r.returncode == 1 and "03-slow.py  timeout" in r.stdout and "0 of 1 pass" in r.stdout
    assert "last printed: checks passed" in r.stdout
    assert "checks passed" in (tmp_path / "logs" / "03-slow.log").read_text()


SWEEP = '''import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


def scale(x, s):
    out = torch.full_like(x, float("nan"))
    scale_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), s, BLOCK=128)
    return out


def test_called_by_the_file(n):
    x = torch.randn(n, device=DEVICE)
    torch.testing.assert_close(scale(x, 3.0), x * 3.0)


@pytest.mark.parametrize("n", [77, 300])
def test_scale(n):
    x = torch.randn(n, device=DEVICE)
    torch.testing.assert_close(scale(x, SIGN * 2.5), x * 2.5)


@triton.testing.perf_report(triton.testing.Benchmark(
    x_names=["n"], x_vals=[1 << 10], line_arg="p", line_vals=["t"], line_names=["t"],
    plot_name="scale", args={}))
def bench(n, p):
    raise SystemExit("the sweep ran")


test_called_by_the_file(513)
print("scale \\u2705" if SIGN > 0 else "scale \\u274c")
bench.run(print_data=True)
'''


def test_checks_only_and_pytest(tmp_path):
    assert parametrized_tests(SWEEP) == ["test_scale"]
    tut = tmp_path / "tutorials"
    tut.mkdir()
    (tut / "05-sweep.py").write_text("SIGN = 1\n" + SWEEP)
    (tut / "06-wrong.py").write_text("SIGN = -1\n" + SWEEP)
    r = _run(tut, "--interpret", "--timeout", "300")          # without: the sweep runs
    assert "the sweep ran" in r.stdout, r.stdout + r.stderr
    r = _run(tut, "--interpret", "--checks-only", "--pytest", "--timeout", "300",
             "--logs", str(tmp_path / "logs"))
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("0")}
    assert rows["05-sweep.py"].split()[1] == "pass", r.stdout + r.stderr
    assert rows["05-sweep.py"].endswith("test_scale passed")
    assert "2 passed" in (tmp_path / "logs" / "05-sweep.log").read_text()
    assert "benchmark sweep skipped" in (tmp_path / "logs" / "05-sweep.log").read_text()
    assert rows["06-wrong.py"].split()[1] == "fail"              # printed a cross mark
    r = _run(tut, "--interpret", "--checks-only", "-k", "wrong", "--timeout", "300")
    assert "06-wrong.py  fail" in r.stdout and r.stdout.count("a check printed") == 1, r.stdout


BASELINE = '''"""A program written for Triton that checks a tuned kernel against the vendor GEMM and
profiles both (Triton's compiled extension, proton with its kernel hook, launch metadata)."""
import torch
import triton
import triton.language as tl
import triton.profiler as proton
from triton._C.libtriton import nvidia
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()
blas = nvidia.cublas.CublasLt(torch.empty(1 << 16, dtype=torch.uint8, device=DEVICE))


def describe(grid, kernel, args):
    return {"name": f"{kernel.name} <{args['M']}x{args['N']}>", "flops16": 2.0 * args["M"]
            * args["N"] * args["K"]}


@triton.autotune([triton.Config({"BM": 32, "BN": 32}), triton.Config({"BM": 16, "BN": 64})],
                 key=["M", "N", "K"])
@triton.jit(launch_metadata=describe)
def mm_bt(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk < K))
        b = tl.load(b_ptr + rn[:, None] * K + rk[None, :], mask=(rn[:, None] < N) & (rk < K))
        acc = tl.dot(a, b.T, acc)
    tl.store(c_ptr + rm[:, None] * N + rn, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn < N))


M, N, K = 45, 70, 40
a = torch.randn(M, K, device=DEVICE).half()
b = torch.randn(N, K, device=DEVICE).half()
ours, theirs = (torch.full((M, N), float("nan"), device=DEVICE).half() for _ in range(2))
proton.start("cmp", hook="triton")
grid = lambda m: (triton.cdiv(M, m["BM"]), triton.cdiv(N, m["BN"]))
mm_bt[grid](a, b, ours, M, N, K, BK=16)
with proton.scope("vendor", {"flops16": 2.0 * M * N * K}):
    blas.matmul(a, b, theirs)
proton.finalize()
import triton.profiler.viewer as viewer
rows, metrics = viewer.parse(["tflop16/s", "time/ms"], "cmp.hatchet")
assert sorted(r["name"] for r in rows) == ["mm_bt <45x70>", "vendor"], rows
ok = torch.allclose(ours.float(), theirs.float(), atol=0.05, rtol=0.01)
print("baseline \\u2705" if ok else "baseline \\u274c")
'''


def test_a_program_using_the_vendor_baseline_and_kernel_records(tmp_path):
    """Triton's extension (`triton._C.libtriton.nvidia`), proton with hook="triton" and a
    kernel's launch_metadata, through the import substitution, on the interpreter."""
    tut = tmp_path / "tutorials"
    tut.mkdir()
    (tut / "07-baseline.py").write_text(BASELINE)
    r = _run(tut, "--interpret", "--checks-only", "--timeout", "300", "--logs",
             str(tmp_path / "logs"))
    assert "07-baseline.py  pass" in r.stdout, r.stdout + r.stderr
    log = (tmp_path / "logs" / "07-baseline.log").read_text()
    assert "baseline \u2705" in log and "mm_bt <45x70>" in log
