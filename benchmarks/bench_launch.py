"""Launch-overhead rows of TARGETS.md: host time per warm launch, first call in a fresh process
with a warm disk cache, and cold compile times; newt vs Triton (same kernel source) vs torch.

- Warm launch: wall-clock over many back-to-back launches of an already-compiled kernel,
  divided by their count: batches of 2,000, newt / Triton / torch interleaved batch by batch
  for a 5 s window (at least 7 rounds), the fastest batch reported (host_us_per_launch says
  why; the medians are kept in the results file). The kernels are tiny, so the host is the
  bottleneck: this is what a user's Python loop pays per launch. Two shapes of argument list:
  the 4-argument vector add and a 12-argument kernel with matmul's signature.
- First call / cold compile: benchmarks/first_call.py in subprocesses, first with an empty
  cache folder (cold: parse, codegen, NVRTC or LLVM, load), then again on the warm folder, with
  Python's bytecode cache on (as for an installed package; _first_call says why).

    python benchmarks/bench_launch.py            # or through benchmarks/run_all.py
    python benchmarks/bench_launch.py --stand-in # no GPU: the Python side of a launch only

`--stand-in` runs the same warm launches on a machine without a GPU: CPU tensors, a stand-in
libcuda (tests/runtime_fake_libcuda.c, built with the C compiler, whose cuLaunchKernelEx only
records its arguments) and a fake compile(). It measures the host Python work of newt's launch
path (key, lookup, grid, packing, the ctypes call), in CPU microseconds per launch, as the
minimum over batches of thread CPU time (robust to a busy machine). It is not the GPU figure:
the real driver's cuLaunchKernelEx adds a few microseconds on top.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import common
import newt
import newt.language as nl
from newt.testing import assert_close


@newt.jit
def matmul_shaped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                         stride_bn, stride_cm, stride_cn, BLOCK_K: nl.constexpr):
    # c[i, i] = sum_k a[i, k] * b[k, i]: matmul's 12 arguments, a body cheap enough that
    # launching, not computing, is what gets measured
    i = nl.program_id(0)
    ks = nl.arange(0, BLOCK_K)
    kmask = ks < K
    a = nl.load(a_ptr + i * stride_am + ks * stride_ak, mask=kmask, other=0.0)
    b = nl.load(b_ptr + ks * stride_bk + i * stride_bn, mask=kmask, other=0.0)
    nl.store(c_ptr + i * stride_cm + i * stride_cn, nl.sum(a * b, axis=0),
             mask=(i < M) & (i < N))


AOT = [dict(fn=matmul_shaped_kernel,
            signature={"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32",
                       "N": "i32", "K": "i32", "stride_am": "i32", "stride_ak": "i32",
                       "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32",
                       "stride_cn": "i32"},
            constexprs={"BLOCK_K": 64}, num_warps=4)]


def launch_matmul_shaped(k, a, b, c):
    m, kk = a.shape
    n = b.shape[1]
    k[(min(m, n),)](a, b, c, m, n, kk, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1), BLOCK_K=64, num_warps=4)


def host_us_per_launch(calls: dict, n=2000, batches=7, warmup=2000,
                       sync=torch.cuda.synchronize, wait_timed=True,
                       window_s=0.0, max_batches=1000) -> tuple[dict, dict]:
    """Wall clock per launch, per provider of `calls` ({name: fn}): batches of n back-to-back
    launches, the providers interleaved batch by batch (the order rotated each round, as the
    GPU rows are timed), the queue emptied (sync) after each batch. Returns ({name: minimum
    over the batches}, {name: median}); the rows report the minimum, as `timeit` does: what
    else runs on the host (other processes, a clock still ramping up) only ever adds time to
    a batch, so the fastest batch is the launch path's own cost; the medians go to the
    results file. The warm-up (2,000 launches each) lets the host CPU reach its clock first.
    `window_s`: rounds go on until that much time has passed since the first one (max_batches
    only bounds tiny calls: the CPU tests'). After seconds of heavy GPU work the host itself
    runs slower for a few seconds, every provider and even an empty loop alike
    (benchmarks/launch_drift.py): a window longer than that lets the minimum see a settled
    host wherever the rows fall in a run.
    `wait_timed`: the timing ends after the wait for the GPU (the warm-launch rows); without
    it, at the last launch (the enqueue-only row, with n far below the depth of the launch
    queue, so that the host never waits for the GPU: it shows whether the rows with the wait
    time the host or a GPU running the tiny kernels slower than they come)."""
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    sync()
    names = list(calls)
    per: dict = {p: [] for p in names}
    start = time.perf_counter()
    r = 0
    while r < batches or (time.perf_counter() - start < window_s and r < max_batches):
        k = r % len(names) if names else 0
        for p in names[k:] + names[:k]:
            fn = calls[p]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            if wait_timed:
                sync()
            per[p].append((time.perf_counter() - t0) / n * 1e6)
            sync()
        r += 1
    return ({p: min(v) for p, v in per.items()}, {p: statistics.median(v) for p, v in per.items()})


# how long each warm-launch row samples the host (host_us_per_launch's window_s): longer than
# the slow spell of a host that just ran the memory-bound rows (launch_drift.py saw 3 s or more)
WINDOW_S = 5.0


def _row(workload, unit, **kw):
    row = dict(bench="launch", workload=workload, unit=unit, higher_is_better=False,
               newt=None, triton=None, torch=None, errors={})
    row.update(kw)
    return row


def warm_rows(providers, dev="cuda", n=2000, batches=7, warmup=2000,
              sync=torch.cuda.synchronize, window_s=WINDOW_S):
    """The warm-launch rows; `providers` maps a name to {"add": kernel, "mm": kernel}. Each
    row's providers are timed together (host_us_per_launch); a provider whose check fails is
    left out of the row with its error."""
    x = torch.randn(4096, device=dev)
    y = torch.randn(4096, device=dev)
    out = torch.full_like(x, float("nan"))
    a = torch.randn(64, 64, device=dev)
    b = torch.randn(64, 64, device=dev)
    c = torch.zeros(64, 64, device=dev)
    tiny = _row("warm launch: 4-arg vector add (host us)", "us", target_abs=6.0,
                target_ratio=0.35)
    wide = _row("warm launch: 12-arg matmul-shaped kernel (host us)", "us", target_abs=8.0)
    # the same launches timed without the final wait for the GPU: whether the rows above are
    # host time (no target here: the targets stay on the rows above)
    enq = _row("warm launch, enqueue only: 4-arg vector add (host us)", "us")
    adds, mms = {}, {}
    for p, ks in providers.items():
        try:
            out.fill_(float("nan"))
            common.launch_add(ks["add"], x, y, out)
            assert_close(out, x + y, msg=f"{p} add")
            # the call a user's loop makes, grid precomputed: what is left is the launch path
            adds[p] = (lambda k=ks["add"], g=(4,):
                       k[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4))
        except Exception as exc:
            tiny["errors"][p] = f"{type(exc).__name__}: {str(exc)[:400]}"
        try:
            c.zero_()
            launch_matmul_shaped(ks["mm"], a, b, c)
            assert_close(c.diagonal(), (a @ b).diagonal(), atol=1e-4, rtol=1e-4,
                         msg=f"{p} matmul-shaped")
            mms[p] = (lambda k=ks["mm"], g=(64,): k[g](a, b, c, 64, 64, 64, 64, 1, 64, 1, 64,
                                                      1, BLOCK_K=64, num_warps=4))
        except Exception as exc:
            wide["errors"][p] = f"{type(exc).__name__}: {str(exc)[:400]}"
    adds["torch"] = lambda: torch.add(x, y, out=out)
    for row, calls, kw in ((tiny, adds, {}), (wide, mms, {}),
                           (enq, adds, dict(n=max(1, n // 10), wait_timed=False,
                                            max_batches=10000))):
        best, med = host_us_per_launch(calls, **{**dict(n=n, batches=batches, warmup=warmup,
                                                         sync=sync, window_s=window_s), **kw})
        row.update(best)
        row["median"] = med
    return [tiny, wide, enq]


def _first_call(provider, names, cache_root):
    env = dict(os.environ)
    env["NEWT_CACHE_DIR"] = os.path.join(cache_root, "newt")
    env["TRITON_CACHE_DIR"] = os.path.join(cache_root, "triton")
    env["PYTHONPATH"] = os.pathsep.join([common.ROOT, env.get("PYTHONPATH", "")]).rstrip(":")
    # Python's bytecode cache on, as for an installed package (pip compiles it at install): the
    # cold run writes it, the warm run reads it. Without it every process compiles the runtime
    # modules its first launch imports from their source, about 10 ms on the H200
    # (first_call_parts.py); Triton's figure is timed under the same setting.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "first_call.py")
    p = subprocess.run([sys.executable, script, provider, ",".join(names)], env=env,
                       capture_output=True, text=True, timeout=180)
    if p.returncode != 0:
        raise RuntimeError(f"first_call.py {provider} failed:\n{p.stderr[-1500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _process_rows(providers):
    names = ["add", "softmax", "layernorm"]
    first = _row("first call, fresh process, warm disk cache: add (ms)", "ms", target_abs=50.0)
    cold = {n: _row(f"cold compile, empty caches, first call: {n} (ms)", "ms",
                    **({"target_abs": 300.0} if n != "add" else {})) for n in names}
    for p in providers:
        with tempfile.TemporaryDirectory(prefix=f"bench-launch-{p}-") as root:
            try:
                c = _first_call(p, names, root)  # empty folder: every kernel compiles
                for n in names:
                    cold[n][p] = c[n]
                first[p] = _first_call(p, ["add"], root)["add"]  # same folder, now warm
            except Exception as exc:
                for r in [first, *cold.values()]:
                    r["errors"][p] = f"{type(exc).__name__}: {str(exc)[:600]}"
    return [first, *cold.values()]


def run(out_dir=None, quick=False):
    """Rows for run_all.py (see its docstring for the row format)."""
    providers = {"newt": {"add": common.newt_kernel("add"), "mm": matmul_shaped_kernel}}
    if common.have_triton():
        try:
            providers["triton"] = {"add": common.triton_twin(providers["newt"]["add"]),
                                   "mm": common.triton_twin(matmul_shaped_kernel)}
        except Exception as exc:
            print(f"note: Triton twins failed: {exc}")
    rows = warm_rows(providers)
    rows += _process_rows(providers)
    return rows


def _cpu_us_per_call(fn, n=2000, batches=40) -> float:
    """Minimum over batches of thread CPU time per call: other processes on a shared machine
    inflate the wall clock, not the CPU time of this thread."""
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(batches):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, time.thread_time() - t0)
    return best / n * 1e6


def stand_in_rows():
    """Warm-launch rows on the stand-in driver (no GPU): CPU us per launch of newt's Python
    launch path, for the two argument lists of warm_rows and three ways of passing the grid."""
    import functools
    import ctypes
    sys.path.insert(0, os.path.join(common.ROOT, "tests"))
    import newt.compiler
    from newt.runtime import driver, launch, specialize
    from runtime_fakes import FakeCompile, build_fake_libcuda
    tmp = tempfile.mkdtemp(prefix="newt-stand-in-")
    os.environ["NEWT_CACHE_DIR"] = os.path.join(tmp, "cache")
    cu = driver.load_library(build_fake_libcuda(tmp))
    ctypes.c_int.in_dll(cu, "fake_nparams").value = 0
    driver._lib = cu
    driver.current_device_index = lambda: 0
    specialize.specialize = functools.partial(specialize.specialize, allow_cpu=True)
    launch._raw_stream_getter = lambda: abs   # a C builtin of one int, like torch's getter
    newt.compiler.compile = FakeCompile()
    newt.options.flags.interpret = False

    add, mm = common.newt_kernel("add"), matmul_shaped_kernel
    x, y, out = torch.randn(4096), torch.randn(4096), torch.empty(4096)
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    g, g2 = (4,), (64,)
    calls = {
        "4-arg add, grid tuple reused":
            lambda: add[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4),
        "4-arg add, new grid tuple per call":
            lambda: add[(newt.cdiv(4096, 1024),)](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4),
        "4-arg add, grid lambda per call":
            lambda: add[lambda m: (newt.cdiv(m["n_elements"], m["BLOCK_SIZE"]),)](
                x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4),
        "12-arg matmul-shaped, grid tuple reused":
            lambda: mm[g2](a, b, c, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_K=64, num_warps=4),
        "empty Python call (floor)": lambda: None,
    }
    return {name: _cpu_us_per_call(fn) for name, fn in calls.items()}


if __name__ == "__main__" and "--stand-in" in sys.argv:
    print("newt launch path on the stand-in driver: CPU us per launch (min over batches of "
          "thread time; not the GPU figure)")
    for name, us in stand_in_rows().items():
        print(f"  {name:45s} {us:6.2f} us")
elif __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        vals = "  ".join(f"{p}={r[p]:.2f}" for p in ("newt", "triton", "torch") if r[p])
        print(f"{r['workload']:55s} {vals} {r['unit']}", *r["errors"].items())
