"""Tracing tensor accesses: indexing a real tensor inside a tile loop, as loads, stores, atomics.

Consumes a real torch tensor and a Python index; produces `load` / `store` / `atomic` nodes of the
trace (ir.Value) whose `index` lists one entry per tensor axis, plus `None` axes:
    ("tile", Dim)    a tile of a loop            ("full", Dim)   `:` or a partial slice `a:b`
    ("int", i)       a host int                  ("index", Dim)  a block_size=1 tile / hl.grid
    ("value", Value) an integer tile value computed in the kernel (a gather / scatter; its dims
                     take the axis' place, a scalar drops it)
    ("new", ONE)     `None`: a size-1 axis of the result (no tensor axis)
A partial slice's start is `attrs["starts"][axis]`. `extra_mask` (hl.load / hl.store) is ANDed
with the bounds masks. lower_expr.py turns an index into pointer and mask expressions.
"""
from __future__ import annotations

import torch

from . import ir
from .errors import TraceError
from .ir import ONE


def parse_index(tracer, tensor: torch.Tensor, index, masked=False):
    """-> (entries, starts, result dims). `masked`: an extra_mask guards the access, so a
    tile may reach past the tensor's end (Helion's concatenation idiom)."""
    from .trace import Tile
    prog = tracer.program
    if not isinstance(index, tuple):
        index = (index,)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise TraceError("at most one `...` in an index")
    n_axes = sum(1 for i in index if i is not None and i is not Ellipsis)
    if any(i is Ellipsis for i in index):
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (tensor.dim() - n_axes) + index[k + 1:]
        n_axes = tensor.dim()
    if n_axes > tensor.dim():
        raise TraceError(f"too many indices ({n_axes}) for a tensor of {tensor.dim()} dims")
    index = index + (slice(None),) * (tensor.dim() - n_axes)
    out, starts, dims, axis = [], {}, [], 0
    for i in index:
        if i is None:
            out.append(("new", ONE))
            dims.append(ONE)
            continue
        size = tensor.shape[axis]
        if isinstance(i, Tile):
            if isinstance(i.dim.hi, int) and i.dim.hi > size and not masked:
                raise TraceError(f"tile {i.dim.describe()} is larger than dimension {axis} of "
                                 f"the tensor it indexes (size {size})")
            out.append(("index" if i.dim.is_index else "tile", i.dim))
            if not i.dim.is_index:
                dims.append(i.dim)
        elif isinstance(i, slice):
            if i.step not in (None, 1):
                raise TraceError("slices with a step are not supported in a tile loop")
            lo, hi, _ = i.indices(size)
            if not (isinstance(i.start, (int, type(None))) and isinstance(i.stop, (int, type(None)))):
                raise TraceError("slice bounds in a tile loop must be host ints")
            if hi <= lo:
                raise TraceError(f"empty slice {lo}:{hi} in a tile loop")
            d = prog.full_dim(hi - lo)
            if lo:
                starts[axis] = lo
            out.append(("full", d))
            dims.append(d)
        elif isinstance(i, int) and not isinstance(i, bool):
            if not -size <= i < size:
                raise TraceError(f"index {i} out of range for dimension {axis} (size {size})")
            out.append(("int", i % size))
        elif isinstance(i, ir.Value):
            if i.dtype.is_floating_point or i.dtype == torch.bool:
                raise TraceError("a tensor indexed with a tile value needs an integer value "
                                 f"(got {i.dtype}): convert it with .to(torch.int32)")
            out.append(("value", i))
            dims.extend(d for d in i.dims)
        else:
            raise TraceError(f"unsupported index {i!r}: index tensors with tiles, ints, slices, "
                             "None, '...' or integer tile values")
        axis += 1
    real = [d for d in dims if d is not ONE]
    if len({id(d) for d in real}) != len(real):
        raise TraceError("an index uses the same tile dim twice")
    return out, starts, tuple(dims)


def load(tracer, tensor, index, extra_mask=None):
    idx, starts, dims = parse_index(tracer, tensor, index, extra_mask is not None)
    extra_mask = _with_jagged(tracer, extra_mask, dims)
    ref = tracer.program.tensor_ref(tensor)
    ref.loaded = True
    args = [_mask_operand(tracer, extra_mask, dims)] if extra_mask is not None else []
    args += [i for kind, i in idx if kind == "value"]
    return tracer.new("load", args, dims, tensor.dtype, 0, ref=ref, index=idx, starts=starts,
                      extra_mask=extra_mask is not None)


def store(tracer, tensor, index, value, extra_mask=None, atomic=None):
    from .ops import as_operand, cast
    idx, starts, dims = parse_index(tracer, tensor, index, extra_mask is not None)
    value = as_operand(tracer, value)
    vdims = getattr(value, "dims", ())
    if not ir.dims_match(ir.broadcast_dims(dims, vdims), dims):
        raise TraceError("mismatched tile shapes in store: value has dims "
                         f"[{', '.join(d.describe() for d in vdims)}], target "
                         f"[{', '.join(d.describe() for d in dims)}]")
    extra_mask = _with_jagged(tracer, extra_mask, dims)
    if atomic is not None and isinstance(value, ir.Value) and value.dtype != tensor.dtype:
        value = cast(tracer, value, tensor.dtype)   # atomics update in the tensor's dtype
    ref = tracer.program.tensor_ref(tensor)
    ref.stored = True
    if atomic is not None:
        ref.loaded = True          # read-modify-write: the tensor's contents matter
    args = [value] + ([_mask_operand(tracer, extra_mask, dims)] if extra_mask is not None else [])
    args += [i for kind, i in idx if kind == "value"]
    tracer.new("atomic" if atomic else "store", args, (), None, None, ref=ref, index=idx,
               starts=starts, extra_mask=extra_mask is not None, fn=atomic, dims_of=dims)


def _with_jagged(tracer, extra_mask, dims):
    """extra_mask ANDed with the row lengths of the jagged tiles among dims (jagged.py)."""
    from . import jagged
    from .ops import as_operand, binary
    m = jagged.mask(tracer, dims)
    if m is None:
        return extra_mask
    return m if extra_mask is None else binary(tracer, "and", as_operand(tracer, extra_mask), m)


def _mask_operand(tracer, m, dims):
    from .ops import as_operand
    m = as_operand(tracer, m)
    if not isinstance(m, ir.Value) or m.dtype != torch.bool:
        raise TraceError("extra_mask must be a boolean tile value (e.g. tile.index < n)")
    if not ir.dims_match(ir.broadcast_dims(dims, m.dims), dims):
        raise TraceError("extra_mask's tile dims must be among the accessed tile's dims")
    return m
