"""The examples and benchmark kernels: each example checks itself against torch on every target
(small sizes), the benchmark's Triton twins are the same source with nl -> tl, and every
example and benchmark kernel builds IR and compiles for sm_80 and sm_90a without spills or
local memory (no GPU needed: NVRTC runs on the CPU)."""
import glob
import os
import re
import sys

import pytest
import torch

import newt
import newt.options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py)

EXAMPLE_KEYS = list(common.EXAMPLES)


def _bench_launch():
    return common.load_file(os.path.join(ROOT, "benchmarks", "bench_launch.py"),
                            "newt_bench_launch")


def _aot_entries():
    """(file, entry) for every kernel listed in an `AOT = [dict(fn=, signature=, constexprs=,
    num_warps=[, num_stages=, archs=, specialization=])]` of an example or benchmark file: listing a kernel there is all
    it takes to have it compiled here. A file that cannot be imported for want of an optional
    package (e.g. triton) yields a skip entry; any other import error a failing one."""
    entries = []
    for key in EXAMPLE_KEYS:
        entries += [(common.EXAMPLES[key], e) for e in common.example(key).AOT]
    entries += [("bench_launch", e) for e in _bench_launch().AOT]
    seen = {common.EXAMPLES[k] for k in EXAMPLE_KEYS} | {"bench_launch"}
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))
    paths += sorted(glob.glob(os.path.join(ROOT, "benchmarks", "bench_*.py")))
    for path in paths:
        stem = os.path.basename(path)[:-3]
        with open(path) as f:
            if stem in seen or not re.search(r"^AOT\s*=", f.read(), re.M):
                continue
        try:
            mod = common.load_file(path, "newt_aot_" + stem)
            entries += [(stem, e) for e in mod.AOT]
        except ImportError as exc:
            entries.append((stem, {"skip": f"{stem}: {exc}"}))
        except Exception as exc:
            entries.append((stem, {"error": f"{stem} does not import: {exc!r}"}))
    return entries


def _entry_id(entry):
    stem, e = entry
    return e["fn"].__name__ if "fn" in e else stem


def _entry(entry):
    e = entry[1]
    if "skip" in e:
        pytest.skip(e["skip"])
    if "error" in e:
        pytest.fail(e["error"])
    return e


@pytest.mark.parametrize("key", EXAMPLE_KEYS)
def test_example_checks_itself(key, target, device):
    # check() poisons outputs with NaN, runs the kernel on fresh random data and compares with
    # torch; it raises on any mismatch
    common.example(key).check(device, small=True)


@pytest.mark.parametrize("key", EXAMPLE_KEYS)
def test_example_main(key, monkeypatch, capsys):
    monkeypatch.setattr(newt.options.flags, "interpret", not torch.cuda.is_available())
    common.example(key).main(["--small"])
    out = capsys.readouterr().out
    assert "matches torch" in out
    if not torch.cuda.is_available():
        assert out.startswith("note: no CUDA device: running on the CPU interpreter")


def test_example_detects_a_wrong_result(monkeypatch):
    """check() must fail when the kernel's output is wrong (poisoned, never written)."""
    mod = common.example("add")
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    monkeypatch.setattr(mod, "add", lambda x, y, out: out)  # leaves the NaN poison in place
    with pytest.raises(AssertionError, match="not close"):
        mod.check("cpu", small=True)


@pytest.mark.parametrize("entry", _aot_entries(), ids=_entry_id)
def test_triton_twin_is_the_same_source(entry):
    src = common.kernel_source(_entry(entry)["fn"])
    twin = common.swap_to_triton(src)
    assert "@triton.jit" in twin and "tl." in twin and "nl." not in twin
    assert twin.replace("@triton.jit", "@newt.jit").replace("tl.", "nl.") == src
    # the kernel body names no module but nl (the only text the swap touches)
    body = src.split("\n", 1)[1]
    assert not re.search(r"\b(torch|newt|triton|np|math)\.", body)


@pytest.mark.parametrize("key", EXAMPLE_KEYS)
def test_triton_twin_loads(key):
    pytest.importorskip("triton")
    twin = common.triton_twin(common.newt_kernel(key))
    assert twin.fn.__name__ == common.KERNEL_NAMES[key]


@pytest.mark.parametrize("entry", _aot_entries(), ids=_entry_id)
def test_triton_twin_takes_the_helpers_the_kernel_calls(entry):
    """A twin is the kernel's module source with nl -> tl: the @jit helpers it calls (attention's
    inner loop, the backward's two halves) must be in it, callees before callers."""
    fn = _entry(entry)["fn"]
    helpers = common.jit_callees(fn)
    called = set(re.findall(r"\b(\w+)\s*\(", common.kernel_source(fn)))
    for name, g in fn.fn.__globals__.items():
        if name in called and isinstance(g, type(fn)) and g is not fn:
            assert g in helpers, name
    for i, h in enumerate(helpers):
        assert set(common.jit_callees(h)) <= set(helpers[:i])


@pytest.mark.parametrize("entry", _aot_entries(), ids=_entry_id)
def test_triton_twin_compiles_for_sm90(entry):
    """The benchmark's Triton side, checked without a GPU: Triton compiles each twin."""
    e = _entry(entry)
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        sig = dict(e["signature"], **{k: "constexpr" for k in e["constexprs"]})
        src = ASTSource(fn=common.triton_twin(e["fn"]), signature=sig,
                        constexprs=dict(e["constexprs"]))
    except (ImportError, TypeError) as exc:  # Triton's AOT API moves between releases
        pytest.skip(f"this Triton's AOT API differs: {exc}")
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": e["num_warps"]})
    assert k.asm["cubin"]


@pytest.mark.parametrize("entry", _aot_entries(), ids=_entry_id)
def test_kernel_builds_ir(entry):
    e = _entry(entry)
    frontend = pytest.importorskip("newt.frontend")
    if not hasattr(frontend, "build_ir"):
        pytest.skip("newt.frontend.build_ir is not there yet")
    fn = frontend.build_ir(e["fn"], e["signature"], e["constexprs"])
    assert fn is not None


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("entry", _aot_entries(), ids=_entry_id)
def test_kernel_compiles_without_spills(entry, arch):
    e = _entry(entry)
    import newt.compiler
    compile_fn = getattr(newt.compiler, "compile", None)
    if compile_fn is None:
        pytest.skip("newt.compiler.compile is not there yet")
    if arch not in e.get("archs", (arch,)):
        pytest.skip(f"{e['fn'].__name__} is not meant for {arch}")
    try:
        k = compile_fn(e["fn"], e["signature"], e["constexprs"], arch=arch,
                       num_warps=e["num_warps"], num_stages=e.get("num_stages", 3),
                       specialization=e.get("specialization"))
    except NotImplementedError as exc:
        pytest.skip(f"compiler stage not implemented: {exc}")
    assert k.cubin and k.ptx and k.source
    assert k.n_spills == 0, f"{k.name} spills on {arch}:\n{k.log}"
    assert k.local_bytes == 0, f"{k.name} uses {k.local_bytes} B of local memory on {arch}"
    assert k.num_threads == 32 * e["num_warps"]


# ----------------------------------------------------------------------------- benchmark logic
# The benchmarks time on a GPU only, but their checking and bookkeeping run here: tiny sizes on
# the interpreter, a fake timer. A typo in a benchmark must not cost a GPU run to find.

def _fake_bench(fn):
    fn()
    return 1.0  # ms


def test_bench_memory_logic_on_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    mem = common.load_file(os.path.join(ROOT, "benchmarks", "bench_memory.py"),
                           "newt_bench_memory")
    providers = {"newt": common.kernels("newt")}
    rows = mem.measure(mem.SIZES["tiny"], dev="cpu", bench=_fake_bench, providers=providers,
                       sync=lambda: None)
    assert [r["workload"].split()[0] for r in rows] == ["vector", "softmax", "layernorm",
                                                        "silu-and-mul"]
    for r in rows:
        assert r["errors"] == {}, r
        assert r["newt"] is not None and r["torch"] is not None and r["triton"] is None
    assert rows[0]["newt"] == pytest.approx(3 * 5003 * 4 / 1e-3 / 1e9)  # bytes / 1 ms


def test_bench_memory_reports_a_wrong_kernel(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    mem = common.load_file(os.path.join(ROOT, "benchmarks", "bench_memory.py"),
                           "newt_bench_memory")
    ks = common.kernels("newt")
    ks["add"] = ks["silu"]  # the wrong kernel: fails the check, so it is never timed
    sizes = dict(mem.SIZES["tiny"], softmax=(1, 16), layernorm=(1, 4096), silu=(1, 16))
    rows = mem.measure(sizes, dev="cpu", bench=_fake_bench, providers={"newt": ks},
                       sync=lambda: None)
    assert rows[0]["newt"] is None and "newt" in rows[0]["errors"]


def test_bench_launch_logic_on_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    bl = _bench_launch()
    providers = {"newt": {"add": common.newt_kernel("add"), "mm": bl.matmul_shaped_kernel}}
    rows = bl.warm_rows(providers, dev="cpu", n=1, batches=1, warmup=0, sync=lambda: None,
                        window_s=0.0)
    assert [r["unit"] for r in rows] == ["us", "us", "us"]
    assert all(r["errors"] == {} and r["newt"] > 0 for r in rows), rows


def test_host_us_per_launch_window():
    """Rounds go on for the window (up to max_batches), every provider in each round; the
    minimum is over all of them."""
    bl = _bench_launch()
    count = {"a": 0, "b": 0}
    calls = {p: (lambda p=p: count.__setitem__(p, count[p] + 1)) for p in count}
    best, med = bl.host_us_per_launch(calls, n=3, batches=2, warmup=0, sync=lambda: None)
    assert count == {"a": 6, "b": 6} and set(best) == set(med) == {"a", "b"}
    count.update(a=0, b=0)
    best, med = bl.host_us_per_launch(calls, n=3, batches=2, warmup=0, sync=lambda: None,
                                      window_s=60.0, max_batches=9)
    assert count == {"a": 27, "b": 27}
    assert all(best[p] <= med[p] for p in best)


def test_run_all_table_and_verdicts(tmp_path):
    run_all = common.load_file(os.path.join(ROOT, "benchmarks", "run_all.py"), "newt_run_all")
    rows = [dict(workload="softmax", unit="GB/s", higher_is_better=True, newt=4100.0,
                 triton=4000.0, torch=2500.0, target_ratio=1.0),
            dict(workload="launch", unit="us", higher_is_better=False, newt=7.0, triton=20.0,
                 torch=8.0, target_abs=6.0),
            dict(workload="broken", unit="ms", higher_is_better=False, newt=None, triton=3.0,
                 torch=None, target_abs=50.0)]
    assert [run_all.verdict(r) for r in rows] == ["ok", "MISS", "MISS"]
    table = run_all.format_table([rows, rows])
    assert "newt/triton r1" in table and "newt/triton r2" in table and "1.025x" in table
    names = [n for n, _ in run_all.discover()]
    assert names[:2] == ["memory", "launch"]
    # a run that lost a row (a crash in run 2) still lines up by workload
    table = run_all.format_table([rows, rows[1:]])
    assert [ln.split()[0] for ln in table.splitlines()[2:]] == ["softmax", "launch", "broken"]
    env = {"date": "d", "gpu": "g", "torch": "t", "triton": "tr", "nvrtc": "n"}
    run_all.report(str(tmp_path), env, [rows], {"x": "Traceback\nValueError: boom"})
    assert "softmax" in (tmp_path / "benchmarks.md").read_text()
    assert "bench_x failed: ValueError: boom" in (tmp_path / "table.txt").read_text()
    assert (tmp_path / "results.json").exists()


def test_timed_in_rounds_rotates_and_keeps_the_median():
    """benchmarks/common.py: each provider first once, its median kept; a failing provider is
    reported and not timed again."""
    order, seen = [], {"a": [3.0, 1.0, 2.0], "b": [5.0, 4.0, 6.0]}

    def time_one(fn):
        name = fn()
        order.append(name)
        if name == "c":
            raise RuntimeError("broken")
        return seen[name].pop(0), None
    calls = {p: (lambda p=p: p) for p in "abc"}
    ms, notes = common.timed_in_rounds(calls, time_one, rounds=3)
    assert ms == {"a": 2.0, "b": 5.0}
    assert list(notes) == ["c"] and "broken" in notes["c"]
    assert order == ["a", "b", "c", "b", "a", "a", "b"]
