"""Reshapes that split or merge dims of a tile value, and `hl.split` / `hl.join`, while tracing.

A tile of the grid or of a loop has no layout beyond its own block, so it is never split or
merged: the tile dims of a reshape's target must be the value's own, in order. Between them, a
run of whole dims (full slices ':', size-1 axes) may be regrouped when its element count is kept:
`[tm, 64] -> [tm, 2, 32]`, `[tm, 2, 32] -> [tm, 64]`. The block of a whole dim is its extent
rounded up to a power of two, and regrouping blocks matches regrouping the data only when no dim
of the run is padded, so every dim of a regrouped run must be a power of two. New dims are the
program's shared full dims of that extent (so `[tm, 2, 32] -> [tm, 64]` lines up with `x[tm, :]`),
or a dim of their own where that one already stands in the same value. The lowering prints
`nl.reshape`, `nl.split` (with `item` picking a half) and `nl.join`.
"""
from __future__ import annotations

import torch

from . import ir, ops
from .errors import TraceError


def _is_tile(d) -> bool:
    return d is not ir.ONE and d.kind != "full"


def _pow2(n) -> bool:
    return n >= 1 and n & (n - 1) == 0


def regroup(tracer, x, shape):
    """x reshaped to `shape` (tiles and ints, one -1 at most), splitting or merging whole dims;
    None when the shape's tiles are not x's own tile dims in order (the caller then explains)."""
    tiles = [s.dim for s in shape if hasattr(s, "dim")]
    own = [d for d in x.dims if _is_tile(d)]
    if len(tiles) != len(own) or not all(ir.same_dim(a, b) for a, b in zip(tiles, own)):
        return None
    if any(not hasattr(s, "dim") and not (isinstance(s, int) and (s >= 1 or s == -1))
           for s in shape) or sum(1 for s in shape if not hasattr(s, "dim") and s == -1) > 1:
        return None
    src_runs, tgt_runs = _runs(x.dims, _is_tile), _runs(shape, lambda s: hasattr(s, "dim"))
    out = []
    for k, (src, tgt) in enumerate(zip(src_runs, tgt_runs)):
        out += _regroup_run(tracer, src, list(tgt), x)
        if k < len(tiles):
            out.append(own[k])
    real = [d for d in out if d is not ir.ONE]
    if len({id(d) for d in real}) != len(real):
        raise TraceError(f"reshape of a tile to {list(shape)} names one dim twice")
    if tuple(out) == x.dims:
        return x
    return tracer.new("reshape", [x], tuple(out), x.dtype, None)


def _runs(items, is_sep):
    runs, cur = [], []
    for it in items:
        if is_sep(it):
            runs.append(cur)
            cur = []
        else:
            cur.append(it)
    return runs + [cur]


def _regroup_run(tracer, src, tgt, x):
    count = 1
    for d in src:
        count *= d.extent
    if -1 in tgt:
        rest = 1
        for s in tgt:
            rest *= s if s != -1 else 1
        if count % rest:
            raise TraceError(f"reshape: -1 cannot make {count} elements from {tgt}")
        tgt[tgt.index(-1)] = count // rest
    want = 1
    for s in tgt:
        want *= s
    if want != count:
        raise TraceError(f"reshape of a tile: whole dims of {count} elements cannot become "
                         f"{tgt} ({want} elements)")
    # groups of source and target dims of equal element counts, left to right: a group of one
    # dim each keeps its dim, others are regrouped
    real, slots, taken = [d for d in src if d is not ir.ONE], [ir.ONE] * len(tgt), {id(d) for d in x.dims}
    j = k = 0
    while k < len(tgt):
        if tgt[k] == 1:
            k += 1
            continue
        gt, pt, gs, ps = [k], tgt[k], [], 1
        k += 1
        while ps != pt:
            if ps < pt:
                gs.append(real[j])
                ps *= real[j].extent
                j += 1
            else:
                while tgt[k] == 1:
                    k += 1
                gt.append(k)
                pt *= tgt[k]
                k += 1
        if len(gs) == 1 and len(gt) == 1:
            slots[gt[0]] = gs[0]
            continue
        if any(not (_pow2(d.extent) and d.block in (None, d.extent)) for d in gs) or \
                not all(_pow2(tgt[i]) for i in gt):
            raise TraceError("reshape of a tile splitting or merging whole dims needs power-of-two "
                             f"sizes (a padded dim's lanes would land in the data): {tgt}")
        for i in gt:
            slots[i] = _fresh_full(tracer, tgt[i], taken)
            taken.add(id(slots[i]))
    return slots


def _fresh_full(tracer, extent, taken):
    d = tracer.program.full_dim(extent)
    if id(d) not in taken:
        return d
    d = ir.Dim("full", extent, block=ir.next_pow2(extent))
    tracer.program.dims.append(d)
    return d


def split(tracer, x):
    """hl.split: a value whose last dim has 2 elements -> its two halves."""
    x = ops.as_operand(tracer, x)
    if not isinstance(x, ir.Value) or x.rank == 0 or x.dims[-1] is ir.ONE or \
            x.dims[-1].kind != "full" or x.dims[-1].extent != 2:
        raise TraceError("hl.split takes a tile value whose last dim is a whole dim of 2")
    pair = tracer.new("split", [x], x.dims, x.dtype, None)
    return tuple(tracer.new("item", [pair], x.dims[:-1], x.dtype, None, index=i) for i in (0, 1))


def join(tracer, a, b):
    """hl.join: two values (broadcast to one shape) stacked along a new last dim of 2."""
    from .scans import expand
    a, b = ops.as_operand(tracer, a), ops.as_operand(tracer, b)
    if not (isinstance(a, ir.Value) and isinstance(b, ir.Value)):
        raise TraceError("hl.join takes two tile values")
    dims = ir.broadcast_dims(a.dims, b.dims)
    if dims is None:
        raise TraceError("hl.join: the two tile shapes do not broadcast")
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = (expand(tracer, ops.cast(tracer, v, dtype), dims) for v in (a, b))
    last = _fresh_full(tracer, 2, {id(d) for d in dims})
    return tracer.new("join", [a, b], tuple(dims) + (last,), dtype, None)
