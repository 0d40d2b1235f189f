"""The interpreter's nl.reduce / nl.associative_scan with a combine function and nl.cumprod
(newt/language/scans.py): sequential, the combine function (the kernel's twin of the user's
@jit function) called on whole slices. ops.py re-exports them into the namespace kernels see."""
from __future__ import annotations

import builtins

import torch

from .. import dtypes as D
from .ops import constexpr_int as _constexpr_int
from .values import Tensor, cast, to_tensor, unwrap


# ----------------------------------------------------------------------------- combine functions

def _operands(input):
    xs = unwrap(input)
    single = not isinstance(xs, (tuple, list))
    xs = [to_tensor(x) for x in ([xs] if single else xs)]
    return xs, single


def _combine(fn, left, right, dtypes):
    r = fn(*left, *right)
    r = list(r) if isinstance(r, (tuple, list)) else [r]
    if len(r) != len(dtypes):
        raise TypeError(f"combine_fn returned {len(r)} value(s) for {len(dtypes)} operand(s)")
    return [cast(to_tensor(v), dt) for v, dt in zip(r, dtypes)]


def associative_scan(input, axis, combine_fn, reverse=False):
    """A sequential scan along `axis`: acc = combine(acc, x[i]) over whole slices (from the end
    with `reverse`, the accumulated part then the left argument, as in Triton)."""
    xs, single = _operands(input)
    dts = [x.dtype for x in xs]
    if xs[0].data.dim() == 0:
        return xs[0] if single else tuple(xs)
    ax = _constexpr_int(axis, "axis") % xs[0].data.dim()
    n = xs[0].shape[ax]
    order = builtins.range(n - 1, -1, -1) if unwrap(reverse) else builtins.range(n)
    outs, acc = {}, None
    for i in order:
        cur = [Tensor(x.data.select(ax, i), x.dtype) for x in xs]
        acc = cur if acc is None else _combine(combine_fn, acc, cur, dts)
        outs[i] = acc
    res = [Tensor(torch.stack([outs[i][k].data.expand(xs[0].data.select(ax, 0).shape)
                               for i in builtins.range(n)], ax), dts[k])
           for k in builtins.range(len(xs))]
    return res[0] if single else tuple(res)


def reduce(input, axis, combine_fn, keep_dims=False):
    xs, single = _operands(input)
    dts = [x.dtype for x in xs]
    if unwrap(axis) is None:
        xs = [Tensor(x.data.reshape(-1), x.dtype) for x in xs]
        ax = 0
    elif xs[0].data.dim() == 0:
        return xs[0] if single else tuple(xs)
    else:
        ax = _constexpr_int(axis, "axis") % xs[0].data.dim()
    n = xs[0].shape[ax]
    acc = [Tensor(x.data.select(ax, 0), x.dtype) for x in xs]
    for i in builtins.range(1, n):
        acc = _combine(combine_fn, acc, [Tensor(x.data.select(ax, i), x.dtype) for x in xs], dts)
    shape = list(xs[0].data.select(ax, 0).shape)
    res = [Tensor(a.data.expand(shape).clone(), dt) for a, dt in zip(acc, dts)]
    if unwrap(keep_dims):
        rank = to_tensor(unwrap(input)[0] if not single else unwrap(input)).data.dim()
        res = [Tensor(r.data.reshape((1,) * rank) if unwrap(axis) is None
                      else r.data.unsqueeze(ax), r.dtype) for r in res]
    return res[0] if single else tuple(res)


def cumprod(input, axis=0, reverse=False):
    x = to_tensor(input)
    if x.dtype is D.bfloat16:        # as Triton: bf16 is promoted to fp32
        x = cast(x, D.float32)
    return associative_scan(x, axis, lambda a, b: a * b, reverse)


def xor_sum(input, axis=None, keep_dims=False):
    x = to_tensor(input)
    if not x.dtype.is_int() or x.dtype.is_bool():
        raise TypeError(f"xor_sum needs integers, got {x.dtype.name}")
    return reduce(x, axis, lambda a, b: a ^ b, keep_dims)


def reduce_or(input, axis, keep_dims=False):
    x = to_tensor(input)     # integers or bools (the frontend checked)
    return reduce(x, axis, lambda a, b: a | b, keep_dims)


def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    from . import ops
    x = to_tensor(x)
    d = 0 if unwrap(dim) is None else dim
    z = x - ops.max(x, d, keep_dims=True)
    num = ops.MATH_FNS["exp"](z)
    den = ops.sum(num, d, keep_dims=True)
    return ops.div_rn(num, den) if unwrap(ieee_rounding) else num / den


def map_elementwise(scalar_fn, *args, pack=1):
    """scalar_fn called once per element (its control flow is per element), on 0-d values."""
    import itertools
    ts = [to_tensor(a) for a in args]
    data = torch.broadcast_tensors(*[t.data for t in ts])
    shape = tuple(data[0].shape)
    outs = None
    for idx in itertools.product(*(builtins.range(n) for n in shape)):
        r = scalar_fn(*[Tensor(d[idx], t.dtype) for d, t in zip(data, ts)])
        r = [to_tensor(v) for v in (r if isinstance(r, (tuple, list)) else [r])]
        if outs is None:
            outs = [([], v.dtype) for v in r]
        for (vals, dt), v in zip(outs, r):
            vals.append(cast(v, dt).data)
    res = [Tensor(torch.stack(vals).reshape(shape), dt) for vals, dt in outs]
    return res[0] if len(res) == 1 else tuple(res)
