"""The language functions of newt.language, implemented on interpreter values (values.Tensor).

Consumes Tensors and Python constexprs; produces Tensors. Memory ops live in memory.py, random
numbers in philox.py; launch.py assembles all of them into the namespace a kernel sees as `nl`.
Each function follows Triton's semantics; where the interpreter is more exact than the GPU it is
said (dot computes in fp64 and rounds once: tf32 is not emulated).
"""
from __future__ import annotations

import builtins

import torch

from .. import dtypes as D
from ..errors import CompilationError
from ..language import PropagateNan
from . import context
from .values import (Tensor, _down, _float_of, _ordered, _up, cast, const, promote, to_tensor,
                     unwrap)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _constexpr_int(v, what):
    v = unwrap(v)
    if isinstance(v, Tensor) or not isinstance(v, int):
        raise CompilationError(f"{what} must be a constexpr int, got "
                               f"{v.dtype.name if isinstance(v, Tensor) else repr(v)}",
                               _loc())
    return v


def _loc():
    from ..ir.core import Loc
    f = context.user_frame()
    if f is None:
        return None
    import linecache
    return Loc(f.f_code.co_filename, f.f_lineno, 0,
               linecache.getline(f.f_code.co_filename, f.f_lineno), f.f_code.co_name)


def _shape(args) -> tuple:
    if len(args) == 1 and isinstance(unwrap(args[0]), (tuple, list)):
        args = unwrap(args[0])
    return tuple(_constexpr_int(s, "a shape") for s in args)


# ----------------------------------------------------------------------------- program model

def program_id(axis):
    return Tensor(torch.tensor(context.current.pid[_constexpr_int(axis, "axis")]), D.int32)


def num_programs(axis):
    return Tensor(torch.tensor(context.current.grid[_constexpr_int(axis, "axis")]), D.int32)


# ----------------------------------------------------------------------------- creation

def arange(start, end=None):
    if end is None:
        start, end = 0, start
    start, end = _constexpr_int(start, "arange start"), _constexpr_int(end, "arange end")
    if not _is_pow2(end - start):
        raise CompilationError(f"arange's length must be a power of two, got {end - start}", _loc())
    return Tensor(torch.arange(start, end, dtype=torch.int64), D.int32)


def full(shape, value, dtype):
    shape = _shape([shape])
    for s in shape:
        if not _is_pow2(s):
            raise CompilationError(f"block dimensions must be powers of two, got {list(shape)}", _loc())
    v = const(value, unwrap(dtype))
    return Tensor(v.data.expand(shape).clone(), v.dtype)


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def zeros_like(input):
    x = to_tensor(input)
    return Tensor(torch.zeros_like(x.data), x.dtype)


def full_like(input, value):
    x = to_tensor(input)
    return Tensor(const(value, x.dtype).data.expand(x.shape).clone(), x.dtype)


def cast_in_triton_order(input, dtype, fp_downcast_rounding=None, bitcast=False):
    return cast_(input, dtype, bitcast, fp_downcast_rounding)


def cast_(input, dtype, bitcast=False, fp_downcast_rounding=None):
    """x.to(dtype, ...) as the frontend builds it (newt/frontend/downcast.py, which checked the
    arguments): "rtz" steps the nearest value one unit toward zero where it is farther out."""
    r = cast(input, dtype, bitcast)
    if unwrap(fp_downcast_rounding) != "rtz":
        return r
    x, dt = to_tensor(input), unwrap(dtype)
    farther = Tensor(cast(r, x.dtype).data.abs() > x.data.abs(), D.int1)
    ints = {8: D.int8, 16: D.int16, 32: D.int32}[dt.bits]
    stepped = cast(cast(r, ints, bitcast=True) - 1, dt, bitcast=True)
    return where(farther, stepped, r)


# ----------------------------------------------------------------------------- shapes

def reshape(input, *shape, can_reorder=False):
    x = to_tensor(input)
    shape = _shape(shape)
    if torch.Size(shape).numel() != x.numel:
        raise CompilationError(f"cannot reshape a block of shape {list(x.shape)} to {list(shape)}",
                               _loc())
    return Tensor(x.data.reshape(shape), x.dtype, x.buf)


def view(input, *shape):
    return reshape(input, *shape)


def expand_dims(input, axis):
    x = to_tensor(input)
    axes = unwrap(axis)
    axes = list(axes) if isinstance(axes, (tuple, list)) else [axes]
    rank = x.data.dim() + len(axes)
    axes = sorted(_constexpr_int(a, "axis") % rank for a in axes)
    d = x.data
    for a in axes:
        d = d.unsqueeze(a)
    return Tensor(d, x.dtype, x.buf)


def broadcast_to(input, *shape):
    x = to_tensor(input)
    return Tensor(x.data.expand(_shape(shape)), x.dtype, x.buf)


def broadcast(input, other):
    a, b = to_tensor(input), to_tensor(other)
    s = torch.broadcast_shapes(a.shape, b.shape)
    return Tensor(a.data.expand(s), a.dtype, a.buf), Tensor(b.data.expand(s), b.dtype, b.buf)


def permute(input, *dims):
    x = to_tensor(input)
    return Tensor(x.data.permute(_shape(dims)), x.dtype, x.buf)


def trans(input, *dims):
    x = to_tensor(input)
    if not dims or (len(dims) == 1 and unwrap(dims[0]) in ((), [])):
        if x.data.dim() != 2:
            raise CompilationError(f"trans() without dims needs a 2-D block, got {list(x.shape)}",
                                   _loc())
        return Tensor(x.data.t(), x.dtype, x.buf)
    return permute(x, *dims)


# ----------------------------------------------------------------------------- math

def where(condition, x, y):
    c = to_tensor(condition)
    c = c.data if c.dtype.is_bool() else c.data != 0
    x, y = unwrap(x), unwrap(y)
    if isinstance(x, Tensor) and x.dtype.is_ptr() or isinstance(y, Tensor) and y.dtype.is_ptr():
        if not (isinstance(x, Tensor) and isinstance(y, Tensor) and x.buf is y.buf):
            raise TypeError("nl.where on pointers needs two pointers into the same tensor")
        return Tensor(torch.where(c, x.data, y.data), x.dtype, x.buf)
    x, y, ct = promote(x, y, arith=False)
    return Tensor(torch.where(c, x.data, y.data), ct)


def _minmax(x, y, is_max, propagate_nan):
    x, y, ct = promote(x, y)
    if ct.is_floating():
        nan_all = unwrap(propagate_nan) is PropagateNan.ALL   # the frontend checked the value
        f = (torch.maximum if is_max else torch.minimum) if nan_all else (torch.fmax if is_max else torch.fmin)
        return _down(f(_up(x), _up(y)), ct)
    if ct is D.uint64:
        pick = _ordered(x) >= _ordered(y) if is_max else _ordered(x) <= _ordered(y)
        return Tensor(torch.where(pick, x.data, y.data), ct)
    f = torch.maximum if is_max else torch.minimum
    return _down(f(_up(x), _up(y)), ct)


def maximum(x, y, propagate_nan=None):
    return _minmax(x, y, True, propagate_nan)


def minimum(x, y, propagate_nan=None):
    return _minmax(x, y, False, propagate_nan)


def clamp(x, min, max, propagate_nan=None):
    return minimum(maximum(x, min, propagate_nan), max, propagate_nan)


def fma(x, y, z):
    """x * y + z rounded once (fp16/bf16/fp32 are computed exactly in fp64 first)."""
    x, y, _ = promote(x, y)
    p, z, ct = promote(x, z)
    x, y = cast(x, ct), cast(y, ct)
    if ct.is_floating() and ct is not D.float64:
        return Tensor((x.data.double() * y.data.double() + z.data.double()).to(ct.to_torch()), ct)
    return _down(_up(x) * _up(y) + _up(z), ct)


def cdiv(x, div):
    return (x + div - 1) // div


def abs_(x):
    return builtins.abs(to_tensor(x))


def _float_input(x) -> Tensor:
    x = to_tensor(x)
    if x.dtype.is_ptr():
        raise TypeError("math functions need numbers, not pointers")
    return x if x.dtype.is_floating() else cast(x, D.float32)


def _math(fn):
    def impl(x):
        x = _float_input(x)
        return _down(fn(_up(x)), x.dtype)
    return impl


MATH = {
    "exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2,
    "sqrt": torch.sqrt, "sqrt_rn": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin,
    "cos": torch.cos, "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid,
    "floor": torch.floor, "ceil": torch.ceil,
}


def div_rn(x, y):
    a, b, ct = promote(x, y, div_or_mod=True)
    if not ct.is_floating():
        a, b, ct = cast(a, D.float32), cast(b, D.float32), D.float32
    return _down(_up(a) / _up(b), ct)


def umulhi(x, y):
    """High N bits of the 2N-bit product of the operands read as unsigned (signed types too, as
    Triton computes it)."""
    a, b, ct = promote(x, y)
    if ct.bits not in (32, 64) or not ct.is_int() or ct.is_bool():
        raise TypeError(f"umulhi needs 32- or 64-bit integers, got {ct.name}")
    if ct.bits == 64:     # (bit patterns in int64: the 128-bit product in Python integers)
        p, q = torch.broadcast_tensors(a.data, b.data)
        hi = [((u % 2**64) * (v % 2**64)) >> 64 for u, v in
              zip(p.reshape(-1).tolist(), q.reshape(-1).tolist())]
        hi = [h - 2**64 if h >= 2**63 else h for h in hi]
        return Tensor(torch.tensor(hi, dtype=torch.int64).reshape(p.shape), ct)
    m = (1 << 32) - 1
    hi = ((a.data & m) * (b.data & m)) >> 32    # the 64-bit product, wrapped: bits 32..63 exact
    return _down(hi & m, ct)


# ----------------------------------------------------------------------------- reductions, scans

def _axis(x: Tensor, axis):
    axis = unwrap(axis)
    if axis is None:
        return None
    return _constexpr_int(axis, "axis") % builtins.max(x.data.dim(), 1)


def _sum_dtype(dt, dtype):
    """Accumulator type: ints narrower than 32 bits widen to (u)int32, as Triton does."""
    if dtype is not None:
        return unwrap(dtype)
    if dt.is_int() and dt.bits < 32:
        return D.int32 if dt.is_signed() else D.uint32
    return dt


def _reduce(x: Tensor, axis, keep_dims, fn):
    """Apply torch reduction `fn(data, dim)` over `axis` (all axes when None)."""
    if axis is None:
        r = fn(x.data.reshape(-1), 0)
        return r.reshape((1,) * x.data.dim()) if keep_dims else r
    if x.data.dim() == 0:
        return x.data
    r = fn(x.data, axis)
    return r.unsqueeze(axis) if keep_dims else r


def sum(input, axis=None, keep_dims=False, dtype=None):
    x = to_tensor(input)
    acc = _sum_dtype(x.dtype, dtype)
    x = cast(x, acc)
    ax = _axis(x, axis)
    if acc is D.float16 or acc is D.bfloat16:  # accumulate in fp32, round back once
        r = _reduce(Tensor(x.data.float(), D.float32), ax, keep_dims, lambda d, a: d.sum(a))
        return Tensor(r.to(acc.to_torch()), acc)
    r = _reduce(Tensor(_up(x), acc), ax, keep_dims, lambda d, a: d.sum(a))
    return _down(r, acc)


def _nan_loses(key: torch.Tensor, is_max) -> torch.Tensor:
    """Float keys as int64 ranks (equal values share one) in which NaN ranks below every number
    (above, for a min), -inf included: the first largest number wins whatever the order, and a
    row of NaN alone gives its first index, its value NaN, as the compiled reduction does."""
    _, rank = torch.unique(key, sorted=True, return_inverse=True)
    lose = -1 if is_max else key.numel()
    return torch.where(key.isnan(), torch.full_like(rank, lose), rank)


def _extreme(x: Tensor, axis, keep_dims, is_max, want_index):
    ax = _axis(x, axis)
    if x.dtype.is_bool():
        x = Tensor(x.data.to(torch.int64), D.int32)
        back = D.int1
    else:
        back = x.dtype
    key = _ordered(x) if x.dtype.is_int() else _up(x)
    if x.dtype.is_floating():  # NaN never wins, as with nl.maximum / nl.minimum (fmax, fmin)
        key = _nan_loses(key, is_max)
    if ax is None:
        flat = key.reshape(-1)
        idx = flat.argmax(0) if is_max else flat.argmin(0)
        vals = x.data.reshape(-1)[idx]
        shape = (1,) * x.data.dim() if keep_dims else ()
        idx, vals = idx.reshape(shape), vals.reshape(shape)
    elif x.data.dim() == 0:
        idx, vals = torch.zeros((), dtype=torch.int64), x.data
    else:
        idx = key.argmax(ax, keepdim=True) if is_max else key.argmin(ax, keepdim=True)
        vals = torch.gather(x.data, ax, idx)
        if not keep_dims:
            idx, vals = idx.squeeze(ax), vals.squeeze(ax)
    v = cast(Tensor(vals, x.dtype), back)
    i = Tensor(idx, D.int32)
    return (v, i) if want_index else (i if want_index is None else v)


def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    return _extreme(to_tensor(input), axis, keep_dims, True, bool(unwrap(return_indices)))


def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    return _extreme(to_tensor(input), axis, keep_dims, False, bool(unwrap(return_indices)))


def argmax(input, axis, tie_break_left=True, keep_dims=False):
    return _extreme(to_tensor(input), axis, keep_dims, True, None)


def argmin(input, axis, tie_break_left=True, keep_dims=False):
    return _extreme(to_tensor(input), axis, keep_dims, False, None)


def cumsum(input, axis=0, reverse=False, dtype=None):
    x = to_tensor(input)
    acc = _sum_dtype(x.dtype, dtype)
    x = cast(x, acc)
    ax = _axis(x, axis)
    d = _up(x)
    if reverse:
        d = d.flip(ax)
    # fp16 / bf16 (and fp32) partial sums in fp32, each rounded from an exact fp64 running sum
    # where the compiled scan rounds per step: both are within one fp32 rounding of the other
    r = d.double().cumsum(ax).to(d.dtype) if d.dtype is torch.float32 else d.cumsum(ax)
    if reverse:
        r = r.flip(ax)
    return _down(r, acc)


# ----------------------------------------------------------------------------- matmul

def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=D.float32):
    """[M, K] @ [K, N] (+ acc). Floats are multiplied in fp64 and rounded once to the result type
    (more exact than tensor cores; tf32 is not emulated); int8 accumulates in int32 (wrapping)."""
    a, b = to_tensor(input), to_tensor(other)
    if a.data.dim() not in (2, 3) or a.data.dim() != b.data.dim() or a.shape[-1] != b.shape[-2]:
        raise CompilationError(f"nl.dot needs [M, K] @ [K, N] blocks, got {list(a.shape)} @ "
                               f"{list(b.shape)}", _loc())
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if builtins.min(m, n, k) < 16:
        raise CompilationError(f"nl.dot needs M, N and K >= 16, got M={m} N={n} K={k}", _loc())
    if a.dtype.is_floating() or b.dtype.is_floating():
        out = unwrap(out_dtype)
        if D.float64 in (a.dtype, b.dtype):
            out = D.float64
        prod = torch.matmul(_float_of(a) if not a.dtype.is_floating() else a.data.double(),
                            _float_of(b) if not b.dtype.is_floating() else b.data.double())
    else:
        out = D.int32
        prod = torch.matmul(a.data.to(torch.int64), b.data.to(torch.int64))
    if acc is not None:
        acc = to_tensor(acc)
        out = acc.dtype
        prod = prod + (acc.data.double() if out.is_floating() else acc.data)
    if out.is_floating():
        return Tensor(prod.to(out.to_torch()), out)
    return _down(prod, out)


# ----------------------------------------------------------------------------- hints, debugging
from .hints import (debug_barrier, device_assert, device_print, max_constancy,  # noqa: E402,F401
                    max_contiguous, multiple_of, static_assert, static_print)


# Methods of kernel tensors that forward to the language function of the same name
TENSOR_METHODS = {
    "reshape": reshape, "view": view, "trans": trans, "permute": permute,
    "expand_dims": expand_dims, "broadcast_to": broadcast_to, "sum": sum, "max": max,
    "min": min, "argmax": argmax, "argmin": argmin, "cumsum": cumsum, "abs": abs_,
    "cast": cast_in_triton_order, "to": cast_in_triton_order,
    **{k: _math(f) for k, f in MATH.items()},
}


constexpr_int, user_loc = _constexpr_int, _loc     # (for movement.py, scans.py)

# the language functions of newt/language/movement.py, scans.py and lowlevel.py
MATH_FNS = {k: _math(f) for k, f in MATH.items()}     # (nl.exp etc., for scans.softmax)

from .movement import (assume, cat, fdiv, flip, gather, histogram,  # noqa: E402,F401
                       inline_asm_elementwise, interleave, join, ravel, sort, split, swizzle2d,
                       topk)
from .scans import (associative_scan, cumprod, map_elementwise, reduce,  # noqa: E402,F401
                    reduce_or, softmax, xor_sum)


TENSOR_METHODS.update({"split": split, "flip": flip, "sort": sort, "topk": topk,
                       "histogram": histogram, "reduce": reduce, "ravel": ravel,
                       "associative_scan": associative_scan, "cumprod": cumprod,
                       "xor_sum": xor_sum, "reduce_or": reduce_or, "softmax": softmax,
                       "gather": gather})
