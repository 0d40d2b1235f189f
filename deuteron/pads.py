"""Padding facts: what a traced value holds in its padded lanes (`Value.pad`), and so where a
reduction or a dot must mask.

A tile's lanes past the extent (offs >= N) exist in the kernel but not in the oracle. Loads read
0 there; every op folds its operands' pad constants (an operand broadcast along a padded dim
brings real, unknown values, so the result's pad is then unknown). A reduction over a padded dim
masks to its identity unless the pad already is that identity (-inf for max, +inf for min, 0
for sum/mean); a dot masks an operand whose padded k lanes could be non-zero or non-finite.
Loop-carried values whose pad changes from one iteration to the next are made unknown and the
loop body is recomputed (`settle_loop`).
"""
from __future__ import annotations

import math

import torch

from . import ir
from .ir import ONE


def _pad(x):
    return x.pad if isinstance(x, ir.Value) else x


def fold(fn, *xs, dims=None):
    """fn applied to the operands' pads, or None when any is unknown."""
    if dims is not None:
        full = {id(d) for d in dims if d is not ONE}
        for x in xs:
            if isinstance(x, ir.Value) and {id(d) for d in x.dims if d is not ONE} != full:
                return None
    pads = [_pad(x) for x in xs]
    if any(p is None for p in pads):
        return None
    try:
        with torch._C.DisableTorchFunction():
            ts = [torch.tensor(p, dtype=torch.float64) if isinstance(p, float) else torch.tensor(p)
                  for p in pads]
            return fn(*ts).item()
    except Exception:
        return None


def recompute(v):
    """Set v.pad (and the masking decisions of reductions and dots) from its operands."""
    from .ops import BINARY, UNARY
    op, a = v.op, v.args
    if v.attrs.get("pad_unknown"):
        v.pad = None
    elif op == "load":
        v.pad = 0
    elif op == "full":
        v.pad = v.attrs["value"]
    elif op == "unary":
        v.pad = fold(UNARY[v.attrs["fn"]], a[0])
    elif op == "binary":
        v.pad = fold(BINARY[v.attrs["fn"]], *a, dims=v.dims)
    elif op == "where":
        v.pad = fold(torch.where, *a, dims=v.dims)
    elif op == "cast":
        p = a[0].pad
        if p is not None:
            p = float(p) if v.dtype.is_floating_point else (int(p) if math.isfinite(p) else None)
        v.pad = p
    elif op == "phi":
        v.pad = a[0].pad if a[0].pad == a[1].pad else None
    elif op in ("view", "trans", "permute", "reshape"):
        v.pad = a[0].pad
    elif op == "reduce":
        x, kind = a[0], v.attrs["kind"]
        v.attrs["masked"] = v.attrs["rdim"] is not ONE and x.pad != v.attrs["identity"]
        v.pad = x.pad if kind in ("max", "min") else (0 if x.pad == 0 else None)
    elif op == "creduce":      # hl.reduce: padded lanes must hold `other` while they combine
        v.attrs["masked"] = v.attrs["rdim"] is not ONE and any(
            x.pad is None or x.pad != o for x, o in zip(a, v.attrs["others"]))
        v.pad = None
    elif op == "dot":
        x, y = a

        def unsafe(p, q):   # padded k lanes: 0 on both sides, or 0 times a finite number
            return not (p.pad == 0 or (q.pad == 0 and p.pad is not None and math.isfinite(p.pad)))
        v.attrs["mask_a"], v.attrs["mask_b"] = unsafe(x, y), unsafe(y, x)
        v.pad = 0 if x.pad == 0 and y.pad == 0 else None
    else:
        v.pad = None


def all_values(items):
    for it in items:
        if isinstance(it, ir.Loop):
            yield from all_values(it.items)
        elif isinstance(it, ir.If):
            yield from all_values(it.then)
            yield from all_values(it.other)
        else:
            yield it


def settle_loop(loop):
    """Make loop-carried pads consistent across iterations (conservatively: unknown)."""
    for _ in range(8):
        changed = False
        for c in loop.carried:
            if c.init.pad != c.final.pad and not c.init.attrs.get("pad_unknown"):
                c.init.attrs["pad_unknown"] = True
                c.init.pad = None
                changed = True
        if not changed:
            return
        for v in all_values(loop.items):
            recompute(v)
