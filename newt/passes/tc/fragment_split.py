"""Frag split pass: an epilogue that splits the accumulator into its left and right column
halves takes each half straight from the fragment.

Where it sits: after the layout and movement passes (which gave the accumulator its way out,
`dot_acc_out`, and planned the split's permute through shared memory) and before frag_cast
(fragment_epilogue.py), which then keeps each half's cast in the fragment too, so that
store_tma.py can store each half by TMA boxes from the 16-bit fragment. The form, as the
persistent-matmul programs write it (`nl.split` lowers to a gather of index 0 and 1 on the
last axis and a reshape):

    left, right = split(permute(reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))

is columns [0, BN/2) and [BN/2, BN) of acc. Each half becomes `dot_acc_cols` (no code: a
slice of the fragment's registers, AccColumns in newt/ir/schedule.py, held in AccLayout(BM,
BN/2)) and a `dot_acc_out` of its own, in place of the half's reshape.

What goes away: the whole fp32 tile staged to leave the fragment (BM x (BN + 8) x 4 bytes), the
permute's move through shared memory (BM x BN x 4 more) and the gathers' reads. At 128 x 256
those alone needed 261 KB, over the 227 KB of an sm_90a block.

Facts: the new ops' attrs["cols"] (an AccColumns, printed). A split the pass does not take
keeps the staged path (the IR shows the permute and gathers).
"""
from __future__ import annotations

from ...ir.core import Op
from ...ir.layouts import AccLayout
from ...ir.schedule import AccColumns


def _only_use(uses, v, opcode, block):
    us = uses.get(v.id, [])
    if len(us) == 1 and us[0].opcode == opcode and us[0].parent is block:
        return us[0]
    return None


def _const_index(v):
    """The integer every element of `v` holds (a splat of a constant), else None."""
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("broadcast", "splat", "reshape"):
        v = op.operands[0]
        op = v.owner
    if isinstance(op, Op) and op.opcode == "constant" and isinstance(op.attrs.get("value"), int):
        return op.attrs["value"]
    return None


def _halves(out, uses):
    """[(column half index, its final reshape)] of a split of `out`'s result in halves, plus
    the ops to drop; None when `out` is not split that way."""
    x = out.operands[0]
    lay = x.attrs.get("layout")
    block = out.parent
    # (a fragment split in column groups already gives each warp one slice: not taken)
    if type(lay) is not AccLayout or tuple(x.shape) != (lay.M, lay.N) or lay.N % 32 \
            or lay.C > 1:
        return None
    M, N = lay.M, lay.N
    r = _only_use(uses, out.result, "reshape", block)
    if r is None or tuple(r.result.shape) != (M, 2, N // 2):
        return None
    p = _only_use(uses, r.result, "permute", block)
    if p is None or tuple(p.attrs.get("order", ())) != (0, 2, 1):
        return None
    got, drop = [], [out, r, p]
    for g in uses.get(p.result.id, []):
        if g.opcode != "gather" or g.parent is not block or g.attrs.get("axis") != 2 \
                or g.operands[0] is not p.result:
            return None
        h = _const_index(g.operands[1])
        back = _only_use(uses, g.result, "reshape", block)
        if h not in (0, 1) or back is None or tuple(back.result.shape) != (M, N // 2):
            return None
        got.append((h, back))
        drop.append(g)
    return (got, drop) if got else None


def split_in_fragment(fn, options=None):
    uses = fn.uses()
    for out in [op for op in fn.walk() if op.opcode == "dot_acc_out"]:
        found = _halves(out, uses)
        if found is None:
            continue
        halves, drop = found
        x = out.operands[0]
        lay = x.attrs["layout"]
        block = out.parent
        at = block.ops.index(out)
        for h, back in halves:
            cols = AccColumns(h * lay.N // 2, lay.N // 2, lay.N)
            part = Op("dot_acc_cols", [x], [back.result.type], {"cols": cols}, loc=back.loc)
            part.result.attrs["layout"] = AccLayout(lay.M, cols.width, lay.num_threads)
            part.result.name = back.result.name
            part.parent = block
            block.ops.insert(at, part)          # register renaming: next to the loop's end
            at += 1
            leave = Op("dot_acc_out", [part.result], [back.result.type],
                       dict(out.attrs, cols=cols), loc=back.loc)
            leave.result.attrs = dict(back.result.attrs)
            leave.result.name = back.result.name
            leave.parent = block
            block.ops[block.ops.index(back)] = leave
            for u in uses.get(back.result.id, []):
                u.operands = [leave.result if o is back.result else o for o in u.operands]
        for op in drop:
            block.ops.remove(op)
        uses = fn.uses()
    return fn
