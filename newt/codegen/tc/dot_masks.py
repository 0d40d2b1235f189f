"""One test per 16-byte group for the masks of the dot ring's copies and the dot epilogue's
stores (newt/codegen/tc/dot_ring.py, dot_epilogue.py).

Where it sits: codegen helper. Consumes an index-computable mask block and the coordinates of a
group's elements; produces C conditions whose conjunction is the AND of the mask over the group.

Why: a mask like `offs_k[None, :] < K - k * BK` tested element by element leaves one
loop-invariant left-hand side per element, which NVRTC hoists out of the K loop: 8 registers
per group, which spill next to the accumulators. For an integer compare against a value that is
the same for the whole group, `all(x_j < b)` is `max(x_j) < b`: the maximum is the one hoisted
value per group. `and` splits; shape ops map coordinates; anything else is tested per element.
"""
from __future__ import annotations

from ...ir.core import Op, is_block

_SHAPE = ("broadcast", "reshape", "permute", "convert_layout")
_SYM = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _uniform(v) -> bool:
    """Every element of v has the same value (a scalar, or a splat under shape ops)."""
    if not is_block(v.type):
        return True
    op = v.owner
    if not isinstance(op, Op):
        return False
    if op.opcode == "splat":
        return True
    if op.opcode in _SHAPE:
        return _uniform(op.operands[0])
    return False


def group_mask(em, mask, coords_list) -> list[str]:
    """C conditions, all true iff mask is true at every coordinate tuple in coords_list."""
    from ..shapes import source_coords, value_at   # (shapes imports the passes: import late)
    op = mask.owner
    if isinstance(op, Op) and is_block(mask.type):
        c = op.opcode
        if c in _SHAPE:
            return group_mask(em, op.operands[0], [source_coords(op, cs) for cs in coords_list])
        k = op.attrs.get("op") if c == "binary" else None
        if k == "and":
            return (group_mask(em, op.operands[0], coords_list)
                    + group_mask(em, op.operands[1], coords_list))
        if k in _SYM and len(coords_list) > 1:
            x, y = op.operands
            if x.dtype.is_int() and y.dtype.is_int() and x.dtype == y.dtype:
                if _uniform(y):
                    agg = _extreme(em, [value_at(em, x, cs) for cs in coords_list],
                                   k in ("lt", "le"))
                    return [f"({agg} {_SYM[k]} {value_at(em, y, coords_list[0])})"]
                if _uniform(x):
                    agg = _extreme(em, [value_at(em, y, cs) for cs in coords_list],
                                   k in ("gt", "ge"))
                    return [f"({value_at(em, x, coords_list[0])} {_SYM[k]} {agg})"]
    return [f"({value_at(em, mask, cs)})" for cs in coords_list]


def _extreme(em, xs, largest: bool) -> str:
    """A fresh variable holding the max (largest) or min of the C expressions xs."""
    n = em.fresh("mx" if largest else "mn")
    em.emit(f"auto {n} = {xs[0]};")
    cmp = ">" if largest else "<"
    for x in xs[1:]:
        em.emit(f"{{ const auto t = {x}; {n} = t {cmp} {n} ? t : {n}; }}")
    return n
