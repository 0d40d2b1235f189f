"""Config, @autotune and @heuristics, with Triton's semantics.

Sits above jit.py: an Autotuner (or Heuristics) wraps a JITFunction (or another wrapper) and, per
call, adds meta-parameters before calling the wrapped `.run`. The Autotuner times every config
(after pruning) on the first call for each value of its `key` arguments (plus the dtypes of the
tensor arguments, as Triton does, and the name of the GPU they live on), keeps the fastest per key
in memory, and launches it. The timing runs on the arguments' GPU, made torch's current device
for it (events and synchronizations work on the current device).
Timing uses newt.testing.do_bench when present (CUDA events, median), else a local event timer.
Under NEWT_INTERPRET=1 the first config is used, untimed.
"""
from __future__ import annotations

import contextlib
import math

from torch import Tensor as _Tensor

from . import compile_names, options
from .errors import CompilationError, LaunchError, NVRTCError
from .jit_host import descriptor_class
from .tensor_like import device_index, is_pointer_like

_SCALARS = (int, float, bool, type(None), str)


def driver_scope(index: int):
    """runtime/driver.py's device_scope (late: the driver loads with the first launch)."""
    from .runtime import driver
    return driver.device_scope(index)


class Config:
    """One point of a tuning space: meta-parameters (constexpr values) and launch options."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
                 pre_hook=None):
        self.kwargs = dict(kwargs)
        self.num_warps, self.num_stages = num_warps, num_stages
        self.num_ctas, self.maxnreg = num_ctas, maxnreg  # accepted for Triton source; unused
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __str__(self):
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_stages: {self.num_stages}"]
        return ", ".join(parts)

    __repr__ = __str__


def _innermost(fn):
    while not hasattr(fn, "constexpr_names") and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


class _Wrapper:
    """Shared by Autotuner and Heuristics: `kernel[grid](...)` calls `run`."""

    def __getitem__(self, grid):
        run = self.run
        return lambda *args, **kwargs: run(*args, grid=grid, **kwargs)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @newt.jit kernel: launch it as "
                           f"{self.__name__}[grid](...)")


def _default_bench():
    import functools

    from .testing import do_bench      # (late: newt.testing imports torch)
    # the median, as Triton's autotuner ranks configs (do_bench's own default is the mean)
    return functools.partial(do_bench, return_mode="median")


class Autotuner(_Wrapper):
    def __init__(self, fn, configs, key, prune_configs_by=None, reset_to_zero=None,
                 restore_value=None, pre_hook=None, post_hook=None, warmup=25, rep=100,
                 do_bench=None, compile_workers=None, cache_results=False):
        self.fn = fn
        self.jit = _innermost(fn)
        self.__name__ = getattr(self.jit, "__name__", "kernel")
        self.compile_name = compile_names.assign(self, self.__name__)   # for torch.compile
        self.arg_names = list(self.jit.arg_names)
        self._defaults = [(n, p.default) for n, p in self.jit.signature.parameters.items()
                          if p.default is not p.empty]
        self.configs = list(configs) or [Config({})]
        # a key name that is not a parameter is skipped, as Triton skips it (its tutorial 08
        # misspells one); the names of tensors to reset or restore must exist
        self.keys = list(key)
        for k in list(reset_to_zero or []) + list(restore_value or []):
            if k not in self.arg_names:
                raise ValueError(f"autotune of {self.__name__}: {k!r} is not a parameter "
                                 f"({', '.join(self.arg_names)})")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.user_pre_hook, self.user_post_hook = pre_hook, post_hook
        prune = prune_configs_by or {}
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k")
        self.early_config_prune = prune.get("early_config_prune")
        self.warmup, self.rep = warmup, rep
        self.do_bench = do_bench
        self.compile_workers = compile_workers   # None: one per core; 0: compile in-process
        self.cache_results = cache_results       # winners also on disk, for later processes
        self.cache: dict = {}          # key tuple -> best Config
        self.best_config = None
        self.bench_times: dict = {}    # last tuning: Config -> ms

    def _key(self, named: dict):
        """(the tuning key, the index of the GPU the arguments live on or -1). The key: the
        `key` arguments' values and every tensor's dtype, as Triton's, then the name of that GPU:
        two GPUs of one kind share a winner, GPUs of two kinds (a config fast on one may be
        slow, or out of shared memory, on the other) do not."""
        key = [named[k] for k in self.keys if k in named]
        dev = -1
        for v in named.values():
            if isinstance(v, _Tensor):
                key.append(str(v.dtype))
                if dev < 0:
                    dev = v.get_device()
            elif dev < 0 and v.__class__ not in _SCALARS and is_pointer_like(v):
                dev = device_index(v)
        if dev >= 0:
            from .runtime import driver
            key.append(driver.Device.get(dev).name)
        return tuple(key), dev

    def _disk_winner(self, key, winner=None):
        """Read (or, with `winner`, write) the best config of `key` in the disk cache. The record
        is keyed by the kernel's code, the key values (the GPU's name among them), the config
        list, the newt version and the compiler's fingerprint (another compiler makes other
        kernels, with other timings)."""
        from . import __version__
        from .runtime import cache, nvrtc
        h = cache.digest("autotune", self.jit.source_key(), key, [str(c) for c in self.configs],
                         __version__, cache.compiler_fingerprint(), nvrtc.fingerprint())
        disk = cache.disk_cache()
        if winner is not None:
            disk.store_json(h, {"config": str(winner)})
            return winner
        rec = disk.load_json(h)
        if rec is None:
            return None
        return next((c for c in self.configs if str(c) == rec.get("config")), None)

    def prune_configs(self, named: dict, kwargs: dict | None = None) -> list:
        """The configs left by `early_config_prune(configs, named_args, **call_kwargs)` (the
        call's keyword arguments also by name, as Triton passes them), then by `perf_model`."""
        configs = self.configs
        if self.early_config_prune:
            configs = list(self.early_config_prune(configs, named, **(kwargs or {})))
        if self.perf_model and self.top_k:
            k = self.top_k if self.top_k >= 1 else int(len(configs) * self.top_k)
            if len(configs) > k:
                est = {c: self.perf_model(**named, **c.all_kwargs()) for c in configs}
                configs = sorted(configs, key=est.__getitem__)[:max(k, 1)]
        return configs

    def _check_conflicts(self, kwargs, config):
        clash = sorted(set(kwargs) & set(config.all_kwargs()) - {"num_warps", "num_stages"})
        if clash:
            raise LaunchError(f"autotune of {self.__name__}: {', '.join(clash)} are given by the "
                              "caller and by the configs; remove them from the call")

    def _precompile(self, args, kwargs, configs) -> dict:
        """Compile every config's specialization in parallel worker processes (disk cache);
        returns {config: reason} for configs whose compiler process crashed."""
        from .jit import JITFunction
        from .runtime import driver, precompile, specialize
        if self.compile_workers == 0 or not precompile.available():
            return {}
        jobs, which = [], []
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        # A hook that sets descriptors' block shapes from the config (Triton's TMA kernels do)
        # decides what a config compiles, so it runs first, as before the config's timed
        # launch; what it does to restore_value tensors is undone. Only descriptors' block
        # shapes can change a specialization, so without descriptors no hook runs here.
        hooked = any(c.pre_hook for c in configs) and any(
            isinstance(v, descriptor_class()) for v in named.values())
        saved = {n: named[n].clone() for n in self.restore_value} if hooked else {}
        try:
            for c in configs:
                fn, kw = self.fn, {**kwargs, **c.all_kwargs()}
                if hooked and c.pre_hook:
                    c.pre_hook({**named, **kw})
                while not isinstance(fn, JITFunction):
                    if not isinstance(fn, Heuristics):
                        return {}
                    kw = fn.expand(args, kw)
                    fn = fn.fn
                try:
                    arguments, nw, ns = specialize.bind(fn, args, kw)
                    sig, cx, spec, dev = specialize.specialize(fn, arguments)
                    arch = driver.Device.get(dev if dev is not None
                                             else driver.current_device_index()).arch
                except LaunchError:
                    continue   # the timed launch reports it
                jobs.append((fn, sig, cx, spec, arch, nw, ns))
                which.append(c)
        finally:
            for n, v in saved.items():
                named[n].copy_(v)
        results = precompile.compile_in_workers(jobs, self.compile_workers)
        return {c: r for c, r in zip(which, results) if r and r.startswith(("crashed", "skipped"))}

    def _bench(self, args, kwargs, named, config, grid, bench):
        self._check_conflicts(kwargs, config)
        if config in self._crashed:
            self._errors.append((config, CompilationError(
                f"{self.__name__} with config [{config}]: {self._crashed[config]}")))
            return math.inf
        full = {**kwargs, **config.all_kwargs()}
        hook_args = {**named, **full}
        saved = {n: named[n].clone() for n in self.restore_value}

        def call():
            for n in self.reset_to_zero:
                named[n].zero_()
            if config.pre_hook:
                config.pre_hook(hook_args)
            if self.user_pre_hook:
                self.user_pre_hook(hook_args)
            self.fn.run(*args, grid=grid, **full)
            for n, v in saved.items():  # undo in-place updates before the next timed run
                named[n].copy_(v)
        try:
            t = bench(call, warmup=self.warmup, rep=self.rep)
        except (LaunchError, NVRTCError, CompilationError) as e:
            # Out of shared memory, registers or a config the kernel rejects: not a candidate.
            self._errors.append((config, e))
            return math.inf
        finally:
            if self.user_post_hook:
                self.user_post_hook(hook_args, None)
        return float(t[0] if isinstance(t, (list, tuple)) else t)

    def run(self, *args, grid, **kwargs):
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        for name, default in self._defaults:
            if name not in named:
                named[name] = default
        key, dev = self._key(named)
        config = self.cache.get(key)
        if config is None and self.cache_results and not options.flags.interpret:
            config = self._disk_winner(key)
        if config is None:
            configs = self.prune_configs(named, kwargs)
            if options.flags.interpret or len(configs) == 1:
                config = configs[0]
            else:
                bench = self.do_bench or _default_bench()
                self._errors = []
                for c in configs:
                    self._check_conflicts(kwargs, c)
                self._crashed = self._precompile(args, kwargs, configs)
                # timed on the arguments' GPU, whichever device is torch's current one
                with driver_scope(dev) if dev >= 0 else contextlib.nullcontext():
                    times = {c: self._bench(args, kwargs, named, c, grid, bench)
                             for c in configs}
                config = min(configs, key=times.__getitem__)
                if math.isinf(times[config]):
                    raise self._errors[0][1]
                self.bench_times = times
                for n in self.reset_to_zero:  # the real launch starts from zeros too
                    named[n].zero_()
                if self.cache_results:
                    self._disk_winner(key, config)
            self.cache[key] = config
        self.best_config = config
        self._check_conflicts(kwargs, config)
        full = {**kwargs, **config.all_kwargs()}
        if config.pre_hook:
            config.pre_hook({**named, **full})
        return self.fn.run(*args, grid=grid, **full)


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=25, rep=100, do_bench=None,
             compile_workers=None, cache_results=False, **_triton_kwargs):
    """Decorator: time `configs` on the first call per value of the `key` arguments.
    Before timing, the configs compile in parallel worker processes (`compile_workers`, default
    one per core; 0 compiles in-process), so a crashing compile costs one config, not the
    process; a config's `pre_hook` runs before its compile too, so a hook that sets descriptors'
    block shapes (Triton's TMA kernels) compiles what the config will launch.
    `prune_configs_by={"early_config_prune": f}` calls `f(configs, named_args, **kwargs)` with
    the launch's keyword arguments (Triton's call). `cache_results=True` also keeps winners in
    the disk cache for later processes."""
    def deco(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value,
                         pre_hook, post_hook, warmup, rep, do_bench, compile_workers,
                         cache_results)
    return deco


class Heuristics(_Wrapper):
    def __init__(self, fn, values: dict):
        self.fn, self.values = fn, dict(values)
        self.jit = _innermost(fn)
        self.__name__ = getattr(self.jit, "__name__", "kernel")
        self.compile_name = compile_names.assign(self, self.__name__)   # for torch.compile
        self.arg_names = list(self.jit.arg_names)

    def expand(self, args, kwargs) -> dict:
        """kwargs plus the values this decorator computes."""
        kwargs = dict(kwargs)
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        for name, p in self.jit.signature.parameters.items():
            if name not in named and p.default is not p.empty:
                named[name] = p.default
        for name, f in self.values.items():
            kwargs[name] = named[name] = f(named)
        return kwargs

    def run(self, *args, grid, **kwargs):
        return self.fn.run(*args, grid=grid, **self.expand(args, kwargs))


def heuristics(values: dict):
    """Decorator: compute meta-parameters from the other arguments, e.g.
    `@newt.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})`."""
    def deco(fn):
        return Heuristics(fn, values)
    return deco
