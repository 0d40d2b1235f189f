"""Tuning one kernel on one set of arguments: the oracle, the checks, the timings, the summary.

    tune(kernel, args, kwargs, effort) -> (Config, summary line)

1. Trace once on the real arguments -> the search space (space.py).
2. Run the oracle, `kernel.ref`, on cloned arguments -> expected outputs (return value and every
   tensor argument, so explicit `out` arguments count).
3. For each batch the search asks about: on a GPU, compile every candidate in worker processes
   first (workers.py); then run each candidate on fresh clones with its write-only outputs
   poisoned (NaN), compare with the oracle (space.tolerance), and only if it agrees time the
   recorded launches (newt.testing.do_bench: CUDA events, L2 flush, median).
4. A progress bar while it runs, then ONE summary line: configs tried, rejected, failed, best.
"""
from __future__ import annotations

import sys
import time

import torch

from ..lower import lower
from . import workers
from .search import BUDGETS, Result, search
from .space import Space, tolerance


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(i) for i in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _tensors(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for i in x:
            _tensors(i, out)
    elif isinstance(x, dict):
        for i in x.values():
            _tensors(i, out)
    return out


def outputs(ret, args, kwargs):
    """Everything a run can change: its return value and its tensor arguments."""
    return _tensors(ret, []) + _tensors(list(args), []) + _tensors(kwargs, [])


def compare(got, expected, tf32=False) -> str:
    """'' when every output matches the oracle within tolerance, else what differs."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, the oracle has {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or g.dtype != e.dtype:
            return f"output {i}: {tuple(g.shape)} {g.dtype} vs oracle {tuple(e.shape)} {e.dtype}"
        rtol, atol = tolerance(e.dtype, tf32)
        if g.device != e.device:
            g = g.to(e.device)
        if e.dtype.is_floating_point:   # on the device: outputs can be hundreds of MB
            # The absolute part scales with the output's RMS: an eager fp16 matmul rounds (and
            # on GPUs may reduce in fp16) where the kernel accumulates in fp32, so a cancelling
            # element of a large-K product can differ by a few fp16 steps of the typical
            # magnitude. A wrong config (a broken mask, a missing tile) is off by O(RMS).
            ef = e.float()
            finite = ef[torch.isfinite(ef)]
            rms = float(finite.square().mean().sqrt()) if finite.numel() else 0.0
            ok = torch.isclose(g.float(), ef, rtol=rtol, atol=atol * max(1.0, rms), equal_nan=True)
        else:
            ok = g == e
        if not bool(ok.all()):
            n = int((~ok).sum())
            idx = tuple(int(j) for j in (~ok).nonzero()[0])
            return (f"output {i}: {n} of {ok.numel()} elements differ, e.g. at {idx}: "
                    f"{g[idx].item()} vs oracle {e[idx].item()}")
    return ""


def _cuda_timer(fn):
    from newt.testing import do_bench
    return do_bench(fn, warmup=10, rep=40, return_mode="median")


def _cpu_timer(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


class Progress:
    """tqdm when installed, else a one-line counter on stderr."""

    def __init__(self, total, desc, enabled=True):
        self.n, self.total, self.desc, self.enabled, self.bar = 0, total, desc, enabled, None
        if enabled:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
            except ImportError:
                pass

    def update(self):
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            sys.stderr.write(f"\r{self.desc}: {self.n}/{self.total} configs")
            sys.stderr.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.n:
            sys.stderr.write("\r" + " " * (len(self.desc) + 24) + "\r")
            sys.stderr.flush()


def precompile(kernel, programs, cfgs, task_fn=None) -> dict:
    """Compile every (config, program) in worker processes; {config: error} for failures.
    `task_fn` defaults to workers.warm_kernel (the JIT's own compile, on the GPU)."""
    from ..kernel import bind
    lowered = [lower(p, kernel.static_shapes) for p in programs]
    tasks, owners = [], []
    for cfg in cfgs:
        for low in lowered:
            try:
                tasks.append(workers.task_of(bind(low, cfg, None)))
                owners.append(cfg)
            except Exception as e:
                tasks.append(None)
                owners.append((cfg, str(e)))
    real = [(t, o) for t, o in zip(tasks, owners) if t is not None]
    failed = {o[0]: o[1] for t, o in zip(tasks, owners) if t is None}
    for (t, cfg), (ok, msg) in zip(real, workers.compile_all([t for t, _ in real], task_fn or workers.warm_kernel)):
        if not ok:
            failed.setdefault(cfg, msg)
    return failed


def check_and_time(kernel, cfg, args, kwargs, expected, tf32, timer) -> Result:
    cargs, ckw = _clone(args), _clone(kwargs)
    rec = []
    try:
        ret = kernel.run(cargs, ckw, cfg, record=rec, poison=True)
        if any(t.is_cuda for t in expected):
            torch.cuda.synchronize()
    except Exception as e:
        return Result("failed", detail=f"{type(e).__name__}: {e}")
    bad = compare(outputs(ret, cargs, ckw), expected, tf32)
    if bad:
        return Result("rejected", detail=bad)
    return Result("ok", float(timer(lambda: [launch() for launch in rec])))


def tune(kernel, args, kwargs, effort, timer=None, progress=True):
    t0 = time.perf_counter()
    tracer = kernel.trace(*args, **kwargs)
    space = Space(tracer)
    name = kernel.__name__
    if effort == "none" and not kernel.configs:
        cfg = space.default()
        return cfg, f"[deuteron] {name}: autotune_effort='none', default {cfg}"
    ref_args, ref_kwargs = _clone(args), _clone(kwargs)
    expected = outputs(kernel.ref(*ref_args, **ref_kwargs), ref_args, ref_kwargs)
    on_gpu = any(t.is_cuda for t in expected)
    tf32 = space.fp32_dot and torch.get_float32_matmul_precision() != "highest"
    timer = timer or (_cuda_timer if on_gpu else _cpu_timer)
    total = len(kernel.configs) if kernel.configs else BUDGETS.get(effort, BUDGETS["quick"])[1]
    bar = Progress(total, f"[deuteron] tuning {name}", progress)

    def evaluate(cfgs):
        failed = precompile(kernel, tracer.programs, cfgs) if on_gpu else {}
        out = {}
        for cfg in cfgs:
            if cfg in failed:
                out[cfg] = Result("failed", detail=failed[cfg])
            else:
                out[cfg] = check_and_time(kernel, cfg, args, kwargs, expected, tf32, timer)
            bar.update()
        return out

    try:
        best, results = search(space, evaluate, effort, candidates=kernel.configs)
    finally:
        bar.close()
    n = len(results)
    rej = sum(r.status == "rejected" for r in results.values())
    fail = sum(r.status == "failed" for r in results.values())
    secs = time.perf_counter() - t0
    head = (f"[deuteron] {name}: {n} configs tried, {rej} rejected (wrong result), "
            f"{fail} failed to compile or launch")
    if best is None:
        details = "; ".join(f"{c}: {r.status}: {r.detail}" for c, r in list(results.items())[:3])
        raise RuntimeError(f"{head}: no config produced the oracle's result ({details})")
    summary = f"{head}; best {results[best].ms:.4f} ms with {best} ({secs:.1f} s)"
    kernel.last_results = results
    if progress:
        print(summary)
    return best, summary
