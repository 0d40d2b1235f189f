"""Reductions, scans and dot (part of the frontend's semantic layer).

  - axis=None reduces over all axes: the block is reshaped to 1-D, then reduced along axis 0;
  - keep_dims reinserts the reduced axes as size 1 (a reshape);
  - sum (and cumsum) of ints narrower than 32 bits accumulates in int32 (uint32 for unsigned) and
    returns that type (Triton's _pick_sum_dtype); sum and cumsum of fp16/bf16 accumulate in fp32
    and the result is cast back to the input type;
  - max/min keep the input type (exact in any type; the interpreter agrees); argmax/argmin
    return int32, the first index among ties;
  - dot emits one `dot` op with an explicit accumulator (zeros of fp32 for float inputs, int32
    for int8, when none is given).
"""
from __future__ import annotations

from .. import dtypes as D
from .semantic import broadcast_to_shape, cast, check_dtype, error, no_fp8, to_tensor
from .shapes import _const_int, reshape
from .values import Tensor


def _axis(x: Tensor, axis) -> int:
    axis = _const_int(axis, "reduction axis")
    r = len(x.shape)
    if not -r <= axis < r:
        error(f"axis {axis} is out of range for a block of shape {list(x.shape)}")
    return axis % r


def reduce(b, x, kind: str, axis, keep_dims: bool = False) -> Tensor:
    x = to_tensor(b, x)
    if x.dtype.is_ptr():
        error(f"cannot reduce ({kind}) a block of pointers")
    no_fp8(x.dtype, kind)
    if not x.is_block():
        if kind in ("argmax", "argmin"):
            return to_tensor(b, 0)
        return x
    shape = x.shape
    if axis is None:
        flat = x if len(shape) == 1 else reshape(b, x, x.numel)
        r = Tensor(b.reduce(flat.v, kind, 0), b)
        if keep_dims:
            r = Tensor(b.splat(r.v, (1,) * len(shape)), b)
        return r
    ax = _axis(x, axis)
    r = Tensor(b.reduce(x.v, kind, ax), b)
    if keep_dims:
        kept = shape[:ax] + (1,) + shape[ax + 1:]
        r = reshape(b, r, kept)
    return r


def sum_(b, x, axis=None, keep_dims=False, dtype=None) -> Tensor:
    x = to_tensor(b, x)
    in_dt = x.dtype
    if dtype is not None:
        x = cast(b, x, check_dtype(dtype))
    elif in_dt.is_signed() and in_dt.bits < 32:
        x = cast(b, x, D.int32)
    elif in_dt.kind in ("uint", "bool") and in_dt.bits < 32:   # Triton counts int1 unsigned
        x = cast(b, x, D.uint32)
    elif in_dt in (D.float16, D.bfloat16):
        return cast(b, reduce(b, cast(b, x, D.float32), "sum", axis, keep_dims), in_dt)
    return reduce(b, x, "sum", axis, keep_dims)


def max_(b, x, axis=None, return_indices=False, return_indices_tie_break_left=True,
         keep_dims=False) -> Tensor:
    return _minmax(b, "max", x, axis, return_indices, keep_dims)


def min_(b, x, axis=None, return_indices=False, return_indices_tie_break_left=True,
         keep_dims=False) -> Tensor:
    return _minmax(b, "min", x, axis, return_indices, keep_dims)


def _minmax(b, kind, x, axis, return_indices, keep_dims):
    x = to_tensor(b, x)
    if return_indices:
        return (reduce(b, x, kind, axis, keep_dims),
                reduce(b, x, "arg" + kind, axis, keep_dims))
    return reduce(b, x, kind, axis, keep_dims)


def argmax(b, x, axis, tie_break_left=True, keep_dims=False) -> Tensor:
    return reduce(b, x, "argmax", axis, keep_dims)


def argmin(b, x, axis, tie_break_left=True, keep_dims=False) -> Tensor:
    return reduce(b, x, "argmin", axis, keep_dims)


def cumsum(b, x, axis=0, reverse=False, dtype=None) -> Tensor:
    x = to_tensor(b, x)
    if not x.is_block():
        return x
    in_dt = x.dtype
    if dtype is not None:
        x = cast(b, x, check_dtype(dtype))
    elif in_dt.is_signed() and in_dt.bits < 32:
        x = cast(b, x, D.int32)
    elif in_dt.kind in ("uint", "bool") and in_dt.bits < 32:
        x = cast(b, x, D.uint32)
    elif in_dt in (D.float16, D.bfloat16):   # as nl.sum: fp32 partial sums, rounded once
        scan = b.scan(cast(b, x, D.float32).v, "sum", _axis(x, axis), bool(reverse))
        return cast(b, Tensor(scan, b), in_dt)
    no_fp8(x.dtype, "cumsum")     # (with dtype= the block was cast first, as for nl.sum)
    return Tensor(b.scan(x.v, "sum", _axis(x, axis), bool(reverse)), b)


# ----------------------------------------------------------------------------- dot

_DOT_INPUTS = (D.float16, D.bfloat16, D.float32, D.float64, D.int8)
_PRECISIONS = ("tf32", "tf32x3", "ieee")


def dot(b, a, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=D.float32) -> Tensor:
    a, o = to_tensor(b, a), to_tensor(b, other)
    for name, t in (("first", a), ("second", o)):
        if len(t.shape) != 2:
            error(f"dot: the {name} operand must be a 2-D block, got shape {list(t.shape)}")
    (m, k), (k2, n) = a.shape, o.shape
    if k != k2:
        error(f"dot: inner dimensions differ: [{m}, {k}] @ [{k2}, {n}]")
    fp8 = a.dtype.is_fp8() and o.dtype.is_fp8()
    # any pair of fp8 types, as in Triton: kept for the dot-pipeline pass, which picks 8-bit
    # wgmma or casts both to fp16 (exact) for the arch (newt/passes/tc/dot_fp8.py)
    if a.dtype is not o.dtype and not fp8:
        error(f"dot: operands must have one dtype, got {a.dtype.name} and {o.dtype.name} "
              f"(cast one with .to())")
    if a.dtype not in _DOT_INPUTS and not fp8:
        error(f"dot: unsupported input dtype {a.dtype.name}")
    if m < 16 or n < 16 or k < 16:
        error(f"dot needs M, N and K >= 16, got M={m}, N={n}, K={k}")
    if input_precision is None:
        input_precision = "ieee" if allow_tf32 is False else "tf32"
    if input_precision not in _PRECISIONS:
        error(f"dot: input_precision must be one of {_PRECISIONS}, got {input_precision!r}")
    if a.dtype is not D.float32:
        input_precision = "ieee" if a.dtype is D.float64 else input_precision
    out_dtype = check_dtype(out_dtype)
    if a.dtype is D.int8:
        out_dtype = D.int32
    elif a.dtype is D.float64:
        out_dtype = D.float64
    elif out_dtype not in (D.float32, D.float16, D.bfloat16):
        error(f"dot: out_dtype must be a float type for float inputs, got {out_dtype.name}")
    if acc is None:
        accv = Tensor(b.splat(b.constant(0, out_dtype), (m, n)), b)
    else:
        accv = to_tensor(b, acc)
        if accv.shape != (m, n):
            if accv.is_block():
                error(f"dot: acc must have shape [{m}, {n}], got {list(accv.shape)}")
            accv = broadcast_to_shape(b, accv, (m, n))
        out_dtype = accv.dtype
        if a.dtype is D.int8 and out_dtype is not D.int32:
            error(f"dot: int8 inputs accumulate in int32, got acc of {out_dtype.name}")
        if a.dtype.is_floating() and not out_dtype.is_floating():
            error(f"dot: acc must be a float block for {a.dtype.name} inputs")
    return Tensor(b.dot(a.v, o.v, accv.v, input_precision, out_dtype), b)
