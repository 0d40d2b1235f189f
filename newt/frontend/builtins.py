"""What each `nl.*` name (newt/language/ BUILTINS), each block method and each Python builtin
means inside a kernel: a table from name to a semantic function taking (builder, *args).

Arguments arrive evaluated: Tensors for runtime values, plain Python objects for constexprs.
Python's own min / max / abs / print mean what Triton makes them mean: folded on constexprs,
elementwise minimum / maximum / abs ops on runtime values, blocks included (never a
comparison); print of a runtime value is nl.device_print.
"""
from __future__ import annotations

import builtins as _py

from . import (combine, descriptors, downcast, inline_asm, libdevice, memory, movement,
               reductions, semantic, shapes)
from .semantic import error, to_tensor
from .values import Tensor

MATH = ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh", "erf",
        "sigmoid", "floor", "ceil")


def _axis_arg(axis, what):
    if isinstance(axis, Tensor) or axis not in (0, 1, 2):
        error(f"{what} axis must be the constant 0, 1 or 2, got {axis!r}")
    return axis


def program_id(b, axis):
    return Tensor(b.program_id(_axis_arg(axis, "program_id")), b)


def num_programs(b, axis):
    return Tensor(b.num_programs(_axis_arg(axis, "num_programs")), b)


def _hint(kind):
    def hint(b, input, values):
        if not isinstance(input, Tensor):
            return input
        vals = tuple(values) if isinstance(values, (tuple, list)) else (values,)
        for v in vals:
            if isinstance(v, Tensor) or not isinstance(v, int):
                error(f"{kind}: values must be constant ints, got {v!r}")
        input.v.attrs[kind] = vals[0] if len(vals) == 1 else vals
        return input
    return hint


def static_assert(b, cond, msg=""):
    if isinstance(cond, Tensor):
        error("static_assert needs a compile-time condition (use nl.device_assert for runtime "
              "values)")
    if not cond:
        error(f"static_assert failed: {msg}" if msg else "static_assert failed")


def static_print(b, *values, sep=" ", end="\n", file=None, flush=False):
    def show(v):
        return f"<runtime {v.type}>" if isinstance(v, Tensor) else repr(v)
    _py.print(*(v if isinstance(v, str) else show(v) for v in values), sep=sep, end=end)


def device_print(b, prefix="", *args, hex=False):
    if not isinstance(prefix, str):
        args = (prefix,) + args
        prefix = ""
    vals = [to_tensor(b, a) for a in args]
    b.print_(prefix, [v.v for v in vals], hex=bool(hex))


def device_assert(b, cond, msg="", mask=None):
    if isinstance(cond, Tensor):
        c = semantic.to_bool(b, cond)
    elif cond:
        return None  # a compile-time true condition can never fail
    else:
        c = to_tensor(b, False)  # compile-time false: still traps at run time, on this path
    b.assert_(c.v, str(msg))


def debug_barrier(b):
    b.barrier()


def cdiv(b, x, div):
    if not isinstance(x, Tensor) and not isinstance(div, Tensor):
        return (x + div - 1) // div
    return semantic.binary(b, "floordiv", semantic.binary(b, "sub", semantic.binary(
        b, "add", x, div), 1), div)


def _nan_wins(propagate_nan) -> bool:
    from ..language import PropagateNan
    if propagate_nan is None or propagate_nan is PropagateNan.NONE:
        return False
    if propagate_nan is PropagateNan.ALL:
        return True
    error(f"propagate_nan must be nl.PropagateNan.NONE or nl.PropagateNan.ALL, got "
          f"{propagate_nan!r}")


def _minmax(op):
    def f(b, x, y, propagate_nan=None):
        r = semantic.minmax(b, op, x, y)
        if not _nan_wins(propagate_nan) or not r.dtype.is_floating():
            return r
        # minmax is fmax / fmin (a number beats NaN): put a NaN operand back where there is one
        for v in (x, y):
            v = semantic.cast(b, to_tensor(b, v), r.dtype)
            r = semantic.where(b, semantic.binary(b, "ne", v, v), v, r)
        return r
    return f


maximum, minimum = _minmax("maximum"), _minmax("minimum")


def clamp(b, x, min, max, propagate_nan=None):
    return minimum(b, maximum(b, x, min, propagate_nan), max, propagate_nan)


def _math(name):
    def f(b, x):
        return semantic.math_unary(b, name, x)
    f.__name__ = name
    return f


def _atomic(kind):
    def f(b, pointer, val, mask=None, sem=None, scope=None):
        return memory.atomic(b, kind, pointer, val, mask, sem, scope)
    return f


def atomic_cas(b, pointer, cmp, val, sem=None, scope=None):
    return memory.atomic(b, "cas", pointer, val, None, sem, scope, cmp=cmp)


def _random_module():
    from . import random
    return random


def _random(name):
    def f(b, seed, offset, n_rounds=10):
        return getattr(_random_module(), name)(b, seed, offset, n_rounds)
    return f


IMPLS = {
    "program_id": program_id, "num_programs": num_programs,
    "arange": shapes.arange, "full": shapes.full, "zeros": shapes.zeros,
    "zeros_like": shapes.zeros_like, "full_like": shapes.full_like,
    "cast": lambda b, input, dtype, fp_downcast_rounding=None, bitcast=False:
        downcast.cast(b, input, dtype, bitcast, fp_downcast_rounding),
    "load": memory.load, "store": memory.store, "atomic_cas": atomic_cas,
    "reshape": shapes.reshape, "view": shapes.reshape, "expand_dims": shapes.expand_dims,
    "broadcast_to": shapes.broadcast_to, "broadcast": shapes.broadcast,
    "trans": shapes.trans, "permute": shapes.permute,
    "where": lambda b, condition, x, y: semantic.where(b, condition, x, y),
    "maximum": maximum, "minimum": minimum,
    "clamp": clamp, "fma": semantic.fma, "cdiv": cdiv, "abs": semantic.abs_,
    "div_rn": semantic.div_rn, "umulhi": semantic.umulhi,
    "sum": reductions.sum_, "max": reductions.max_, "min": reductions.min_,
    "argmax": reductions.argmax, "argmin": reductions.argmin, "cumsum": reductions.cumsum,
    "dot": reductions.dot,
    "multiple_of": _hint("multiple_of"), "max_contiguous": _hint("max_contiguous"),
    "max_constancy": _hint("max_constancy"),
    "static_assert": static_assert, "static_print": static_print,
    "device_print": device_print, "device_assert": device_assert,
    "debug_barrier": debug_barrier,
}
for _n in MATH:
    IMPLS[_n] = _math(_n)
for _k in ("add", "max", "min", "xchg", "and", "or", "xor"):
    IMPLS["atomic_" + _k] = _atomic(_k)
for _n in ("rand", "randn", "randint", "randint4x", "rand4x", "randn4x"):
    IMPLS[_n] = _random(_n)
IMPLS["uint_to_uniform_float"] = lambda b, x: _random_module().uint_to_uniform_float(b, x)
IMPLS["pair_uniform_to_normal"] = \
    lambda b, u1, u2: _random_module().pair_uniform_to_normal(b, u1, u2)
IMPLS.update(descriptors.IMPLS)   # descriptors, block pointers, and load / store of one
IMPLS.update(libdevice.IMPLS)
IMPLS.update({n: getattr(movement, n) for n in (
    "join", "split", "interleave", "flip", "gather", "sort", "topk", "histogram", "assume",
    "ravel", "swizzle2d", "cat")})
IMPLS.update({n: getattr(combine, n) for n in ("reduce", "associative_scan", "cumprod",
                                                "xor_sum", "reduce_or", "softmax",
                                                "map_elementwise")})
IMPLS["fdiv"] = lambda b, x, y, ieee_rounding=False: (
    semantic.div_rn(b, x, y) if ieee_rounding else semantic.binary(b, "truediv", x, y))
IMPLS["inline_asm_elementwise"] = inline_asm.inline_asm_elementwise

# x.method(...) on a block; `x.to` is defined on Tensor itself
TENSOR_METHODS = {n: IMPLS[n] for n in (
    "reshape", "view", "expand_dims", "broadcast_to", "trans", "permute", "sum", "max", "min",
    "argmax", "argmin", "cumsum", "abs", "cast") + MATH}
TENSOR_METHODS["cast"] = IMPLS["cast"]
TENSOR_METHODS.update({n: IMPLS[n] for n in ("split", "flip", "sort", "topk", "histogram",
                                             "reduce", "associative_scan", "cumprod", "ravel",
                                             "xor_sum", "reduce_or", "softmax", "gather")})


# ----------------------------------------------------------------------------- Python builtins

def py_min_max(b, which, args):
    """Python min/max: folded on constexprs; elementwise nl.minimum / nl.maximum on runtime
    values, blocks included (`max(x, 0.0)` is a ReLU), as in Triton."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    if not args:
        error(f"{which}() needs at least one argument")
    if not _py.any(isinstance(a, Tensor) for a in args):
        return (_py.min if which == "min" else _py.max)(args)
    if len(args) == 1:
        error(f"Python's {which}() of one block is not a reduction inside a kernel; use "
              f"nl.{which}(x, axis)")
    op = "minimum" if which == "min" else "maximum"
    acc = args[0]
    for a in args[1:]:
        acc = semantic.minmax(b, op, acc, a)
    return to_tensor(b, acc)


def py_abs(b, x):
    return semantic.abs_(b, x) if isinstance(x, Tensor) else _py.abs(x)


def py_print(b, *args, **kwargs):
    """Python print: nl.device_print when a runtime value is printed (the strings before it
    are the prefix, as in Triton), nl.static_print otherwise."""
    if _py.any(isinstance(a, Tensor) for a in args):
        i = 0
        while i < len(args) and isinstance(args[i], str):
            i += 1
        prefix = " ".join(args[:i])
        return device_print(b, prefix + " " if prefix else "", *args[i:])
    return static_print(b, *args, **kwargs)


def py_isinstance(b, x, cls):
    from ..language import tensor
    classes = cls if isinstance(cls, tuple) else (cls,)
    if isinstance(x, Tensor):
        return tensor in classes
    classes = tuple(c for c in classes if c is not tensor)
    return _py.isinstance(x, classes) if classes else False


def py_len(b, x):
    if isinstance(x, Tensor):
        if not x.is_block():
            error("len() of a scalar")
        return x.shape[0]
    return _py.len(x)


PY_BUILTINS = {
    _py.min: lambda b, *a: py_min_max(b, "min", a),
    _py.max: lambda b, *a: py_min_max(b, "max", a),
    _py.abs: py_abs, _py.print: py_print, _py.isinstance: py_isinstance, _py.len: py_len,
}
