"""Scans and reductions with a user combine function (`hl.associative_scan`, `hl.reduce`) and
`expand` / `expand_as`, while tracing, and the scan and reduction of the eager oracle.

Tracing: the operands are broadcast to one shape (an `expand` node where one is smaller), then the
user's combine function runs once on scalar `param` values of the operands' dtypes, recorded into
a block of its own (not the loop body); the `scan` node keeps that block, its params and its
results, and one `item` node per operand picks a result. lower_scan.py prints the block as a
`@newt.jit` combine function beside the kernel and the scan as `nl.associative_scan`.

The scan runs along a whole dim (a full slice ':' or a size-1 axis), or along the launch grid's
tile, where each program scans its own tile: that result may reach only `hl.atomic_add` (as a
reduction over the grid may; Helion's segmented reduction adds each tile's partial sums). A
reverse scan needs a dim without padded lanes (those would flow into the real ones).

hl.reduce records a `creduce` node the same way (lowered to `nl.reduce`), one dim at a time;
its padded lanes are set to `other` first (pads.py decides where that is needed).
"""
from __future__ import annotations

import torch

from . import ir, ops
from .errors import TraceError


def _broadcast(tracer, xs, what):
    """The operands expanded to their common tile dims, and those dims."""
    dims = ()
    for x in xs:
        dims = ir.broadcast_dims(dims, x.dims)
        if dims is None:
            raise TraceError(f"{what}: the operands' tile shapes do not broadcast")
    return [expand(tracer, x, dims) for x in xs], dims


def associative_scan(tracer, combine_fn, input, dim, reverse=False):
    single = not isinstance(input, (tuple, list))
    xs = [ops.as_operand(tracer, x) for x in ([input] if single else input)]
    if not xs or any(not isinstance(x, ir.Value) or x.rank == 0 for x in xs):
        raise TraceError("hl.associative_scan takes a tile value or a tuple of them (not numbers "
                         "or scalars)")
    xs, dims = _broadcast(tracer, xs, "hl.associative_scan")
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
    params, outs, body = _combine(tracer, combine_fn, xs, single)
    scan = tracer.new("scan", xs, dims, None, None, combine=(params, outs, body), axis=axis,
                      reverse=bool(reverse), partial=ops.whole_dim(d, "hl.associative_scan over"))
    items = tuple(tracer.new("item", [scan], dims, x.dtype, None, index=i)
                  for i, x in enumerate(xs))
    return items[0] if single else items


def reduce(tracer, combine_fn, input, dim=None, other=0, keep_dims=False):
    """hl.reduce: `input` (a tile value or a tuple of them, broadcast to one shape) combined
    along `dim` (every dim when None, last first) by `combine_fn`; padded lanes hold `other`
    (one number, or one per operand) while they take part."""
    single = not isinstance(input, (tuple, list))
    xs = [ops.as_operand(tracer, x) for x in ([input] if single else input)]
    if not xs or any(not isinstance(x, ir.Value) for x in xs):
        raise TraceError("hl.reduce takes a tile value or a tuple of them (not numbers)")
    if single and isinstance(other, (tuple, list)):
        raise TraceError("hl.reduce: `other` is one number for one operand")
    others = list(other) if isinstance(other, (tuple, list)) else [other] * len(xs)
    if len(others) != len(xs):
        raise TraceError(f"hl.reduce: {len(others)} `other` values for {len(xs)} operands")
    xs, dims = _broadcast(tracer, xs, "hl.reduce")
    if dim is None:
        axes = list(reversed(range(len(dims))))
    elif isinstance(dim, int) and -len(dims) <= dim < len(dims):
        axes = [dim % len(dims)]
    else:
        raise TraceError(f"hl.reduce: dim {dim!r} out of range for {len(dims)} dims")
    for axis in axes:
        xs = _reduce_axis(tracer, combine_fn, xs, axis, others, bool(keep_dims), single)
    return xs[0] if single else tuple(xs)


def _reduce_axis(tracer, combine_fn, xs, axis, others, keep, single):
    d = xs[0].dims[axis]
    if getattr(d, "jagged", None) is not None:
        raise TraceError(f"hl.reduce over {d.describe()}, a jagged tile: use a torch "
                         "reduction (sum, amax, ...), which skips each row's lanes past its length")
    others = [o if x.dtype.is_floating_point else int(o) for o, x in zip(others, xs)]
    dims = xs[0].dims[:axis] + ((ir.ONE,) if keep else ()) + xs[0].dims[axis + 1:]
    params, outs, body = _combine(tracer, combine_fn, xs, single)
    node = tracer.new("creduce", xs, dims, None, None, combine=(params, outs, body), axis=axis,
                      keepdim=keep, rdim=d, others=others,
                      partial=ops.whole_dim(d, "hl.reduce over"))
    return [tracer.new("item", [node], dims, x.dtype, None, index=i) for i, x in enumerate(xs)]


def call_combine(combine_fn, left, right, single):
    """combine_fn on one side's operands and the other's: unpacked (`f(a0, a1, b0, b1)`), or
    for several operands as two tuples when it takes two parameters (`f((a0, a1), (b0, b1))`),
    the two forms Helion accepts."""
    if not single and len(left) > 1 and _positional(combine_fn) == 2:
        return combine_fn(tuple(left), tuple(right))
    return combine_fn(*left, *right)


def _positional(fn):
    import inspect
    try:
        ps = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return -1
    if any(p.kind == p.VAR_POSITIONAL for p in ps):
        return -1
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ps)


def _combine(tracer, combine_fn, xs, single):
    """Run combine_fn on scalar params (left operands, then right ones) into a block of its own."""
    saved, body = tracer.current_block, []
    tracer.current_block = body
    try:
        params = [tracer.new("param", [], (), x.dtype, None, name=f"{side}{i}")
                  for side in ("left", "right") for i, x in enumerate(xs)]
        for p in params:
            p.name = p.attrs["name"]
        outs = call_combine(combine_fn, params[:len(xs)], params[len(xs):], single)
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
        new = call_combine(combine_fn, *((tail, head) if reverse else (head, tail)), single)
        new = list(new) if isinstance(new, (tuple, list)) else [new]
        new = [torch.as_tensor(v).to(o.dtype).expand(h.shape) for v, o, h in zip(new, out, head)]
        if reverse:
            out = [torch.cat([v, o.narrow(dim, n - s, s)], dim) for v, o in zip(new, out)]
        else:
            out = [torch.cat([o.narrow(dim, 0, s), v], dim) for v, o in zip(new, out)]
        s *= 2
    return out[0] if single else tuple(out)


def eager_reduce(combine_fn, input, dim=None, other=0, keep_dims=False):
    """hl.reduce in eager torch: halves combined pairwise (a tree, as the kernel's), an odd
    element carried over; an empty dim gives `other`."""
    single = not isinstance(input, (tuple, list))
    out = list(torch.broadcast_tensors(*([input] if single else list(input))))
    others = list(other) if isinstance(other, (tuple, list)) else [other] * len(out)
    for axis in ([dim % out[0].dim()] if dim is not None else reversed(range(out[0].dim()))):
        while out[0].shape[axis] > 1:
            n = out[0].shape[axis]
            h = n // 2
            new = call_combine(combine_fn, [o.narrow(axis, 0, h) for o in out],
                               [o.narrow(axis, h, h) for o in out], single)
            new = list(new) if isinstance(new, (tuple, list)) else [new]
            new = [torch.as_tensor(v).to(o.dtype).expand(o.narrow(axis, 0, h).shape)
                   for v, o in zip(new, out)]
            out = [torch.cat([v, o.narrow(axis, 2 * h, n - 2 * h)], axis)
                   for v, o in zip(new, out)]
        if out[0].shape[axis] == 0:
            shape = list(out[0].shape)
            shape[axis] = 1
            out = [torch.full(shape, v, dtype=o.dtype, device=o.device)
                   for v, o in zip(others, out)]
        if not keep_dims:
            out = [o.squeeze(axis) for o in out]
    return out[0] if single else tuple(out)
