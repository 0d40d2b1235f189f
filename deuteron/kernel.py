"""The kernel object: `@dt.kernel` and what `k(*args)`, `k.ref`, `k.to_newt_source`, `k.autotune`
do with a user function.

    k(*args)        host code runs as Python; each outer tile loop is traced (trace.py), lowered
                    to newt source (lower.py), exec'd once per distinct source into a
                    @newt.jit function, and launched with the config chosen for this shape bucket
                    (memory -> disk cache -> autotune)
    k.ref(*args)    the same function as eager PyTorch: the oracle
    k.to_newt_source(*args)   the generated kernel(s), as text

CPU tensors run the generated kernels on the newt interpreter (no GPU needed).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import inspect
import linecache
import textwrap

import torch

from newt import compile_names

from . import language
from . import settings as dsettings
from .autotune import cache as dcache
from .capture import refuse_tuning_in_capture
from .errors import TraceError
from .ir import next_pow2
from .config import Config
from .oracle import OracleMode, RefRun
from .lower import lower
from .plan import PlanBuilder, plan_key
from .trace import Tracer

EFFORTS = dsettings.EFFORTS
MAX_PLANS = 256        # launch plans kept per kernel


@dataclasses.dataclass
class Launch:
    """One recorded kernel launch: replayed by the benchmark without re-tracing."""
    jitfn: object
    grid: tuple
    args: tuple
    kwargs: dict
    name: str = ""
    source: str = ""

    def __call__(self):
        if not self.grid[0]:     # an empty tile loop: no program to run (the interpreter
            return               # would refuse a zero-sized grid)
        interp = self.args and isinstance(self.args[0], torch.Tensor) and self.args[0].device.type == "cpu"
        if interp:
            import newt.options
            old, newt.options.flags.interpret = newt.options.flags.interpret, True
            try:
                self.jitfn[self.grid](*self.args, **self.kwargs)
            finally:
                newt.options.flags.interpret = old
        else:
            self.jitfn[self.grid](*self.args, **self.kwargs)


def _loop_vars(fn):
    """{(file, line): [loop variable names]} of every `for ... in dt.tile(...)` in `fn`, so tiles
    can be named after the user's variables (tile_m -> offs_m, BLOCK_SIZE_M)."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return {}
    tree = ast.parse(textwrap.dedent("".join(lines)))
    out, file = {}, inspect.getsourcefile(fn) or fn.__code__.co_filename
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
            f = node.iter.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in ("tile", "grid", "jagged_tile", "vtile"):
                t = node.target
                names = [t.id] if isinstance(t, ast.Name) else [
                    e.id if isinstance(e, ast.Name) else None for e in getattr(t, "elts", [])]
                for ln in range(node.iter.lineno, (node.iter.end_lineno or node.iter.lineno) + 1):
                    out[(file, start + ln - 1)] = names
    return out


class Kernel:
    """A @dt.kernel function. Call it like the function; see the module docstring.

    config=          pin one dt.Config (no tuning)
    configs=         search only these candidates
    autotune_effort= "none" (heuristic default), "quick" (the default on a GPU) or "full";
                     on the CPU interpreter the default is "none", whose config there
                     grows the launch grid's tiles to at most 256 programs per launch (the
                     interpreter runs programs one after another)
    static_shapes=   key the tuned-config cache on exact shapes (not power-of-two buckets) and
                     compile extents as constexprs: newt then drops the bounds checks of tiles
                     that divide them (newt/passes/masks.py). One compile and one tuning per
                     exact shape; Helion's default, not deuteron's (examples/dt_attention.py
                     opts in)

    Helion's settings are accepted too: `use_default_config=True` is autotune_effort="none",
    `print_output_code=True` prints each generated kernel, `autotune_log_level=0` drops the
    progress bar; the others have no effect (settings.py lists them).

    Every candidate is checked against the oracle (`k.ref`) before it is timed, within these
    tolerances (rtol = atol; atol scaled by the RMS of the oracle's output), by output dtype:
    fp32 1e-4 (2e-2 when an fp32 matmul runs on tf32), fp16/bf16 2e-2, fp64 1e-7, integers and
    bool exact.
    """

    def __init__(self, fn, *, config=None, configs=None, autotune_effort=None, static_shapes=False,
                 **settings):
        extra = dsettings.check(settings)
        autotune_effort = autotune_effort or extra.get("effort")
        if autotune_effort is not None and autotune_effort not in EFFORTS:
            raise ValueError(f"autotune_effort must be one of {EFFORTS}, got {autotune_effort!r}")
        self.print_output_code, self.quiet = extra.get("print", False), extra.get("quiet", False)
        self.fn, self.config, self.configs = fn, config, list(configs) if configs else None
        self.autotune_effort, self.static_shapes = autotune_effort, static_shapes
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.compile_name = compile_names.assign(self, fn.__name__)   # for torch.compile
        self._loop_vars = _loop_vars(fn)
        self._chosen: dict = {}        # cache key string -> Config (this process)
        self._jit: dict = {}           # generated source -> @newt.jit function
        self._plans: dict = {}         # argument metadata -> Plan (the launch fast path)
        self.last_summary = None       # the autotuner's last summary line

    @functools.cached_property
    def body(self):
        """The function as it runs: rewrite.py's form, where `if` inside a tile loop may branch
        on a kernel value."""
        from .rewrite import with_branches
        return with_branches(self.fn)

    @functools.cached_property
    def _jagged(self) -> bool:
        """Does the function use hl.jagged_tile? Its oracle then runs the launch grid's tile
        loops one row at a time (oracle.py)."""
        return bool({"jagged_tile", "vtile"} & set(self.fn.__code__.co_names))

    @functools.cached_property
    def source_hash(self) -> str:
        """Computed at first use, when helpers defined below the kernel exist too."""
        return _source_hash(self.fn)

    # ------------------------------------------------------------------ the three ways to run
    def ref(self, *args, **kwargs):
        """Run the function as eager PyTorch (tiles are whole dimensions): the oracle."""
        run = RefRun(_device_of(args, kwargs), by_row=self._jagged)
        language._active.append(run)
        try:
            with OracleMode():
                return self.body(*args, **kwargs)
        finally:
            language._active.pop()

    def trace(self, *args, **kwargs):
        """Run host code and trace every tile loop: returns the tracer (programs, tunable dims)."""
        tracer = Tracer(self.fn.__name__, self._loop_vars, on_program=lambda prog: None)
        self._run_with(tracer, args, kwargs)
        return tracer

    def trace_under(self, config, args, kwargs=None):
        """The tracer of a run under `config` that launches nothing: host code and tile shapes
        see the config's registered block sizes and tunables. It draws no seed (rng.py)."""
        tracer = Tracer(self.fn.__name__, self._loop_vars, on_program=lambda prog: None)
        tracer.config, state = config, torch.get_rng_state()
        try:
            self._run_with(tracer, args, kwargs or {})
        finally:
            torch.set_rng_state(state)
        return tracer

    def to_newt_source(self, *args, **kwargs) -> str:
        """The newt source generated for these arguments (one @newt.jit kernel per tile loop)."""
        return "\n\n".join(lower(p, self.static_shapes).source
                           for p in self.trace(*args, **kwargs).programs)

    def __call__(self, *args, **kwargs):
        pkey = plan_key(args, kwargs)
        plan = self._plans.get(pkey)
        if plan is not None and plan.valid:
            return plan.replay(self, args, kwargs)
        config = self.config_for(args, kwargs)
        builder = PlanBuilder(config, args, kwargs)
        ret = self.run(args, kwargs, config, plan=builder)
        if builder.ok:
            if len(self._plans) >= MAX_PLANS:     # keys may pin objects: keep the newest only
                self._plans.pop(next(iter(self._plans)))
            self._plans[pkey] = builder.plan
        return ret

    # ------------------------------------------------------------------ configs
    def cache_key(self, args, kwargs=None) -> dict:
        """The tuned-config cache key (autotune/cache.py), plus the number of tunable tile dims
        of a trace on these arguments: host code may take another path within one shape bucket,
        and a config must have one block size per tunable dim."""
        kwargs = kwargs or {}
        key = dcache.make_key(self, args, kwargs)
        key["tunable"] = len(self.trace(*args, **kwargs).tunable)
        return key

    def config_for(self, args, kwargs=None) -> Config:
        if self.config is not None:
            return self.config
        if self.configs and len(self.configs) == 1:   # one candidate: nothing to tune or look up
            return self.configs[0]
        kwargs = kwargs or {}
        key = self.cache_key(args, kwargs)
        kstr = dcache.key_string(key)
        cfg = self._chosen.get(kstr)
        if cfg is None:
            cfg = dcache.load(key)
            if cfg is None:
                if capturing(args, kwargs):
                    refuse_tuning_in_capture(self)
                cfg = self.autotune(args, kwargs=kwargs, _key=key)
            self._chosen[kstr] = cfg
        return cfg

    def default_effort(self, args, kwargs=None) -> str:
        if self.autotune_effort is not None:
            return self.autotune_effort
        if dsettings.env_effort():
            return dsettings.env_effort()
        # On the CPU interpreter timings mean nothing: take the heuristic default.
        return "quick" if _device_of(args, kwargs or {}).type == "cuda" else "none"

    def autotune(self, args, effort=None, *, kwargs=None, timer=None, progress=True, _key=None):
        """Search for the best config for `args` (see autotune/search.py), store it in the disk
        cache and return it. `timer(fn) -> ms` replaces CUDA-event timing (tests use a fake)."""
        from .autotune.bench import tune
        kwargs = kwargs or {}
        effort = effort or self.default_effort(args, kwargs)
        if effort not in EFFORTS:
            raise ValueError(f"effort must be one of {EFFORTS}, got {effort!r}")
        cfg, summary = tune(self, args, kwargs, effort, timer=timer, progress=progress,
                            quiet=dsettings.quiet(self.quiet))
        self.last_summary = summary
        key = _key or self.cache_key(args, kwargs)
        if effort != "none" or self.configs:   # an untuned default must not shadow a real tuning
            dcache.store(key, cfg, summary)
        self._chosen[dcache.key_string(key)] = cfg
        return cfg

    def compile(self, *args, config=None, arch="sm_90a", **kwargs):
        """Compile the generated kernels ahead of time with newt.compile (no GPU needed):
        [CompiledKernel] for these arguments under `config` (default: the heuristic one)."""
        import newt
        from newt.runtime import specialize
        if config is None:
            from .autotune.space import Space
            config = Space(self.trace(*args, **kwargs)).default()
        tracer = self.trace_under(config, args, kwargs)     # the programs this config runs
        from .split import bind_program, launches
        out = []
        for call in (c for p in tracer.programs for c in launches(bind_program(self, p, config)[1])):
            # specialized as a launch with these arguments would be (strides equal to 1,
            # 16-byte alignment), so the code is the code that would run
            arguments, nw, ns = specialize.bind(call.jitfn, call.args, call.kwargs)
            sig, consts, spec, _ = specialize.specialize(call.jitfn, arguments, allow_cpu=True)
            out.append(newt.compile(call.jitfn, sig, consts, arch=arch, num_warps=nw,
                                    num_stages=ns, specialization=spec))
        return out

    # ------------------------------------------------------------------ launching
    def run(self, args, kwargs, config, record=None, poison=False, plan=None):
        """Run the function with every tile loop launched under `config`. `record` collects the
        launches (for timing); `poison` fills write-only tensors with NaN/sentinels first;
        `plan` (a PlanBuilder) remembers them for replay."""
        tracer = Tracer(self.fn.__name__, self._loop_vars,
                        on_program=self.launcher(config, record, poison, plan))
        tracer.config = config
        return self._run_with(tracer, args, kwargs)

    def launcher(self, config, record=None, poison=False, plan=None):
        from .split import bind_program

        def launch(prog):
            low, call = bind_program(self, prog, config)   # one kernel, or a split pair
            if poison:
                for r in prog.tensors:
                    if r.stored and not r.loaded:
                        _poison(r.tensor)
            call()
            if record is not None:
                record.append(call)
            if plan is not None:
                plan.add(prog, low, call)
        return launch

    def jit_function(self, low):
        jf = self._jit.get(low.source)
        if jf is None:
            if dsettings.print_code(self.print_output_code):
                dsettings.show_source(low.name, low.source)
            jf = exec_source(low.source, low.name)
            self._jit[low.source] = jf
        return jf

    def _run_with(self, tracer, args, kwargs):
        language._active.append(tracer)
        try:
            return self.body(*args, **kwargs)
        finally:
            tracer.close()
            language._active.pop()

    def __repr__(self):
        return f"<dt.kernel {self.fn.__module__}.{self.fn.__qualname__}>"


def _source_hash(fn) -> str:
    """Hash of the kernel's source and of the plain Python functions it calls by global name
    (helpers in the user's module, recursively): editing a helper must not reuse a tuned config
    recorded for the old code."""
    import types
    h, seen, todo = hashlib.sha256(), set(), [fn]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        try:
            src = inspect.getsource(f)
        except (OSError, TypeError):
            src = f.__code__.co_code.hex()
        h.update(src.encode())
        for name in sorted(set(f.__code__.co_names)):
            g = f.__globals__.get(name)
            if isinstance(g, types.FunctionType) and g.__module__ == f.__module__:
                todo.append(g)
            elif isinstance(g, Kernel):
                todo.append(g.fn)
    return h.hexdigest()[:20]


def exec_source(source: str, name: str):
    """Exec generated newt source under a stable fake filename registered in linecache, so the
    newt frontend (inspect.getsource) and tracebacks can show the generated lines."""
    import newt
    import newt.language as nl
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<deuteron:{name}:{digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"newt": newt, "nl": nl, "__name__": f"deuteron_generated_{digest}"}
    exec(compile(source, filename, "exec"), ns)
    return ns[name]


def block_of(dim, config: Config) -> int:
    if dim.kind == "full":
        return max(next_pow2(dim.extent), 16 if dim.in_dot else 1)
    if getattr(dim, "batch", False):     # a batched matmul's batch tile: one per program
        return 1
    shared = getattr(dim, "shared", None)  # hl.register_block_size: the config's slot
    if shared is not None and 0 <= shared.index < len(config.block_sizes):
        return config.block_sizes[shared.index]
    if dim.block is not None:
        return dim.block
    if dim.index >= len(config.block_sizes):
        raise ValueError(f"{config} has {len(config.block_sizes)} block sizes, but the kernel has "
                         f"more tunable tile dimensions (tile {dim.describe()} is #{dim.index})")
    return config.block_sizes[dim.index]


def bind(low, config: Config, jitfn) -> Launch:
    """Arguments, constexprs and grid of one lowered program under `config`."""
    args = []
    for _, what in low.params:
        if what[0] == "ptr":
            args.append(what[1].tensor)
        elif what[0] == "extent":
            args.append(_end(what[1]))
        elif what[0] == "seed":
            args.append(what[1].seed)
        elif what[0] == "scalar":
            args.append(what[1])
        else:
            args.append(what[1].tensor.stride(what[2]))
    kwargs = {}
    for name, what in low.constexprs:
        if what[0] == "block":
            kwargs[name] = block_of(what[1], config)
        elif what[0] == "extent":
            kwargs[name] = _end(what[1])
        elif what[0] == "value":
            kwargs[name] = what[1]
        else:
            kwargs[name] = config.group_size
    grid = 1
    for d in low.grid:
        grid *= -(-d.extent // block_of(d, config))
    kwargs.update(num_warps=config.num_warps, num_stages=config.num_stages)
    return Launch(jitfn, (grid,), tuple(args), kwargs, low.name, low.source)


def _end(d) -> int:
    """The host end of a dim's range (its begin may be a value the kernel computes)."""
    return d.hi if isinstance(d.hi, int) else d.lo + d.extent


def _poison(t: torch.Tensor):
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).min // 3 if t.dtype.is_signed else 0x5A)


def capturing(args, kwargs) -> bool:
    """Is a CUDA graph being captured on the current stream of the arguments' GPU? Asked only
    when a call misses its launch plan (never on the replay path)."""
    dev = _device_of(args, kwargs)
    if dev.type != "cuda":
        return False
    with torch.cuda.device(dev):
        return torch.cuda.is_current_stream_capturing()


def _device_of(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def kernel(fn=None, *, config=None, configs=None, autotune_effort=None, static_shapes=False,
           **settings):
    """Decorator: `@dt.kernel` or `@dt.kernel(config=..., configs=[...], autotune_effort="quick",
    static_shapes=False)`; Helion's settings too (settings.py says which do what)."""
    dsettings.check(settings)

    def wrap(f):
        return Kernel(f, config=config, configs=configs, autotune_effort=autotune_effort,
                      static_shapes=static_shapes, **settings)
    return wrap if fn is None else wrap(fn)


__all__ = ["Kernel", "kernel", "Launch", "TraceError"]
