"""Scans with a user combine function (`hl.associative_scan`) and `expand` / `expand_as`, while
tracing, and the scan of the eager oracle.

Tracing: the operands are broadcast to one shape (an `expand` node where one is smaller), then the
user's combine function runs once on scalar `param` values of the operands' dtypes, recorded into
a block of its own (not the loop body); the `scan` node keeps that block, its params and its
results, and one `item` node per operand picks a result. lower_scan.py prints the block as a
`@newt.jit` combine function beside the kernel and the scan as `nl.associative_scan`.

The scan runs along a whole dim (a full slice ':' or a size-1 axis), or along the launch grid's
tile, where each program scans its own tile: that result may reach only `hl.atomic_add` (as a
reduction over the grid may; Helion's segmented reduction adds each tile's partial sums). A
reverse scan needs a dim without padded lanes (those would flow into the real ones).
"""
from __future__ import annotations

import torch

from . import ir, ops
from .errors import TraceError


def associative_scan(tracer, combine_fn, input, dim, reverse=False):
    single = not isinstance(input, (tuple, list))
    xs = [ops.as_operand(tracer, x) for x in ([input] if single else input)]
    if not xs or any(not isinstance(x, ir.Value) or x.rank == 0 for x in xs):
        raise TraceError("hl.associative_scan takes a tile value or a tuple of them (not numbers "
                         "or scalars)")
    dims = ()
    for x in xs:
        dims = ir.broadcast_dims(dims, x.dims)
        if dims is None:
            raise TraceError("hl.associative_scan: the operands' tile shapes do not broadcast")
    xs = [expand(tracer, x, dims) for x in xs]
    if not isinstance(dim, int) or not -len(dims) <= dim < len(dims):
        raise TraceError(f"hl.associative_scan: dim {dim!r} out of range for {len(dims)} dims")
    axis = dim % len(dims)
    d = dims[axis]
    if d is ir.ONE:
        return xs[0] if single else tuple(xs)
    if d.kind == "loop":
        raise TraceError(f"hl.associative_scan over {d.describe()}, the tile of an inner loop: "
                         "each iteration would scan its own tile; scan a full slice ':' instead")
    if reverse and not (d.kind == "full" and d.block == d.extent):
        raise TraceError(f"a reverse hl.associative_scan over {d.describe()}, which has padded "
                         "lanes past its end: they would flow into the real ones")
    params, outs, body = _combine(tracer, combine_fn, xs)
    scan = tracer.new("scan", xs, dims, None, None, combine=(params, outs, body), axis=axis,
                      reverse=bool(reverse), partial=ops.whole_dim(d, "hl.associative_scan over"))
    items = tuple(tracer.new("item", [scan], dims, x.dtype, None, index=i)
                  for i, x in enumerate(xs))
    return items[0] if single else items


def _combine(tracer, combine_fn, xs):
    """Run combine_fn on scalar params (left operands, then right ones) into a block of its own."""
    saved, body = tracer.current_block, []
    tracer.current_block = body
    try:
        params = [tracer.new("param", [], (), x.dtype, None, name=f"{side}{i}")
                  for side in ("left", "right") for i, x in enumerate(xs)]
        for p in params:
            p.name = p.attrs["name"]
        outs = combine_fn(*params)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if len(outs) != len(xs):
            raise TraceError(f"the combine function returned {len(outs)} values for "
                             f"{len(xs)} operands")
        res = []
        for o, x in zip(outs, xs):
            o = ops.as_operand(tracer, o)
            if isinstance(o, ir.Value) and o.rank:
                raise TraceError("the combine function must compute on its arguments' elements "
                                 "(it returned a value over tile dims)")
            res.append(ops.cast(tracer, o, x.dtype) if isinstance(o, ir.Value) else o)
    finally:
        tracer.current_block = saved
    return params, res, body


def expand(tracer, x, dims):
    """x broadcast to exactly `dims` (right-aligned, as torch)."""
    x = ops.as_operand(tracer, x)
    if ir.dims_match(x.dims, dims):
        return x
    if ir.broadcast_dims(x.dims, dims) is None or not ir.dims_match(
            ir.broadcast_dims(x.dims, dims), dims):
        raise TraceError("expand: the tile shapes [" + ", ".join(d.describe() for d in x.dims)
                         + "] do not broadcast to [" + ", ".join(d.describe() for d in dims) + "]")
    if x.rank < len(dims):
        x = ops.view(tracer, x, (None,) * (len(dims) - x.rank) + (slice(None),) * x.rank)
    return tracer.new("expand", [x], tuple(dims), x.dtype, None)


def expand_sizes(tracer, x, sizes):
    """`x.expand(*sizes)`: -1 keeps a dim; a tile or an int names the dim to broadcast to."""
    from .trace import Tile
    sizes = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else list(sizes)
    lead = len(sizes) - x.rank
    dims = []
    for j, s in enumerate(sizes):
        own = x.dims[j - lead] if j >= lead else ir.ONE
        if isinstance(s, Tile):
            dims.append(s.dim)
        elif s == -1 or (own is not ir.ONE and own.kind == "full" and own.extent == s):
            dims.append(own)
        elif s == 1:
            dims.append(ir.ONE)
        elif isinstance(s, int) and not isinstance(s, bool):
            dims.append(tracer.program.full_dim(s))
        else:
            raise TraceError(f"expand: unsupported size {s!r}")
    return expand(tracer, x, tuple(dims))


# ----------------------------------------------------------------------------- the oracle
def eager_scan(combine_fn, input, dim, reverse=False):
    """The inclusive scan in eager torch, in log2(n) steps (element i combines with the one 2^s
    before it; with `reverse`, after it, which is then the left argument, as in newt)."""
    single = not isinstance(input, (tuple, list))
    out = [x.clone() for x in torch.broadcast_tensors(*([input] if single else list(input)))]
    n, s = out[0].shape[dim], 1
    while s < n:
        head = [o.narrow(dim, 0, n - s) for o in out]
        tail = [o.narrow(dim, s, n - s) for o in out]
        new = combine_fn(*(tail + head) if reverse else (head + tail))
        new = list(new) if isinstance(new, (tuple, list)) else [new]
        new = [torch.as_tensor(v).to(o.dtype).expand(h.shape) for v, o, h in zip(new, out, head)]
        if reverse:
            out = [torch.cat([v, o.narrow(dim, n - s, s)], dim) for v, o in zip(new, out)]
        else:
            out = [torch.cat([o.narrow(dim, 0, s), v], dim) for v, o in zip(new, out)]
        s *= 2
    return out[0] if single else tuple(out)
