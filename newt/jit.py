"""@jit and the launch path.

    kernel[grid](*args, **constexprs, num_warps=4, num_stages=3)

On a call: classify the arguments into a specialization key (dtypes, devices, constexpr values,
16-byte alignment, ints equal to 1 or divisible by 16, tensors of 2**31+ elements), look it up,
and launch through runtime/launch.py on torch's current stream. The classification is a Python
function generated once per kernel from its signature (launch_function.py), so a call parses
nothing and builds no ctypes objects (DESIGN.md, principle 6): the key is compared with the
last key launched (a tuple compare, no hashing) before the dict is asked, and the Launcher's
prepared state comes out of one tuple. A key not seen before is checked for every launch error
(CPU tensors, mixed devices, bad constexprs, bad num_warps), then resolved through the disk
cache (runtime/cache.py) or, only on a disk miss, compiler.compile. Launch errors name the
kernel and the user's line that launched it (launch_site.py). A grid with a zero launches
nothing (as Triton; launch_grid.py). A launch returns the Launcher it used (runtime/handle.py:
`.n_regs`, `.metadata`, `.asm`), an object built with the launcher, so returning it costs
nothing.
Under NEWT_INTERPRET=1 (newt.options.flags.interpret) the kernel runs on the interpreter.
"""
from __future__ import annotations

import functools
import inspect
import types

from . import compile_names, launch_function, options
from .errors import LaunchError
from .jit_host import HostAPI, descriptor_class
from .kernel_identity import collect_sources
from .language import constexpr as _constexpr
from .launch_function import MISSING as _MISSING
from .launch_grid import GRID_X_MAX as _GRID_X_MAX, grid_arg as _grid_arg
from .launch_site import reported_at_launch_site as _reported_at_launch_site

_flags = options.flags   # read per launch: one attribute, no module lookup chain
_MethodType = types.MethodType


class JITFunction(HostAPI):
    # What `k[grid]` reads on every launch lives in slots: a slot is one specialized attribute
    # read in every kernel (an instance-dict read is specialized on one dict's layout, so a loop
    # launching several kernels would keep un-specializing it)
    __slots__ = ("_bound", "_launch_fn", "__dict__", "__weakref__")

    def __init__(self, fn, *, do_not_specialize=(), debug=None, **_triton_kwargs):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.compile_name = compile_names.assign(self, fn.__name__)   # for torch.compile
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_names = {
            n for n, p in self.signature.parameters.items()
            if _is_constexpr_annotation(p.annotation, fn)}
        dns = set()
        for d in do_not_specialize:
            dns.add(self.arg_names[d] if isinstance(d, int) else d)
        self.do_not_specialize = dns
        self.debug = debug
        # Triton's launch_metadata(grid, kernel, args) -> {"name", metrics}: read by newt.profiler
        self.launch_metadata = _triton_kwargs.get("launch_metadata")
        self.cache: dict = {}        # key tuple -> Launcher (memory cache, per process)
        self._hot = [(None,)]        # (key, *Launcher.fast) of the last key launched
        self._launch_fn = None       # generated per kernel, on the first launch
        self._bound = (_MISSING, None)   # __getitem__'s cache; reset when _launch_fn changes
        self._binder = self._meta_of = None
        self.runtime_positions = None
        self._kinds = None
        self._source_key = None      # hash of this kernel's source and its callees'
        self._desc_ranks = {}        # parameter -> rank of the TensorDescriptor it takes

    # ---- launch ------------------------------------------------------------------------------
    def __getitem__(self, grid):
        if _flags.interpret:
            return self._interpreted(grid)
        bound = self._bound    # (grid, launch function bound to it) of the last launch
        if bound[0] is grid:
            return bound[1]
        fn = self._launch_fn
        if fn is None:
            return functools.partial(self._first_launch, grid)
        # `k[grid](...)` in a loop passes the same grid object each time: bind it once. Holding
        # the grid keeps its identity valid.
        # A bound method rather than functools.partial: its call prepends the grid without
        # copying the arguments. A 1-D grid binds its int, checked here once rather than by
        # the launch function on every call (_grid_arg; the common k[(n,)] inline).
        if grid.__class__ is tuple and len(grid) == 1 and (g := grid[0]).__class__ is int \
                and 0 < g <= _GRID_X_MAX:
            launch = _MethodType(fn, g)
        elif grid is None:
            launch = functools.partial(fn, grid)
        else:
            launch = _MethodType(fn, _grid_arg(grid))
        self._bound = (grid, launch)
        return launch

    def _interpreted(self, grid):
        # not inline in __getitem__: a lambda there would make `self` and `grid` closure cells,
        # built on every launch
        return lambda *args, **kwargs: self._interpret(grid, args, kwargs)

    @_reported_at_launch_site
    def _interpret(self, grid, args, kwargs):
        from .interpreter import launch as interp_launch
        return interp_launch(self, grid, args, kwargs)

    def run(self, *args, grid, warmup=False, **kwargs):
        """`kernel[grid](*args, **kwargs)` spelled as a call (Triton's JITFunction.run);
        `warmup=True` compiles without launching (see warmup)."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        hook = _flags.launch_hook    # newt.profiler recording kernels (profiler/kernels.py)
        if hook is not None:
            return hook(self, grid, args, kwargs, lambda: self._run(grid, args, kwargs))
        return self._run(grid, args, kwargs)

    def _run(self, grid, args, kwargs):
        if _flags.interpret:
            return self._interpret(grid, args, kwargs)
        return (self._launch_fn or self._first_launch)(_grid_arg(grid), *args, **kwargs)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @newt.jit kernel: launch it as "
                           f"{self.__name__}[grid](...), or call it from another kernel")

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    # ---- the generated launch function (launch_function.py) --------------------------------
    def _generate(self, kinds=None, what="launch"):
        """Generate the launch function (or with what="binder", the binder) once per kernel;
        `kinds`: the argument classes of the first launch, for the fast branch."""
        ns, self.runtime_positions = launch_function.build(self, kinds, what, self._desc_ranks,
                                                          self._hot)
        if what == "binder":
            self._binder = ns["binder"]
            return self._binder
        if kinds is not None:
            self._kinds = kinds
        self._meta_of = ns["meta"]
        # Python itself reports an argument given twice (positionally and by keyword), before
        # any newt code runs: named after the kernel, its TypeError names the kernel and the
        # parameter ("k() got multiple values for argument 'BLOCK'"). A LaunchError would
        # need a wrapper around every launch.
        ns["launch"].__qualname__ = ns["launch"].__name__ = self.__name__
        self._launch_fn = ns["launch"]
        self._bound = (_MISSING, None)
        return self._launch_fn

    def _first_launch(self, grid, *args, **kwargs):
        """The first launch: learn the argument classes, generate the launch function with its
        fast branch for them (once: compiling it costs about 1 ms, and a later process reads
        the compiled code from the disk cache, runtime/cache.py's python_code), go."""
        kinds = self._note_descriptors(args, kwargs)
        if kinds is not None:
            kinds = {n: type(v) for n, v in kinds.items()}
        return self._generate(kinds)(_grid_arg(grid), *args, **kwargs)

    def _note_descriptors(self, args, kwargs):
        """The call's arguments by name (None if they do not bind); records the rank of each
        TensorDescriptor argument, which the launch function is generated for (it packs the
        base pointer and one int per size and stride)."""
        kw = {k: v for k, v in kwargs.items()
              if k in self.arg_names or k not in ("num_warps", "num_stages", "num_ctas")}
        try:
            ba = self.signature.bind(*args, **kw)
        except TypeError:
            return None    # the generated function reports the argument error
        ba.apply_defaults()
        td = descriptor_class()
        ranks = {n: len(v.shape) for n, v in ba.arguments.items() if isinstance(v, td)}
        if ranks and ranks != self._desc_ranks:
            self._desc_ranks = {**self._desc_ranks, **ranks}
            self._launch_fn = self._binder = self._kinds = None
            self._bound = (_MISSING, None)
        return ba.arguments

    @_reported_at_launch_site
    def _not_descriptor(self, name, value, rank):
        raise LaunchError(f"kernel {self.__name__}: argument '{name}' took a TensorDescriptor of "
                          f"rank {rank} at this kernel's first launch, and must stay one; got "
                          f"{type(value).__name__}")

    def binder(self):
        """(key, values) of a call, as the launch function computes them (tests, warmup)."""
        return self._binder or self._generate(what="binder")

    @_reported_at_launch_site
    def _extra_args(self, more, extra):
        """Arguments beyond the kernel's parameters and num_warps / num_stages: Triton's launch
        options newt accepts (num_ctas=1) return to the launch, anything else is an error."""
        self._launch_options(extra)
        if not more and not extra:
            return
        if more:
            npos = sum(p.kind != p.KEYWORD_ONLY for p in self.signature.parameters.values())
            raise self._signature_error(TypeError(
                f"{self.__name__}() takes {npos} arguments but "
                f"{npos + len(more)} were given"))
        raise self._signature_error(TypeError(
            f"{self.__name__}() got an unexpected keyword argument '{next(iter(extra))}'"))

    def _signature_error(self, e: TypeError) -> LaunchError:
        params = ", ".join(self.arg_names)
        return LaunchError(f"bad arguments for kernel {self.__name__}({params}) "
                           f"[+ num_warps=, num_stages=]: "
                           f"{str(e).replace('binder()', self.__name__ + '()')}")

    # ---- a key not seen before ---------------------------------------------------------------
    def _miss(self, key, arguments):
        missing = [n for n, v in arguments.items() if v is _MISSING]
        if missing:
            raise self._signature_error(TypeError(
                f"{self.__name__}() missing argument(s): {', '.join(missing)}"))
        from .runtime import specialize
        launcher = specialize.resolve(self, key, (), arguments)
        self.cache[key] = launcher
        if self._kinds is None:   # now the argument classes are known: add the fast branch
            self._generate({n: type(v) for n, v in arguments.items()})
        return launcher

    @_reported_at_launch_site
    def _slow_launch(self, launcher, grid, values):
        launcher.launch(*grid, values)
        return launcher

    @_reported_at_launch_site
    def _failed(self, launcher, res, grid):
        launcher.failed(res, *grid)

    @_reported_at_launch_site
    def _lookup(self, key, arguments):
        """The hot tuple (key, *Launcher.fast) of a key other than the last one launched."""
        try:
            launcher = self.cache[key]
        except (KeyError, TypeError):   # TypeError: an unhashable constexpr, _miss says so
            launcher = self._miss(key, arguments)
        hot = self._hot[0] = (key,) + launcher.fast
        return hot

    def source_key(self) -> str:
        """Hash of this kernel's code, of every @newt.jit function it calls (found by name in
        its globals and closure) and of the plain constants it reads. Computed once."""
        if self._source_key is None:
            from .runtime.cache import digest
            parts: list = []
            collect_sources(self, set(), parts)
            self._source_key = digest(*parts)
        return self._source_key


def _is_constexpr_annotation(ann, fn) -> bool:
    if ann is _constexpr:
        return True
    if isinstance(ann, str):  # `from __future__ import annotations` leaves strings
        return ann.split(".")[-1] == "constexpr"
    return False


def jit(fn=None, **kwargs):
    """Decorator: `@newt.jit` or `@newt.jit(do_not_specialize=[...], debug=None)`.

    `do_not_specialize` lists parameters (names or positions) whose values are not part of the
    specialization key: an int there is not specialized as equal to 1 or divisible by 16, a
    tensor not on its 16-byte alignment, so one binary serves every value.
    `launch_metadata=fn` names the kernel's launches, with their metrics, in a `newt.profiler`
    session started with `hook="triton"` (`fn(grid, kernel, args)` returns a dict with
    "name" and metrics such as "flops16" and "bytes", as in Triton); launches through
    `kernel.run` and autotuners are recorded, direct `kernel[grid](...)` ones are not (that
    path does only lookups). Triton's other keywords (`repr`,
    `do_not_specialize_on_alignment`, ...) are accepted and ignored."""
    if fn is None:
        return lambda f: JITFunction(f, **kwargs)
    return JITFunction(fn, **kwargs)
