"""Running a @newt.jit kernel on the CPU: `launch(jitfn, grid, args, kwargs)`.

Called by newt/jit.py when NEWT_INTERPRET=1 (newt.options.flags.interpret). Binds the arguments
(tensors become pointers, Python numbers typed scalars, constexprs stay Python values), runs the
compiler's acceptance check (check.py), evaluates the grid, then calls the kernel's Python code
(rewritten where Python's meaning differs from the compiler's: rewrite.py) once per program id,
with its globals and closure rebound so that `newt.language` (and names imported from it)
resolve to the interpreter's implementations, `range` yields int32 scalars, and other @newt.jit
functions run the same way (the inlining the compiler does). Programs run one after another, x
fastest. A kernel line that raises gives a newt.KernelError naming the line and the program.
"""
from __future__ import annotations

import builtins
import itertools
import operator
import struct
import types

import torch

from .. import dtypes as D
from .. import language as L
from ..errors import KernelError, LaunchError, NewtError
from ..jit_host import IGNORED_LAUNCH_OPTIONS, check_num_ctas
from ..options import Options
from . import context, descriptors, extras, memory, ops, philox
from .check import check
from .rewrite import HELPERS, twin_code
from .values import Tensor, const, unwrap
from ..tensor_like import for_interpreter

# Launch options accepted (and ignored) besides the kernel's own parameters
_OPTIONS = ("num_warps", "num_stages", "num_ctas", *IGNORED_LAUNCH_OPTIONS)


# ----------------------------------------------------------------------------- loops

def _bound(v):
    v = unwrap(v)
    if isinstance(v, Tensor):
        return int(v), v.dtype.bits == 64
    return int(v), not (-2**31 <= int(v) < 2**31)


class range:  # noqa: A001  (shadows the builtin inside kernels, like Triton's)
    """`range` / `nl.range` in a kernel: the loop variable is an int32 scalar (int64 when a bound
    is 64-bit), as in compiled code. Extra keyword options (num_stages, ...) are accepted."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        bounds = [_bound(arg1), _bound(arg2), _bound(1 if step is None else step)]
        (self.start, _), (self.end, _), (self.step, _) = bounds
        if self.step == 0:
            raise ValueError("range() step must not be zero")
        self.dtype = D.int64 if builtins.any(w for _, w in bounds) else D.int32

    def __iter__(self):
        for i in builtins.range(self.start, self.end, self.step):
            yield Tensor(torch.tensor(i, dtype=torch.int64), self.dtype)


class static_range:
    """`nl.static_range`: unrolled at compile time, so the loop variable is a Python int."""

    def __init__(self, arg1, arg2=None, step=None):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.args = [ops._constexpr_int(a, "static_range bound")
                     for a in (arg1, arg2, 1 if step is None else step)]

    def __iter__(self):
        return iter(builtins.range(*self.args))


def _constexpr(value=None):
    """`nl.constexpr(v)` inside a kernel is just v."""
    return unwrap(value)


# ----------------------------------------------------------------------------- the `nl` namespace

def _build_namespace() -> types.ModuleType:
    ns = types.ModuleType("newt.language", "newt.language as seen by interpreted kernels")
    for k, v in vars(L).items():
        if not k.startswith("__"):
            setattr(ns, k, v)
    impl = {name: getattr(ops, name, None) for name in L.BUILTINS}
    impl.update(
        abs=ops.abs_, cast=ops.cast_in_triton_order, range=range, static_range=static_range,
        load=memory.load, store=memory.store, atomic_add=memory.atomic_add,
        atomic_max=memory.atomic_max, atomic_min=memory.atomic_min,
        atomic_xchg=memory.atomic_xchg, atomic_cas=memory.atomic_cas,
        atomic_and=memory.atomic_and, atomic_or=memory.atomic_or, atomic_xor=memory.atomic_xor,
        rand=philox.rand, randn=philox.randn, randint=philox.randint,
        randint4x=philox.randint4x, rand4x=philox.rand4x, randn4x=philox.randn4x,
        uint_to_uniform_float=philox.uint_to_uniform_float,
        pair_uniform_to_normal=philox.pair_uniform_to_normal,
        **{k: ops._math(f) for k, f in ops.MATH.items()})
    impl.update(descriptors.IMPLS)   # descriptors, block pointers, and load / store of one
    missing = sorted(k for k, v in impl.items() if v is None)
    if missing:
        raise ImportError(f"interpreter lacks language builtins: {missing}")
    for k, v in impl.items():
        setattr(ns, k, v)
    ns.constexpr = _constexpr
    ns.tensor = Tensor
    return ns


NL = _build_namespace()
_BY_STUB = {id(getattr(L, k)): getattr(NL, k) for k in L.BUILTINS}
_BY_STUB.update({id(L.constexpr): _constexpr, id(L.tensor): Tensor})
_MODULES = extras.namespaces(NL)      # nl.math, nl.extra(.cuda).libdevice: their twins
_BY_STUB.update(extras.stubs())


class _NewtProxy(types.ModuleType):
    """`newt` as a kernel sees it: `newt.language` is the interpreter's namespace."""

    def __init__(self, real):
        super().__init__(real.__name__)
        self._real = real
        self.language = NL

    def __getattr__(self, name):
        return getattr(self._real, name)


# ----------------------------------------------------------------------------- rebinding

class _Rebinder:
    """Makes interpreter twins of kernel functions: same code, translated globals and closure."""

    def __init__(self):
        self.memo = {}

    def translate(self, v):
        from ..jit import JITFunction
        if v is L:
            return NL
        if isinstance(v, types.ModuleType) and id(v) in _MODULES:
            return _MODULES[id(v)]
        if isinstance(v, types.ModuleType) and getattr(v, "language", None) is L:
            return _NewtProxy(v)
        if isinstance(v, L.constexpr):
            return v.value
        if isinstance(v, JITFunction):
            return self.function(v.fn)
        if callable(v) or isinstance(v, type):
            return _BY_STUB.get(id(v), v)
        return v

    def function(self, fn):
        if fn in self.memo:
            return self.memo[fn]
        new_globals: dict = {}
        code = _twin_code(fn)
        if code is None:
            code = fn.__code__
            cells = tuple(types.CellType() for _ in (fn.__closure__ or ()))
        else:   # compiled at module level: the closure's names are the twin's globals
            cells = ()
        twin = types.FunctionType(code, new_globals, fn.__name__, None, cells or None)
        self.memo[fn] = twin  # before translating: @jit functions may refer to each other
        context.current.codes.update(_codes(code))
        new_globals.update({k: self.translate(v) for k, v in fn.__globals__.items()})
        new_globals.setdefault("range", range)
        for k, v in extras.PY_BUILTINS.items():      # Python's min / max / print, as Triton's
            new_globals.setdefault(k, v)
        new_globals.update(_HELPERS)
        for name, old in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = self.translate(old.cell_contents)
            except ValueError:  # an empty cell stays empty
                continue
            if cells:
                cells[fn.__code__.co_freevars.index(name)].cell_contents = value
            else:
                new_globals[name] = value
        twin.__defaults__ = tuple(self.translate(d) for d in fn.__defaults__ or ()) or None
        twin.__kwdefaults__ = ({k: self.translate(d) for k, d in fn.__kwdefaults__.items()}
                               if fn.__kwdefaults__ else None)
        return twin


_TWINS: dict = {}


def _twin_code(fn):
    """The rewritten code of fn (rewrite.py), once per code object."""
    if fn.__code__ not in _TWINS:
        _TWINS[fn.__code__] = twin_code(fn)
    return _TWINS[fn.__code__]


def _codes(code):
    """A code object and those nested in it (the rewrite's lambdas): frames of any of them are
    the user's kernel lines."""
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


# ----------------------------------------------------------------------------- rewritten constructs

def _truth(x):
    x = unwrap(x)
    return x if x.dtype.is_bool() else x != 0


def _logical(is_and, thunks):
    """`a and b` / `a or b` as the frontend defines them (expressions.py, visit_BoolOp)."""
    acc = unwrap(thunks[0]())
    for th in thunks[1:]:
        if not isinstance(acc, Tensor):   # Python's short circuit on compile-time values
            if (not acc) if is_and else bool(acc):
                return acc
            acc = unwrap(th())
            continue
        rhs = unwrap(th())
        if not isinstance(rhs, Tensor) and (bool(rhs) != is_and):
            return rhs
        a, b = _truth(acc), _truth(rhs if isinstance(rhs, Tensor) else const(rhs, D.int1))
        acc = (a & b) if is_and else (a | b)
    return acc


_COMPARE = {"Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
            "Gt": operator.gt, "GtE": operator.ge, "Is": operator.is_, "IsNot": operator.is_not,
            "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b}


def _chain(ops, *values):
    """`a < b < c` as the frontend defines it (expressions.py, visit_Compare): each operand
    evaluated once (the caller did), the comparisons joined by `and`, elementwise once a runtime
    value is involved."""
    result = None
    for op, lhs, rhs in zip(ops, values, values[1:]):
        r = unwrap(_COMPARE[op](lhs, rhs))
        if result is None:
            result = r
        elif isinstance(result, Tensor) or isinstance(r, Tensor):
            a, b = (_truth(v if isinstance(v, Tensor) else const(v, D.int1)) for v in (result, r))
            result = a & b
        else:
            result = result and r
    return result


def _not(x):
    x = unwrap(x)
    if not isinstance(x, Tensor):
        return not x
    t = _truth(x)
    return Tensor(~t.data, D.int1)


def _carry(v):
    """A Python number that a device loop carries or a runtime `if` yields: a typed scalar, as
    the compiler's (in a tuple too)."""
    if isinstance(v, (bool, int, float)):
        return const(v, D.of_python_scalar(v))
    if type(v) is tuple:     # (not a block pointer or other tuple-like value)
        return tuple(_carry(x) for x in v)
    return v


def _runtime(cond):
    return isinstance(unwrap(cond), Tensor)


def _return(conds, value):
    """A @jit function's value returned inside `if`s: typed when one of them is a runtime `if`."""
    return _carry(value) if any(_runtime(c) for c in conds) else value


def _ifexp(cond, then, other):
    """`a if c else b`: on a runtime scalar `c` the value is typed, as the compiler's `if`
    yields it (a Python number as Triton types it; the side not taken is not evaluated, so a
    number does not learn the other side's type here)."""
    c = unwrap(cond)
    if not isinstance(c, Tensor):
        return then() if c else other()
    if c.data.dim():
        raise TypeError("a block cannot be the condition of `x if c else y` (use nl.where)")
    return _carry(unwrap(then() if bool(c.data) else other()))


_HELPERS = dict(zip(HELPERS, (lambda *t: _logical(True, t), lambda *t: _logical(False, t),
                              _not, _carry, lambda it: isinstance(it, range), _chain, _runtime,
                              _return, _ifexp)))


# ----------------------------------------------------------------------------- arguments, grid

def _argument(name, value, is_constexpr, rebinder):
    value = unwrap(value)
    if is_constexpr or value is None:
        return rebinder.translate(value)
    if not isinstance(value, (torch.Tensor, bool, int, float, D.dtype)):
        t = for_interpreter(name, value)
        value = _refuse_other(name, value) if t is None else t
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise LaunchError(
                f"argument `{name}` is a {value.device.type} tensor, but NEWT_INTERPRET=1 runs "
                f"kernels on the CPU: pass CPU tensors (x.cpu()) or unset NEWT_INTERPRET")
        return memory.pointer_to(value, name)
    if isinstance(value, (bool, int, float)):
        return const(value, _scalar_type(name, value))
    from ..tools.tensor_descriptor import TensorDescriptor
    if isinstance(value, TensorDescriptor):   # the descriptor a kernel sees, over its base
        return descriptors.from_host(value, _argument(name, value.base, False, rebinder))
    if isinstance(value, D.dtype):
        return value
    return rebinder.translate(value)


def _refuse_other(name, value):
    """Values a kernel parameter cannot take, named as the compiled path names them; anything
    else (functions, modules, constexpr wrappers) goes on to the rebinder."""
    if isinstance(value, (str, bytes, list, dict, set)):
        raise LaunchError(f"argument `{name}` has type {type(value).__name__}; pass a tensor, "
                          "int, float or bool")
    return value


def _scalar_type(name, value):
    """The type a Python number argument gets, checked as the compiled launch packs it: an int
    beyond 64 bits or a finite float beyond fp32's range is a LaunchError, not a silent inf."""
    try:
        dt = D.of_python_scalar(value)
        if dt is D.float32:
            struct.pack("<f", value)
    except OverflowError as e:
        kind = "fp32" if isinstance(value, float) else "a 64-bit integer"
        raise LaunchError(f"kernel {context.current.kernel_name}: argument `{name}` = {value!r} "
                          f"does not fit its type {kind} ({e}); "
                          "pass a one-element tensor of a wider type") from None
    return dt


def _grid(grid, meta, name="") -> tuple:
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(unwrap(g)) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise LaunchError(f"the grid must have 1 to 3 dimensions, got {grid}")
    if builtins.any(g < 0 for g in grid):   # as the compiled path (newt/jit.py) says
        raise LaunchError(f"kernel {name}: grid dimensions must be >= 0, got {grid}")
    return grid + (1,) * (3 - len(grid))


def launch(jitfn, grid, args, kwargs):
    kwargs = dict(kwargs)
    opts = {k: kwargs.pop(k) for k in _OPTIONS if k in kwargs and k not in jitfn.arg_names}
    try:
        bound = jitfn.signature.bind(*args, **kwargs)
    except TypeError as e:
        raise LaunchError(f"bad arguments for kernel {jitfn.__name__}: {e}") from None
    bound.apply_defaults()
    meta = dict(bound.arguments)
    meta.setdefault("num_warps", opts.get("num_warps", 4))
    meta.setdefault("num_stages", opts.get("num_stages", 3))
    try:  # the same checks the compiled path makes, though the interpreter ignores both
        Options(num_warps=meta["num_warps"], num_stages=meta["num_stages"])
    except ValueError as e:
        raise LaunchError(f"kernel {jitfn.__name__}: {e}") from None
    check_num_ctas(jitfn.__name__, opts.get("num_ctas", 1))
    check(jitfn, bound.arguments)   # the compiler's acceptance rule: one frontend for both
    grid = _grid(grid, meta, jitfn.__name__)
    if 0 in grid:   # nothing to run, as Triton (and the compiled path)
        return None

    prog = context.current
    saved = (prog.kernel_name, prog.pid, prog.grid, prog.codes)
    prog.kernel_name, prog.grid, prog.codes = jitfn.__name__, grid, set()
    try:
        rebinder = _Rebinder()
        fn = rebinder.function(jitfn.fn)
        values = [_argument(n, v, n in jitfn.constexpr_names, rebinder)
                  for n, v in bound.arguments.items()]
        kinds = jitfn.signature.parameters
        keywords = {n: v for n, v in zip(bound.arguments, values)
                    if kinds[n].kind == kinds[n].KEYWORD_ONLY}
        values = values[:len(values) - len(keywords)]   # (keyword-only parameters come last)
        for z, y, x in itertools.product(*(builtins.range(g) for g in reversed(grid))):
            prog.pid = (x, y, z)
            memory.new_program()
            try:
                fn(*values, **keywords)
            except AssertionError as e:
                where = context.traceback_location(e.__traceback__)
                raise AssertionError(f"{e} (kernel {prog.kernel_name}, program id {prog.pid}, "
                                     f"at {where})") from None
            except NewtError:
                raise
            except Exception as e:   # a kernel line raised: a newt error naming that line
                where = context.traceback_location(e.__traceback__)
                raise KernelError(f"{type(e).__name__}: {e}\n  in kernel {prog.kernel_name}, "
                                  f"program id {prog.pid}, at {where}") from e
    finally:
        prog.kernel_name, prog.pid, prog.grid, prog.codes = saved
    return None
