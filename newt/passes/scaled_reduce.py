"""Scaled-reduction pass: the max (min) of a block scaled by a positive constant is the max
(min) of the block, scaled.

Where it sits: after the mask pass, before the dot passes, on float blocks only. It rewrites
`max(x * c, axis)` into `max(x, axis) * c` for a constant c > 0 (finite), the same for min.

Why: softmax and attention written the direct way, `s = q @ k.T * scale; m = max(s)` (as
deuteron traces it from PyTorch), multiply every score by the scale before the max. With the max
taken first, one multiply per row replaces one per score, the row max reads the dot's result
where the dot left it (passes/tc/dot_rows.py), and the remaining use of `s`, `exp2(s - m)`, fuses
the multiply into one FFMA. Triton's tutorial does this by hand (`max(qk) * qk_scale`).

Exact: x -> fl(x * c) is monotonic for c > 0, so every comparison the reduction makes picks the
same element or two elements whose scaled values are equal, and the result is the same number
(NaN and infinities included); at most the sign of a zero result may differ where the maximum is
a tie between +0 and -0.
"""
from __future__ import annotations

import math

from ..ir.core import BlockType, Op, ScalarType
from .masks import remove_dead


def scale_reductions(fn, options=None):
    changed = False
    for op in list(fn.walk()):
        if op.opcode != "reduce" or op.attrs["kind"] not in ("max", "min"):
            continue
        x = op.operands[0]
        if not x.dtype.is_floating() or not isinstance(x.owner, Op):
            continue
        mul = x.owner
        if mul.opcode != "binary" or mul.attrs["op"] != "mul":
            continue
        for i in (0, 1):
            c = _positive_constant(mul.operands[1 - i])
            if c is not None:
                _rewrite(fn, op, mul.operands[i], c)
                changed = True
                break
    if changed:
        remove_dead(fn)      # the multiply, when the reduction was its only reader
    return fn


def _positive_constant(v):
    """The scalar `constant` value a block of one value is splat / broadcast from, if it is a
    finite positive number; else None."""
    while isinstance(v.owner, Op) and v.owner.opcode in ("splat", "broadcast"):
        v = v.owner.operands[0]
    if not isinstance(v.owner, Op) or v.owner.opcode != "constant" or v.shape:
        return None
    val = v.owner.attrs["value"]
    return v if isinstance(val, float) and math.isfinite(val) and val > 0 else None


def _rewrite(fn, red: Op, x, c):
    """red = reduce(x * c) -> reduce(x) * c, inserted where red was; red's readers read the
    product (the old multiply stays while something else reads it)."""
    block = red.parent
    k = block.ops.index(red)
    new = Op("reduce", [x], [red.result.type], dict(red.attrs), (), red.loc)
    ops = [new]
    scale = c
    if isinstance(red.result.type, BlockType):
        sp = Op("splat", [c], [BlockType(c.dtype, red.result.shape)], {}, (), red.loc)
        ops.append(sp)
        scale = sp.result
    else:
        assert isinstance(red.result.type, ScalarType)
    prod = Op("binary", [new.result, scale], [red.result.type], {"op": "mul"}, (), red.loc)
    ops.append(prod)
    prod.result.name = red.result.name
    for j, o in enumerate(ops):
        o.parent = block
        block.ops.insert(k + j, o)
    block.ops.remove(red)
    old = red.result
    for op in fn.walk():
        op.operands = [prod.result if o is old else o for o in op.operands]
