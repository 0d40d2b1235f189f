"""Jagged tiles: `hl.jagged_tile(lengths)` while tracing, and the masks it puts on accesses.

Sits beside trace.py and memory.py: `lengths` is a tile value over enclosing tile dims (one
length per row). The loop becomes an ordinary device loop from 0 to the largest length of the
rows a program holds (a max reduction, computed in the kernel before the loop), and its Dim
remembers `lengths`. Every load, store or atomic whose dims hold that Dim and the lengths' dims
is then masked with `index < lengths` (placed on the access's axes), so a row reads 0 past its
length and writes nothing there; a reduction over the Dim first replaces those lanes with its
identity. The oracle (oracle.py) runs the enclosing grid loop one row at a time instead, where
each row's loop is a plain `hl.tile(lengths[row])`.
"""
from __future__ import annotations

import torch

from . import ir, ops
from .errors import TraceError, user_loc


def tile(tracer, lengths, block_size):
    """The generator of a jagged loop (a plain loop when `lengths` is a number or a scalar)."""
    if isinstance(lengths, ir.Value) and tracer.program is not None and lengths.rank > 0:
        if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
            raise TraceError(f"hl.jagged_tile takes integer lengths, got {lengths.dtype}",
                             user_loc())
        if any(d is ir.ONE or d.kind == "full" for d in lengths.dims):
            raise TraceError("hl.jagged_tile: the lengths must be a value over the enclosing "
                             "tiles (one length per row), e.g. offsets[tile_b.index + 1] - "
                             "offsets[tile_b]", user_loc())
        top = ops.reduce(tracer, "max", lengths)
        return tracer.tile([0], [top], block_size, False, jagged=lengths)
    return tracer.tile([0], [lengths], block_size, False)


def place(tracer, v, dims):
    """`v` broadcast onto `dims` (its dims must appear there, in order), or None."""
    pos = []
    for d in v.dims:
        k = next((j for j, t in enumerate(dims) if t is d), None)
        if d is ir.ONE or k is None:
            return None
        pos.append(k)
    if pos != sorted(pos):
        return None
    if len(dims) == v.rank:
        return v
    return ops.view(tracer, v, tuple(slice(None) if j in pos else None for j in range(len(dims))))


def mask(tracer, dims):
    """The AND of `index < lengths` over the jagged dims among `dims` whose lengths' dims are
    there too, placed on `dims`; None when there is none."""
    out = None
    for d in dims:
        lengths = getattr(d, "jagged", None)
        if lengths is None:
            continue
        n = place(tracer, lengths, dims)
        if n is None:
            continue
        c = ops.binary(tracer, "lt", place(tracer, _index(tracer, d), dims), n)
        out = c if out is None else ops.binary(tracer, "and", out, c)
    return out


def guard_reduction(tracer, x, rdim, kind):
    """x with the lanes past each row's length set to the reduction's identity."""
    if kind == "mean":
        raise TraceError("mean() over a jagged tile: each row has its own count; sum over the "
                         "tile and divide by the lengths", user_loc())
    m = place(tracer, rdim.jagged, x.dims)
    if m is not None and x.op == "load" and x.pad == ir.identity(kind, x.dtype):
        return x          # the load is masked with the lengths already: those lanes read 0
    if m is None:
        raise TraceError(f"a reduction over the jagged tile {rdim.describe()} of a value that "
                         "does not hold the rows its lengths are over", user_loc())
    c = ops.binary(tracer, "lt", place(tracer, _index(tracer, rdim), x.dims), m)
    return ops.where(tracer, c, x, ir.identity(kind, x.dtype))


def _index(tracer, d):
    from .trace import Tile
    return Tile(tracer, d).index
