"""Tuning one kernel on one set of arguments: the oracle, the checks, the timings, the summary.

    tune(kernel, args, kwargs, effort) -> (Config, summary line)

1. Trace once on the real arguments -> the search space (space.py), which already leaves out
   configs that cannot be good (shared memory over the limit, more values per thread than
   registers hold).
2. For each batch the search asks about: on a GPU, start compiling every candidate in forked
   children (workers.py) into newt's disk cache; the first batch compiles while the oracle,
   `kernel.ref`, runs on cloned arguments (expected outputs: the return value and every tensor
   argument, so explicit `out` arguments count).
3. A candidate whose ptxas report shows register spills is not run (and the space drops every
   config with at least its pressure), unless all candidates spill. The others run on fresh
   clones with their write-only outputs poisoned (NaN), are compared with the oracle
   (space.tolerance), and only if they agree are timed (newt.testing.do_bench: CUDA events, L2
   flush, median).
4. A progress bar while it runs, then ONE summary line: configs tried, rejected, failed to
   compile, not run for spills, best time, seconds spent (and compiling).
"""
from __future__ import annotations

import contextlib
import sys
import time

import torch

from ..lower import lower
from . import workers
from .search import BUDGETS, SECONDS, Result, search
from .space import Space, tolerance


def _clone(x):
    if isinstance(x, torch.Tensor):
        return _clone_tensor(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(i) for i in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _clone_tensor(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides, even for views with gaps (`clone` would make those
    contiguous): candidates then run with the user's real strides, under the specialization
    their workers compiled."""
    if t.is_contiguous() or t.numel() == 0 or 0 in t.stride() or t.is_sparse:
        return t.clone()
    try:
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        return out.copy_(t)
    except RuntimeError:
        return t.clone()


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


def _final_timer(fn):
    from newt.testing import do_bench
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


# The search times each candidate once, briefly; neighbours within a few percent are then told
# apart by noise (on the H200 a 4096^3 matmul tuned to a config 7% slower than the best one
# the hand-written sweep found). The finalists are timed again, longer, one after another.
FINALISTS = 3


def _final_round(best, results, retime):
    ok = sorted((r.ms, i, c) for i, (c, r) in enumerate(results.items()) if r.status == "ok")
    if len(ok) < 2:
        return best
    again = {}
    for _, _, cfg in ok[:FINALISTS]:
        r = retime(cfg)
        if r.status == "ok":
            again[cfg] = r.ms
    if not again:
        return best
    pick = min(again, key=again.get)
    results[pick] = Result("ok", again[pick], results[pick].detail)
    return pick


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


def programs_by_config(kernel, tracer, args, kwargs):
    """The programs a run under each config launches: the trace's own (a list), unless the
    kernel registers block sizes or tunables, whose values host code and tile shapes may read
    (`hl.zeros([block_size_m, block_size_n])`): then config -> programs, each distinct choice
    traced again (compiling the default's programs for it would compile another kernel)."""
    slots = [d.index for d in tracer.tunable if getattr(d, "bs_range", None) is not None]
    if not slots and not tracer.tunables:
        return tracer.programs
    seen = {}

    def of(cfg):
        key = (tuple(cfg.block_sizes[i:i + 1] for i in slots), cfg.tunables)
        if key not in seen:
            seen[key] = kernel.trace_under(cfg, args, kwargs).programs
        return seen[key]
    return of


def compile_jobs(kernel, programs, cfgs, arch) -> tuple:
    """([(config, job)], {config: error}) for every (config, program) pair: one newt compile
    job each (workers.job_of), or the error binding that config raised. `programs`: a list, or
    config -> list (programs_by_config)."""
    from ..kernel import bind
    from ..split import bind_split, launches
    of = programs if callable(programs) else (lambda cfg: programs)
    lowered = {}
    jobs, failed = [], {}
    for cfg in cfgs:
        progs = of(cfg)
        if id(progs) not in lowered:
            lowered[id(progs)] = (progs, [lower(p, kernel.static_shapes) for p in progs])
        for p, low in zip(*lowered[id(progs)]):
            try:
                split = bind_split(kernel, p, cfg)          # its two kernels, or None
                calls = launches(split[1]) if split else [bind(low, cfg, kernel.jit_function(low))]
                jobs += [(cfg, workers.job_of(call, arch)) for call in calls]
            except Exception as e:
                failed.setdefault(cfg, f"{type(e).__name__}: {e}")
    return jobs, failed


class Compiles:
    """The compiles of one batch of configs, running in forked children while the caller goes
    on (the first batch overlaps the oracle run). `done()` -> {config: ("ok", report) |
    ("failed", message) | ("skipped", why)}; the report of a config with several programs
    adds up their spills."""

    def __init__(self, kernel, programs, cfgs, arch, deadline=None, job_timeout=120.0):
        workers.warm_compiler()
        self.cfgs = list(cfgs)
        jobs, self.failed = compile_jobs(kernel, programs, self.cfgs, arch)
        jobs = [(c, j) for c, j in jobs if c not in self.failed]
        self.owners = [c for c, _ in jobs]
        self.batch = workers.start([j for _, j in jobs], workers.compile_job,
                                   deadline=deadline, job_timeout=job_timeout)

    def done(self) -> dict:
        out = {c: ("failed", e) for c, e in self.failed.items()}
        for cfg, (status, payload) in zip(self.owners, self.batch.results()):
            prev = out.get(cfg)
            if prev is not None and prev[0] != "ok":
                continue
            if status == "ok":
                if prev is not None:
                    payload = {k: prev[1][k] + payload[k] for k in payload}
                out[cfg] = ("ok", payload)
            elif status == "skipped":
                out[cfg] = ("skipped", payload)
            else:
                out[cfg] = ("failed", payload)
        return out


def precompile(kernel, programs, cfgs, arch="sm_90a", deadline=None) -> dict:
    """Compile every (config, program) in forked children into newt's disk cache:
    {config: ("ok", ptxas report) | ("failed", message) | ("skipped", why)}."""
    return Compiles(kernel, programs, cfgs, arch, deadline).done()


def spills(report) -> int:
    return int(report.get("n_spills", 0) or 0) + int(report.get("local_bytes", 0) or 0)


def check_and_time(kernel, cfg, args, kwargs, expected, tf32, timer) -> Result:
    cargs, ckw = _clone(args), _clone(kwargs)
    rec = []
    state = torch.get_rng_state()     # every candidate draws the oracle's seeds (rng.py)
    try:
        ret = kernel.run(cargs, ckw, cfg, record=rec, poison=True)
        if any(t.is_cuda for t in expected):
            torch.cuda.synchronize()
    except Exception as e:
        return Result("failed", detail=f"{type(e).__name__}: {e}")
    finally:
        torch.set_rng_state(state)
    bad = compare(outputs(ret, cargs, ckw), expected, tf32)
    if bad:
        return Result("rejected", detail=bad)
    return Result("ok", float(timer(lambda: [launch() for launch in rec])))


# A compile that takes longer is killed and its config counts as failed: the slow ones are
# register-starved configs the space should have left out.
JOB_TIMEOUT = {"quick": 60.0, "full": 120.0}


def _gpu_of(args, kwargs):
    """The index of the first CUDA tensor argument's device, or None (CPU tensors run on the
    interpreter: nothing to compile, nothing to time with CUDA events)."""
    for t in _tensors(list(args), []) + _tensors(kwargs, []):
        if t.is_cuda:
            return t.get_device()
    return None


def _on_gpu(index):
    """A block in which `index` is torch's current device: the candidates launch on their
    tensors' device, and the CUDA events timing them must be recorded on that device's stream,
    whichever device the caller has current."""
    if index is None:
        return contextlib.nullcontext()
    from newt.runtime import driver
    return driver.device_scope(index)


def tune(kernel, args, kwargs, effort, timer=None, progress=True, arch=None, quiet=False):
    """`arch` forces compiling candidates for that arch in workers before they run (tests on the
    CPU); by default they are compiled for the GPU the arguments live on, and not at all on the
    interpreter."""
    t0 = time.perf_counter()
    tracer = kernel.trace(*args, **kwargs)
    space = Space(tracer)
    programs = programs_by_config(kernel, tracer, args, kwargs)
    name = kernel.__name__
    gpu = _gpu_of(args, kwargs)
    if effort == "none" and not kernel.configs:
        cfg = space.default() if gpu is not None else space.few_programs(space.default())
        return cfg, f"[deuteron] {name}: autotune_effort='none', default {cfg}"
    on_gpu = gpu is not None
    if arch is None and on_gpu:
        from newt.runtime import driver
        arch = driver.Device.get(gpu).arch
    deadline = time.monotonic() + SECONDS.get(effort, SECONDS["quick"])
    oracle = {}

    def expected():
        if "out" not in oracle:
            ref_args, ref_kwargs = _clone(args), _clone(kwargs)
            state = torch.get_rng_state()   # the call after tuning draws these seeds again
            try:
                oracle["out"] = outputs(kernel.ref(*ref_args, **ref_kwargs), ref_args,
                                        ref_kwargs)
            finally:
                torch.set_rng_state(state)
        return oracle["out"]

    tf32 = space.fp32_dot and torch.get_float32_matmul_precision() != "highest"
    timer = timer or (_cuda_timer if on_gpu else _cpu_timer)
    total = len(kernel.configs) if kernel.configs else BUDGETS.get(effort, BUDGETS["quick"])[1]
    bar = Progress(total, f"[deuteron] tuning {name}", progress and not quiet)
    stats = {"compile_s": 0.0}
    spilled = {}

    def evaluate(cfgs):
        tc = time.perf_counter()
        comp = (Compiles(kernel, programs, cfgs, arch, deadline,
                         job_timeout=JOB_TIMEOUT.get(effort, 60.0)) if arch else None)
        stats["compile_s"] += time.perf_counter() - tc
        exp = expected()                   # the first batch compiles while the oracle runs
        tc = time.perf_counter()
        built = comp.done() if comp is not None else {}
        stats["compile_s"] += time.perf_counter() - tc
        out = {}
        for cfg in cfgs:
            status, info = built.get(cfg, ("ok", {}))
            if status == "skipped":
                continue
            if status == "failed":
                out[cfg] = Result("failed", detail=info)
            elif spills(info):             # slow for sure: run only if nothing else works
                out[cfg] = Result("spills", detail=f"ptxas: {info.get('n_regs')} registers, "
                                  f"{info.get('local_bytes')} bytes of local memory")
                spilled[cfg] = out[cfg]
                space.note_spill(cfg)
            else:
                out[cfg] = check_and_time(kernel, cfg, args, kwargs, exp, tf32, timer)
            bar.update()
        return out

    with _on_gpu(gpu):
        try:
            best, results = search(space, evaluate, effort, candidates=kernel.configs,
                                   deadline=deadline)
            if best is None and spilled:       # every candidate spills: take the best of those
                for cfg in spilled:
                    results[cfg] = check_and_time(kernel, cfg, args, kwargs, expected(), tf32,
                                                  timer)
                ok = [(r.ms, c) for c, r in results.items() if r.status == "ok"]
                best = min(ok, key=lambda t: t[0])[1] if ok else None
            best = _final_round(best, results, lambda cfg: check_and_time(
                kernel, cfg, args, kwargs, expected(), tf32, _final_timer if on_gpu else timer))
        finally:
            bar.close()
    n = len(results)
    rej = sum(r.status == "rejected" for r in results.values())
    fail = sum(r.status == "failed" for r in results.values())
    n_spill = sum(r.status == "spills" for r in results.values())
    secs = time.perf_counter() - t0
    head = (f"[deuteron] {name}: {n} configs tried, {rej} rejected (wrong result), "
            f"{fail} failed to compile or launch")
    if n_spill:
        head += f", {n_spill} not run (register spills)"
    if best is None:
        details = "; ".join(f"{c}: {r.status}: {r.detail}" for c, r in list(results.items())[:3])
        raise RuntimeError(f"{head}: no config produced the oracle's result ({details})")
    when = f"{secs:.1f} s" + (f", {stats['compile_s']:.1f} s compiling" if arch else "")
    summary = f"{head}; best {results[best].ms:.4f} ms with {best} ({when})"
    kernel.last_results = results
    if progress:
        print(summary)
    return best, summary
