"""@jit and the launch path.

    kernel[grid](*args, **constexprs, num_warps=4, num_stages=3)

On a call: classify the arguments into a specialization key (dtypes, devices, constexpr values,
16-byte alignment, ints equal to 1 or divisible by 16, tensors of 2**31+ elements), look it up,
and launch through runtime/launch.py on torch's current stream. The classification is a Python
function generated once per kernel from its signature (`_generate`), so a call parses nothing
and builds no ctypes objects (DESIGN.md, principle 6): the key is compared with the last key
launched (a tuple compare, no hashing) before the dict is asked, and the Launcher's prepared
state comes out of one tuple. A key not seen before is checked for every launch error (CPU
tensors, mixed devices, bad constexprs, bad num_warps), then resolved through the disk cache
(runtime/cache.py) or, only on a disk miss, compiler.compile. Launch errors name the kernel and
the user's line that launched it. A grid with a zero launches nothing (as Triton). A launch
returns the Launcher it used (runtime/handle.py: `.n_regs`, `.metadata`, `.asm`), an object
built with the launcher, so returning it costs nothing.
Under NEWT_INTERPRET=1 (newt.options.flags.interpret) the kernel runs on the interpreter.
"""
from __future__ import annotations

import functools
import inspect
import sys
import textwrap
import types

from . import compile_names, options
from .errors import DriverError, LaunchError, NewtError
from .arg_kinds import classify as _classify
from .jit_host import HostAPI, descriptor_class
from .kernel_identity import collect_sources
from .language import constexpr as _constexpr

_flags = options.flags   # read per launch: one attribute, no module lookup chain
_MethodType = types.MethodType


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


_OPTION_DEFAULTS = (("num_warps", 4), ("num_stages", 3))


class _EmptyGrid(Exception):
    """A grid with a zero dimension: the launch function returns without launching (Triton)."""


_GRID_X_MAX = 2147483647   # CUDA's grid x limit (y and z: 65535), the same on every device


def _grid_arg(grid):
    """The grid as the launch function takes it: the int of a 1-D grid (k[(n,)] or k[n]) once
    checked here, since the launch function trusts an int; any other grid as it is, checked
    there. A bad int becomes its 1-tuple, so that it gets the tuple's error."""
    if grid.__class__ is int:
        grid = (grid,)
    if grid.__class__ is tuple and len(grid) == 1 and (g := grid[0]).__class__ is int \
            and 0 < g <= _GRID_X_MAX:
        return g
    return grid


def _grid3(jf, grid, launcher):
    """(gx, gy, gz) of a grid other than a 1-tuple of an int (which the launch function checks
    inline): 2-D and 3-D tuples of ints here, checked against CUDA's grid limits (the same on
    every device since compute capability 3.0: 2**31-1, 65535, 65535), everything else (lists,
    numpy ints, errors) in JITFunction._grid3."""
    if grid.__class__ is tuple:
        n = len(grid)
        if n == 2:
            gx, gy = grid
            if gx.__class__ is int and gy.__class__ is int and 0 < gx <= 2147483647 \
                    and 0 < gy <= 65535:
                return gx, gy, 1
        elif n == 3:
            gx, gy, gz = grid
            if gx.__class__ is int and gy.__class__ is int and gz.__class__ is int \
                    and 0 < gx <= 2147483647 and 0 < gy <= 65535 and 0 < gz <= 65535:
                return grid
    return jf._grid3(grid, launcher)


def _launch_site() -> str | None:
    """`file:line` and source of the innermost frame outside newt: the user's launch."""
    import linecache
    import os
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(here)
                             or f.f_code.co_filename.startswith("<newt launcher")
                             or f.f_code.co_filename == functools.__file__):
        f = f.f_back
    if f is None:
        return None
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f": {line}" if line else "")


def _reported_at_launch_site(method):
    """A launch error raised by `method` also names the user's line that launched the kernel
    (the traceback shows it too, but under frames of newt's own)."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except NewtError as e:
            if isinstance(e, (LaunchError, DriverError)) and not getattr(e, "_newt_site", False):
                site = _launch_site()
                if site and e.args and isinstance(e.args[0], str):
                    e.args = (f"{e.args[0]}\n  launched at {site}",) + e.args[1:]
                e._newt_site = True
            raise
    return wrapper


def _constexpr_key(v):
    """Key element of a constexpr value that is not a plain int (see _generate)."""
    if isinstance(v, _constexpr):
        v = v.value
        if v.__class__ is int:
            return v
    return (v.__class__, v)


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
        if options.flags.interpret:
            return self._interpret(grid, args, kwargs)
        return (self._launch_fn or self._first_launch)(_grid_arg(grid), *args, **kwargs)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @newt.jit kernel: launch it as "
                           f"{self.__name__}[grid](...), or call it from another kernel")

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    # ---- the generated launch function -------------------------------------------------------
    def _generate(self, kinds=None, what="launch"):
        """Generate, once per kernel, `launch(grid, <the kernel's parameters>, *, num_warps=4,
        num_stages=3)`: one branch per parameter builds the flat key tuple, one dict lookup finds
        the Launcher, one pack_into fills its argument buffer, one cuLaunchKernel. No loops, no
        signature binding, no per-call ctypes objects. Also `meta` (the dict a grid callable
        receives), or with what="binder" only `binder` (key and values, for tests and
        warmup). Internal names start with `_n_`.

        `kinds` (the argument classes of the first launch, per parameter) adds a guarded fast
        branch that builds the same key as one flat tuple, without per-parameter tuples."""
        import torch
        from .runtime import descriptor_args
        from .runtime.cache import python_code
        ns = {"_n_Tensor": torch.Tensor, "_n_classify": _classify, "_n_ck": _constexpr_key,
              "_n_defaults": {}, "_n_cache": self.cache, "_n_self": self,
              "_n_last": _last_launched(), "_n_M": _MISSING, "_n_hot": self._hot,
              "_n_grid3": _grid3, "_n_Empty": _EmptyGrid}
        sig, kw_sig, body, keys, vals, rt_pos = [], [], [], [], [], []
        guard, fast_keys, fast_vals = [], [], []
        names = list(self.signature.parameters)
        next_index = len(names)      # a descriptor's ints come after the parameters

        for i, (a, p) in enumerate(self.signature.parameters.items()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or a.startswith("_n_"):
                raise LaunchError(f"kernel {self.__name__}: parameter {a!r} is not supported "
                                  "(no *args/**kwargs)")
            to = kw_sig if p.kind == p.KEYWORD_ONLY else sig   # keyword-only: after *_n_more
            if p.default is p.empty:  # a sentinel, so that a missing argument reaches _miss
                to.append(f"{a}=_n_M")
            else:
                ns["_n_defaults"][a] = p.default
                to.append(f"{a}=_n_defaults[{a!r}]")
            if a in self.constexpr_names:
                # an int stands for itself; any other value is (its type, value), so that True,
                # 1 and 1.0 are different keys (they compile differently)
                body.append(f"    _n_k{i} = {a} if {a}.__class__ is int else _n_ck({a}),")
                keys.append(f"*_n_k{i}")
                fast_keys.append(f"{a} if {a}.__class__ is int else _n_ck({a})")
                continue
            if a in self._desc_ranks:
                code, key, n = descriptor_args.launch_code(a, i, self._desc_ranks[a])
                ns["_n_TD"] = descriptor_class()
                body += [f"    {c}" for c in code] + [f"    _n_k{i} = ({key},)"]
                keys.append(f"*_n_k{i}")
                vals += [f"_n_v{i}"] + [f"_n_v{i}_{k}" for k in range(n)]
                rt_pos += [i] + list(range(next_index, next_index + n))
                next_index += n
                guard.append("True")
                fast_vals += code
                fast_keys.append(key)
                continue
            # The key is one flat tuple: each parameter adds elements whose first one tells its
            # kind apart (a torch dtype, an int code 0/1/16, or a str/tuple from _classify), so
            # different argument kinds never produce equal keys.
            dns = a in self.do_not_specialize
            # "2**31+ elements" asks the nbytes getter first and numel() only past 2 GiB: nbytes
            # is numel times a whole number of bytes, so it is never below numel, and a getter
            # costs less than numel(), a method that parses its (empty) argument list
            tkey = f"{a}.dtype, {a}.get_device()" if dns else (
                f"{a}.dtype, {a}.get_device(), not _n_v{i} & 15, "
                f"{a}.nbytes > 2147483647 and {a}.numel() > 2147483647")
            ikey = (f"0 if -2147483648 <= {a} <= 2147483647 else _n_classify({a}, True)[0]"
                    if dns else
                    f"(1 if {a} == 1 else 0 if {a} & 15 or not {a} else 16) if -2147483648 <= {a} <= "
                    f"2147483647 else _n_classify({a}, False)[0]")
            body += [f"    if {a}.__class__ is _n_Tensor:",
                     f"        _n_v{i} = {a}.data_ptr()",
                     f"        _n_k{i} = {tkey}",
                     f"    elif {a}.__class__ is int:",
                     f"        _n_v{i} = {a}",
                     f"        _n_k{i} = {ikey},",
                     "    else:",
                     f"        _n_k{i}, _n_v{i} = _n_classify({a}, {dns})"]
            keys.append(f"*_n_k{i}")
            vals.append(f"_n_v{i}")
            rt_pos.append(i)
            kind = (kinds or {}).get(a)
            if kind is torch.Tensor:
                guard.append(f"{a}.__class__ is _n_Tensor")
                fast_vals.append(f"_n_v{i} = {a}.data_ptr()")
                fast_keys.append(tkey)
            elif kind is int:
                guard.append(f"{a}.__class__ is int and -2147483648 <= {a} <= 2147483647")
                fast_vals.append(f"_n_v{i} = {a}")
                fast_keys.append("0" if dns else f"1 if {a} == 1 else 0 if {a} & 15 or not {a} else 16")
            elif kind in (float, bool):
                guard.append(f"{a}.__class__ is {kind.__name__}")
                fast_vals.append(f"_n_v{i} = {a}")
                fast_keys.append('"fp32"' if kind is float else '"i1"')
            elif kind is type(None):
                guard.append(f"{a} is None")
                fast_vals.append(f"_n_v{i} = 0")
                fast_keys.append("None")
            else:
                guard.append("False")
        self.runtime_positions = rt_pos
        # a parameter named num_warps / num_stages is also that launch option (as in Triton)
        params = ", ".join(sig + ["*_n_more"] + kw_sig + [f"{o}={d}" for o, d in _OPTION_DEFAULTS
                                                          if o not in names] + ["**_n_extra"])
        check = "    if _n_more or _n_extra:\n        _n_self._extra_args(_n_more, _n_extra)"
        by_name = "{" + ", ".join(f"{n!r}: {n}" for n in dict.fromkeys(
            names + ["num_warps", "num_stages"])) + "}"
        key = f"    _n_key = ({', '.join(keys + ['num_warps', 'num_stages'])},)"
        v = ", ".join(vals)
        slow = "\n".join(body) + "\n" + key
        if kinds is not None and "False" not in guard:
            fv = "".join(f"        {e}\n" for e in fast_vals)
            fk = ", ".join(fast_keys + ["num_warps", "num_stages"])
            kernel_body = (f"    if {' and '.join(guard) or 'True'}:\n{fv}"
                           f"        _n_key = ({fk},)\n"
                           "    else:\n" + textwrap.indent(slow, "    "))
        else:
            kernel_body = slow
        binder_src = f"""
def binder({params}):
{check}
{chr(10).join(body)}
{key}
    return _n_key, ({v}{',' if vals else ''})
"""
        src = f"""
def meta({params}):
    return {by_name}

def launch(_n_grid, {params}):
{check}
{kernel_body}
    _n_h = _n_hot[0]
    if _n_key != _n_h[0]:   # a tuple compare: cheaper than hashing the key for the dict
        _n_h = _n_self._lookup(_n_key, {by_name})
    _, _n_pack, _n_buf, _n_block, _n_shared, _n_stream, _n_dev, _n_go, _n_c, _n_f, _n_p, \\
        _n_name, _n_L = _n_h
    if _n_grid.__class__ is int:   # a 1-D grid's int, checked where it was bound (_grid_arg)
        _n_gx = _n_grid
        _n_gy = _n_gz = 1
    else:
        if _n_grid.__class__ is not tuple and callable(_n_grid):
            _n_grid = _n_grid({by_name})
        if _n_grid.__class__ is tuple and len(_n_grid) == 1 \\
                and (_n_gx := _n_grid[0]).__class__ is int and 0 < _n_gx <= 2147483647:
            _n_gy = _n_gz = 1
        else:
            try:
                _n_gx, _n_gy, _n_gz = _n_grid3(_n_self, _n_grid, _n_L)
            except _n_Empty:   # a zero in the grid: nothing to launch (as Triton)
                return _n_L
    try:
        _n_pack(_n_buf, 0, _n_gx, _n_gy, _n_gz, _n_block, 1, 1, _n_shared, _n_stream(_n_dev),
                {v})
    except Exception:  # a value that does not fit its type: Launcher.launch reports it
        return _n_self._slow_launch(_n_L, (_n_gx, _n_gy, _n_gz), ({v}{',' if vals else ''}))
    _n_r = _n_go(_n_c, _n_f, _n_p, None)
    _n_last[0] = _n_name
    if _n_r:
        _n_self._failed(_n_L, _n_r, (_n_gx, _n_gy, _n_gz))
    return _n_L
"""
        if what == "binder":
            src = binder_src
        try:
            exec(python_code(src, f"<newt launcher of {self.__name__}>"), ns)
        except SyntaxError as e:  # a parameter name Python cannot take as an argument
            raise LaunchError(f"kernel {self.__name__}: cannot build its launcher ({e})") from None
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

    @_reported_at_launch_site
    def _grid3(self, grid, launcher):
        """(gx, gy, gz) of a grid the fast checks refused: lists, ints, numpy/torch integers, the
        result of a grid callable; every bad grid is a LaunchError naming the kernel. A grid with
        a zero (and no other error) raises _EmptyGrid: the launch function returns without
        launching, as Triton does (empty batches are common)."""
        import operator
        if not isinstance(grid, (tuple, list)):
            grid = (grid,)
        grid = tuple(grid)
        if not 1 <= len(grid) <= 3:
            raise LaunchError(f"kernel {self.__name__}: grid must have 1 to 3 dimensions, "
                              f"got {grid!r}")
        out = []
        empty = False
        for axis, g, m in zip("xyz", grid + (1,) * (3 - len(grid)), launcher.max_grid):
            try:
                if isinstance(g, float):
                    raise TypeError
                g = operator.index(g)
            except TypeError:
                raise LaunchError(f"kernel {self.__name__}: grid {axis} must be an int, got "
                                  f"{type(g).__name__} {g!r}") from None
            if g == 0:
                empty = True
                continue
            if not 0 < g <= m:
                raise LaunchError(f"kernel {self.__name__}: grid {axis} = {g} is outside "
                                  f"[1, {m}] (the device's limit)")
            out.append(g)
        if empty:
            raise _EmptyGrid
        return out

    def source_key(self) -> str:
        """Hash of this kernel's code, of every @newt.jit function it calls (found by name in
        its globals and closure) and of the plain constants it reads. Computed once."""
        if self._source_key is None:
            from .runtime.cache import digest
            parts: list = []
            collect_sources(self, set(), parts)
            self._source_key = digest(*parts)
        return self._source_key


def _last_launched():
    from .runtime import driver
    return driver.last_launched


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
    tensor not on its 16-byte alignment, so one binary serves every value. Triton's other
    keywords (`launch_metadata`, `repr`, `do_not_specialize_on_alignment`, ...) are accepted
    and ignored."""
    if fn is None:
        return lambda f: JITFunction(f, **kwargs)
    return JITFunction(fn, **kwargs)
