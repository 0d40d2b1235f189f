"""Block creation and shape manipulation rules (part of the frontend's semantic layer).

arange / full / zeros build new blocks; reshape, expand_dims, broadcast_to, trans, permute and
`x[:, None]` indexing rearrange them. Block shapes are compile-time constants; every dimension
is a power of two and a block holds at most 2**20 elements (Triton's limits).
"""
from __future__ import annotations

from .semantic import broadcast_shapes, broadcast_to_shape, cast, check_dtype, error, to_tensor
from .values import Tensor

MAX_NUMEL = 1 << 20


def _const_int(x, what: str) -> int:
    from ..language import constexpr
    if isinstance(x, constexpr):
        x = x.value
    if isinstance(x, Tensor):
        error(f"{what} must be a compile-time constant (a constexpr), not a runtime value")
    if isinstance(x, bool) or not isinstance(x, int):
        error(f"{what} must be an int, got {x!r}")
    return x


def check_shape(shape, what="block shape") -> tuple:
    if isinstance(shape, (int, Tensor)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        error(f"{what} must be a tuple of ints, got {shape!r}")
    shape = tuple(_const_int(s, f"{what} dimension") for s in shape)
    n = 1
    for s in shape:
        if s <= 0 or s & (s - 1):
            error(f"{what} {list(shape)}: every dimension must be a power of two, got {s}")
        n *= s
    if n > MAX_NUMEL:
        error(f"{what} {list(shape)} has {n} elements; a block holds at most {MAX_NUMEL}")
    return shape


def _shape_args(shape):
    """`reshape(x, 4, 8)` and `reshape(x, (4, 8))` both mean (4, 8)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


# ----------------------------------------------------------------------------- creation

def arange(b, start, end) -> Tensor:
    start = _const_int(start, "arange start")
    end = _const_int(end, "arange end")
    n = end - start
    if n <= 0:
        error(f"arange({start}, {end}) is empty: end must be greater than start")
    if n & (n - 1):
        error(f"arange length must be a power of two, got {n} (= {end} - {start})")
    if n > MAX_NUMEL:
        error(f"arange length {n} exceeds the block limit of {MAX_NUMEL} elements")
    return Tensor(b.arange(start, end), b)


def full(b, shape, value, dtype) -> Tensor:
    shape = check_shape(shape)
    dtype = check_dtype(dtype)
    if isinstance(value, Tensor) and value.is_block():
        error("full: value must be a scalar")
    v = cast(b, value, dtype)
    if not shape:
        return v
    return Tensor(b.splat(v.v, shape), b)


def zeros(b, shape, dtype) -> Tensor:
    return full(b, shape, 0, dtype)


def zeros_like(b, x) -> Tensor:
    x = to_tensor(b, x)
    return full(b, x.shape, 0, x.dtype)


def full_like(b, x, value) -> Tensor:
    x = to_tensor(b, x)
    return full(b, x.shape, value, x.dtype)


# ----------------------------------------------------------------------------- shapes

def reshape(b, x, *shape, can_reorder=False) -> Tensor:
    x = to_tensor(b, x)
    shape = check_shape(_shape_args(shape), "reshape target shape")
    n = 1
    for s in shape:
        n *= s
    if n != x.numel:
        error(f"cannot reshape a block of shape {list(x.shape)} ({x.numel} elements) to "
              f"{list(shape)} ({n} elements)")
    if shape == x.shape:
        return x
    if not shape:
        # one element to a scalar: reduce-free, a sum over a single element
        from .reductions import reduce
        return reduce(b, reshape(b, x, 1), "sum", 0)
    if not x.is_block():
        return Tensor(b.splat(x.v, shape), b)
    return Tensor(b.reshape(x.v, shape), b)


def expand_dims(b, x, axis) -> Tensor:
    x = to_tensor(b, x)
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    rank = len(x.shape) + len(axes)
    norm = []
    for a in axes:
        a = _const_int(a, "expand_dims axis")
        if not -rank <= a < rank:
            error(f"expand_dims axis {a} is out of range for a result of rank {rank}")
        norm.append(a % rank)
    if len(set(norm)) != len(norm):
        error(f"expand_dims: repeated axis in {axes}")
    shape = list(x.shape)
    for a in sorted(norm):
        shape.insert(a, 1)
    return reshape(b, x, tuple(shape))


def broadcast_to(b, x, *shape) -> Tensor:
    x = to_tensor(b, x)
    shape = check_shape(_shape_args(shape), "broadcast_to shape")
    return broadcast_to_shape(b, x, shape)


def broadcast(b, x, y):
    x, y = to_tensor(b, x), to_tensor(b, y)
    shape = broadcast_shapes(x.shape, y.shape)
    return broadcast_to_shape(b, x, shape), broadcast_to_shape(b, y, shape)


def permute(b, x, *dims) -> Tensor:
    x = to_tensor(b, x)
    dims = tuple(_const_int(d, "permute dimension") for d in _shape_args(dims))
    r = len(x.shape)
    dims = tuple(d % r if -r <= d < r else d for d in dims)
    if sorted(dims) != list(range(r)):
        error(f"permute order {list(dims)} is not a permutation of the {r} axes of a block "
              f"of shape {list(x.shape)}")
    if dims == tuple(range(r)):
        return x
    return Tensor(b.permute(x.v, dims), b)


def trans(b, x, *dims) -> Tensor:
    x = to_tensor(b, x)
    dims = _shape_args(dims)
    if not dims:
        if len(x.shape) != 2:
            if len(x.shape) < 2:
                return x
            error(f"trans without dims needs a 2-D block, got shape {list(x.shape)}")
        dims = (1, 0)
    return permute(b, x, *dims)


def subscript(b, x: Tensor, idx) -> Tensor:
    """`x[:, None]`, `x[None, :]`, `x[None]`: insert size-1 dims; `:` keeps a dim."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    shape, src = [], 0
    for i in idx:
        if i is None:
            shape.append(1)
        elif isinstance(i, slice) and i == slice(None, None, None):
            if src >= len(x.shape):
                error(f"too many indices for a block of shape {list(x.shape)}")
            shape.append(x.shape[src])
            src += 1
        elif i is Ellipsis:
            error("... is not supported in block indexing (use : and None)")
        else:
            error(f"blocks can only be indexed with None and : (like x[:, None]), got {i!r}")
    if src != len(x.shape):
        shape.extend(x.shape[src:])
    return reshape(b, x, tuple(shape))

