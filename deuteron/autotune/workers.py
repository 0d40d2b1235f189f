"""Compiling candidates in worker processes, so that a compiler crash kills a worker and not the
user's process (NVRTC has been seen to segfault on some inputs).

`compile_all(tasks, fn)` runs `fn(task) -> (ok, message)` for every task in a spawn-context
ProcessPoolExecutor. A broken pool (a worker died) fails only the task that killed it: the tasks
caught in the breakage are re-run in halves until the culprit is alone, then marked failed.

For newt on a GPU, `warm_kernel` is the task: exec the generated source, then launch it on a
zero-sized grid with stand-in arguments that have the same specialization (dtype, 16-byte
alignment, ints equal to 1 or divisible by 16). The JIT compiles on that key and writes its disk
cache, so the user's process later finds the binary there instead of compiling serially.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from concurrent.futures.process import BrokenProcessPool

_POOL = None
_POOL_SIZE = 0


def _pool(n):
    global _POOL, _POOL_SIZE
    if _POOL is None or _POOL_SIZE != n:
        shutdown()
        _POOL = cf.ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
        _POOL_SIZE = n
    return _POOL


def shutdown():
    global _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = None


def default_workers() -> int:
    return max(1, min(16, (os.cpu_count() or 2)))


def compile_all(tasks: list, fn, max_workers: int | None = None, timeout: float = 300.0) -> list:
    """[(ok, message)] for each task, in order."""
    if not tasks:
        return []
    n = max(1, min(max_workers or default_workers(), len(tasks)))
    results = [None] * len(tasks)
    broken = []
    try:
        pool = _pool(n)
        futures = [pool.submit(fn, t) for t in tasks]
    except BrokenProcessPool:
        shutdown()
        futures = None
    if futures is None:
        broken = list(range(len(tasks)))
    else:
        for i, f in enumerate(futures):
            try:
                results[i] = f.result(timeout=timeout)
            except BrokenProcessPool:
                broken.append(i)
            except cf.TimeoutError:
                results[i] = (False, f"compile timed out after {timeout:.0f} s")
            except Exception as e:   # the task raised: an ordinary compile error
                results[i] = (False, f"{type(e).__name__}: {e}")
    if broken:
        shutdown()
        if len(broken) == 1:
            results[broken[0]] = (False, "the compiler crashed (worker process died)")
        else:
            half = len(broken) // 2
            for part in (broken[:half], broken[half:]):
                for i, r in zip(part, compile_all([tasks[i] for i in part], fn, max_workers, timeout)):
                    results[i] = r
    return results


# ----------------------------------------------------------------------------- the newt task

_EXECED: dict = {}


def warm_kernel(task) -> tuple:
    """task = (source, name, arg specs, kwargs). Arg spec: ("tensor", dtype name, aligned, large)
    or ("value", v)."""
    import torch
    from ..kernel import exec_source
    source, name, specs, kwargs = task
    jf = _EXECED.get(source)
    if jf is None:
        jf = _EXECED[source] = exec_source(source, name)
    args = []
    for s in specs:
        if s[0] == "tensor":
            t = torch.empty(2, dtype=getattr(torch, s[1]), device="cuda")
            if not s[2]:
                t = t[1:]
            if s[3]:
                t = t[:1].expand(2**31 + 1)
            args.append(t)
        else:
            args.append(s[1])
    jf[(0,)](*args, **kwargs)    # compiles (into the disk cache), launches nothing
    return True, ""


def aot_kernel(task) -> tuple:
    """The same task compiled ahead of time with newt.compile for sm_90a (no GPU needed): lets
    CI exercise the worker path, and reports compile errors the same way."""
    import newt
    from newt import dtypes as D
    from ..kernel import exec_source
    source, name, specs, kwargs = task
    jf = _EXECED.get(source)
    if jf is None:
        jf = _EXECED[source] = exec_source(source, name)
    import inspect
    params = [p for p in inspect.signature(jf.fn).parameters if p not in kwargs]
    sig = {}
    for p, s in zip(params, specs):
        if s[0] == "tensor":
            sig[p] = "*" + D.from_name(s[1]).short
        else:
            sig[p] = "i32" if -2**31 <= s[1] < 2**31 else "i64"
    consts = {k: v for k, v in kwargs.items() if k not in ("num_warps", "num_stages")}
    ck = newt.compile(jf, sig, consts, arch="sm_90a", num_warps=kwargs.get("num_warps", 4),
                      num_stages=kwargs.get("num_stages", 3))
    return True, f"{ck.n_regs} registers, {ck.n_spills} spills"


def task_of(launch) -> tuple:
    """The picklable warm-up task of a recorded deuteron Launch (kernel.Launch)."""
    import torch
    specs = []
    for a in launch.args:
        if isinstance(a, torch.Tensor):
            specs.append(("tensor", str(a.dtype).replace("torch.", ""), a.data_ptr() % 16 == 0,
                          a.numel() > 2147483647))
        else:
            specs.append(("value", a))
    return (launch.source, launch.name, specs, dict(launch.kwargs))
