"""join / split / interleave / ravel / flip / gather / sort / topk / histogram / swizzle2d (part
of the frontend's
semantic layer; names and docs in newt/language/movement.py).

Three new ops carry the data movement (ops.py): `gather` (any element of the source along one
axis, through the shared-memory arena), `sort` (a bitonic network along one axis) and
`histogram`. The rest is built from them and from ordinary ops:
  - join(a, b): both broadcast to S + [2] and selected by the last coordinate (no new op);
  - split(a): two gathers of index 0 and 1 along the last axis, that axis dropped (a scalar
    gather when `a` is 1-D);
  - interleave(a, b): join, then a reshape merging the last two axes;
  - flip(x, d): a gather with index n-1-i along d;
  - topk(x, k, d): sort descending, then a gather of the first k along d.
"""
from __future__ import annotations

from .. import dtypes as D
from ..ir.core import BlockType, ScalarType
from .semantic import broadcast_all, broadcast_to_shape, cast, error, to_tensor, where
from .shapes import arange, reshape
from .values import Tensor


def const_int(x, what: str) -> int:
    """A compile-time int argument (a runtime value or anything else is an error)."""
    if isinstance(x, Tensor) or isinstance(x, bool) or not isinstance(x, int):
        error(f"{what} must be a compile-time int, got {x!r}")
    return x


def _dim(x: Tensor, dim, what) -> int:
    rank = len(x.shape)
    if rank == 0:
        error(f"{what} needs a block, got a scalar")
    d = rank - 1 if dim is None else const_int(dim, f"{what} dim")
    if not -rank <= d < rank:
        error(f"{what}: dim {d} is out of range for a block of shape {list(x.shape)}")
    return d % rank


def _pow2(n, what):
    if n <= 0 or n & (n - 1):
        error(f"{what} must be a power of two, got {n}")


def _along(b, idx_1d: Tensor, shape, axis) -> Tensor:
    """A 1-D int block placed along `axis` of a block of `shape` (broadcast over the rest)."""
    r = len(shape)
    if r == 1:
        return idx_1d
    shp = tuple(shape[axis] if i == axis else 1 for i in range(r))
    return broadcast_to_shape(b, reshape(b, idx_1d, shp), shape)


def gather(b, src, index, axis) -> Tensor:
    src, index = to_tensor(b, src), to_tensor(b, index)
    if not src.is_block():
        error("gather: src must be a block")
    if not index.dtype.is_int() or index.dtype.is_bool():
        error(f"gather: index must be an integer block, got {index.dtype.name}")
    ax = _dim(src, axis, "gather")
    index = cast(b, index, D.int32)
    if not index.is_block():
        if len(src.shape) != 1:
            error("gather: a scalar index needs a 1-D src")
        return Tensor(b.create("gather", [src.v, index.v], [ScalarType(src.dtype)],
                               {"axis": 0}).result, b)
    if len(index.shape) != len(src.shape):
        error(f"gather: index (shape {list(index.shape)}) must have the rank of src "
              f"(shape {list(src.shape)})")
    for i, (s, t) in enumerate(zip(src.shape, index.shape)):
        if i != ax and s != t:
            error(f"gather: index and src must have one size in every dim but `axis`: "
                  f"{list(index.shape)} vs {list(src.shape)}")
    return Tensor(b.create("gather", [src.v, index.v], [BlockType(src.dtype, index.shape)],
                           {"axis": ax}).result, b)


def join(b, a, c) -> Tensor:
    a, c = to_tensor(b, a), to_tensor(b, c)
    if a.dtype is not c.dtype:
        error(f"join: the two blocks must have one dtype, got {a.dtype.name} and {c.dtype.name}")
    a, c = broadcast_all(b, a, c)
    shape = a.shape + (2,)
    a2 = broadcast_to_shape(b, reshape(b, a, a.shape + (1,)) if a.shape else a, shape)
    c2 = broadcast_to_shape(b, reshape(b, c, c.shape + (1,)) if c.shape else c, shape)
    first = _along(b, arange(b, 0, 2) == 0, shape, len(shape) - 1)
    return where(b, first, a2, c2)


def split(b, a):
    a = to_tensor(b, a)
    if not a.is_block() or a.shape[-1] != 2:
        error(f"split needs a block whose last dim is 2, got shape {list(a.shape)}")
    if len(a.shape) == 1:
        return tuple(gather(b, a, to_tensor(b, i), 0) for i in (0, 1))
    out = []
    for i in (0, 1):
        idx = broadcast_to_shape(b, to_tensor(b, i), a.shape[:-1] + (1,))
        out.append(reshape(b, gather(b, a, idx, len(a.shape) - 1), a.shape[:-1]))
    return tuple(out)


def interleave(b, a, c) -> Tensor:
    j = join(b, a, c)
    if len(j.shape) == 1:
        return j
    return reshape(b, j, j.shape[:-2] + (j.shape[-2] * 2,))


def flip(b, x, dim=None) -> Tensor:
    x = to_tensor(b, x)
    d = _dim(x, dim, "flip")
    n = x.shape[d]
    if n == 1:
        return x
    rev = (n - 1) - arange(b, 0, n)
    return gather(b, x, _along(b, rev, x.shape, d), d)


def sort(b, x, dim=None, descending=False) -> Tensor:
    x = to_tensor(b, x)
    d = _dim(x, dim, "sort")
    _pow2(x.shape[d], "sort: the size of the sorted dim")
    if x.dtype.is_ptr() or x.dtype.is_fp8():
        error(f"sort: cannot sort {x.dtype.name} values")
    if isinstance(descending, Tensor):
        error("sort: descending must be a compile-time bool")
    if x.shape[d] == 1:
        return x
    return Tensor(b.create("sort", [x.v], [x.type], {"axis": d,
                                                       "descending": bool(descending)}).result, b)


def topk(b, x, k, dim=None) -> Tensor:
    x = to_tensor(b, x)
    d = _dim(x, dim, "topk")
    k = const_int(k, "topk k")
    _pow2(k, "topk k")
    if k > x.shape[d]:
        error(f"topk: k={k} is larger than the dim ({x.shape[d]})")
    s = sort(b, x, d, True)
    if k == x.shape[d]:
        return s
    shape = tuple(k if i == d else n for i, n in enumerate(x.shape))
    return gather(b, s, _along(b, arange(b, 0, k), shape, d), d)


def histogram(b, input, num_bins, mask=None) -> Tensor:
    x = to_tensor(b, input)
    num_bins = const_int(num_bins, "histogram num_bins")
    _pow2(num_bins, "histogram num_bins")
    if len(x.shape) != 1 or not x.dtype.is_int() or x.dtype.is_bool():
        error(f"histogram needs a 1-D integer block, got {x.type}")
    ops = [x.v]
    if mask is not None:
        m = to_tensor(b, mask)
        from .semantic import to_bool
        ops.append(broadcast_to_shape(b, to_bool(b, m), x.shape).v)
    return Tensor(b.create("histogram", ops, [BlockType(D.int32, (num_bins,))],
                           {"num_bins": num_bins, "has_mask": mask is not None}).result, b)


def cat(b, input, other, can_reorder=False) -> Tensor:
    a, c = to_tensor(b, input), to_tensor(b, other)
    if not a.is_block() or a.shape != c.shape:
        error(f"cat needs two blocks of one shape, got {a.type} and {c.type}")
    from .shapes import permute
    j = join(b, a, c)                                        # [n, ..., 2]
    r = len(a.shape)
    j = permute(b, j, r, *range(r))                          # [2, n, ...]
    return reshape(b, j, (2 * a.shape[0],) + a.shape[1:])


def ravel(b, x, can_reorder=False) -> Tensor:
    x = to_tensor(b, x)
    return reshape(b, x, x.numel) if len(x.shape) > 1 else x


def swizzle2d(b, i, j, size_i, size_j, size_g):
    """Grouped ordering: the linear index of (i, j), row-major over size_j columns, walks
    groups of size_g rows column by column."""
    from .semantic import binary, minmax
    lin = binary(b, "add", binary(b, "mul", i, size_j), j)
    per_group = binary(b, "mul", size_g, size_j)
    first = binary(b, "mul", binary(b, "floordiv", lin, per_group), size_g)   # group's 1st row
    rows = minmax(b, "minimum", binary(b, "sub", size_i, first), size_g)     # last: fewer
    within = binary(b, "mod", lin, per_group)
    return (binary(b, "add", first, binary(b, "mod", within, rows)),
            binary(b, "floordiv", within, rows))


def assume(b, cond):
    return None      # a hint the generated C++ does not need
