"""Transposed dot operands: `nl.dot(a, nl.trans(nl.load(p)))` loads the transposed block instead.

Where it sits: the `trans_loads` entry of PASSES (newt/passes/__init__.py), after loop-carried
pointer blocks were rewritten as `I + splat(offset)` and before fp8 dots and rings are planned.
Consumes a `permute` (order (1, 0)) whose operand is a 2-D `load` and whose result is a `dot`
operand read by nothing else; rewrites

    v = load(p, mask, other)              ->   w = load(T(p), T(mask), T(other))
    t = permute(v) {order=(1, 0)}              dot(..., w, ...)
    dot(..., t, ...)

where T(x) is x transposed, built by moving the transpose down the index math that made x:
through elementwise ops, `addptr`, `broadcast`, `splat` and the `reshape` of a 1-D index into a
row or a column (`x[:, None]` becomes `x[None, :]`), and a permute of a permute cancels. What it
cannot go through keeps a `permute`. Both sides compute the same value: the element (i, j) of
the new load reads the address, mask and other of element (j, i) of the old one.

A load that other ops read too stays, and the transposed load is added beside it: the same
addresses read twice at one point of the program (the second read hits the cache), instead of a
register transpose through shared memory. Attention's backward reads each Q and dO tile as one
dot's operand and, transposed, another's (dot(k, q_t) and dot(ds_t, trans(q_t))). A volatile
load is not read twice.

Why: a dot operand that is a load is what the ring (dot_pipeline.py), the tile copies
(dot_loads.py), TMA (dot_tma.py) and 8-bit wgmma (dot_fp8.py) work from; behind a permute it is
a register value, staged through shared memory by a synchronous copy every iteration. The
tutorial's `x @ W.T` written as `nl.dot(x, nl.trans(w))` over `w` tiles of a row-major W [N, K]
becomes B contiguous along K: the K-major tile and transposed TMA boxes that the same product
written with swapped strides gets.
"""
from __future__ import annotations

from ...ir.core import BlockType, Op, is_block
from .dot_loads import IrRef

_ELEMENTWISE = ("binary", "unary", "select", "fma", "addptr", "cast")


def _is_transpose(op) -> bool:
    return op.opcode == "permute" and tuple(op.attrs.get("order", ())) == (1, 0)


class _Transposer:
    """T(v) for 2-D values, memoized; new ops go right after the op defining v (or first in
    the block whose argument v is), so each is defined before its uses."""

    def __init__(self, fn):
        self.done: dict[int, object] = {}
        self.arg_block = {a.id: r for op in fn.walk() for r in op.regions for a in r.args}

    def __call__(self, v):
        if not is_block(v.type):
            return v
        got = self.done.get(v.id)
        if got is None:
            got = self.done[v.id] = self._make(v)
        return got

    def _make(self, v):
        op = v.owner
        shape = (v.shape[1], v.shape[0])
        t = BlockType(v.dtype, shape)
        if not isinstance(op, Op):                       # a block argument (a carried value)
            return self._new(v, "permute", [v], t, {"order": (1, 0)})
        c = op.opcode
        if _is_transpose(op):
            return op.operands[0]
        if c == "splat":
            return self._new(v, "splat", list(op.operands), t)
        if c == "broadcast":
            return self._new(v, "broadcast", [self(op.operands[0])], t)
        if c == "reshape" and len(op.operands[0].shape) == 1 and 1 in v.shape:
            return self._new(v, "reshape", list(op.operands), t)
        if c in _ELEMENTWISE and all(o.shape == v.shape or not is_block(o.type)
                                     for o in op.operands):
            return self._new(v, c, [self(o) for o in op.operands], t, dict(op.attrs))
        return self._new(v, "permute", [v], t, {"order": (1, 0)})

    def _new(self, v, opcode, operands, rtype, attrs=None):
        op = v.owner
        new = Op(opcode, operands, [rtype], attrs or {}, (), getattr(op, "loc", None))
        if isinstance(op, Op):
            blk = op.parent
            blk.ops.insert(blk.ops.index(op) + 1, new)
        else:
            blk = self.arg_block[v.id]
            blk.ops.insert(0, new)
        new.parent = blk
        return new.result


def load_transposed_operands(fn, options=None):
    """Rewrite every `dot(.., permute(load))` operand as a transposed load (see the module)."""
    uses = fn.body.uses()
    T = _Transposer(fn)
    for dot in [o for o in fn.walk() if o.opcode == "dot"]:
        for i in (0, 1):
            tr = dot.operands[i].owner
            if not (isinstance(tr, Op) and _is_transpose(tr)
                    and uses.get(tr.result.id, []) == [dot]):
                continue
            ld = tr.operands[0].owner
            if not (isinstance(ld, Op) and ld.opcode == "load" and len(ld.result.shape) == 2):
                continue
            shared = uses.get(ld.result.id, []) != [tr]
            if shared and ld.attrs.get("volatile"):
                continue
            new = Op("load", [T(o) for o in ld.operands], [tr.result.type], dict(ld.attrs),
                     (), ld.loc)
            blk = ld.parent
            new.parent = blk
            blk.ops.insert(blk.ops.index(ld), new)
            if not shared:
                blk.ops.remove(ld)
            else:       # (a walk ring may copy the block once for both: walk_ring.py)
                new.attrs["transposed_from"] = IrRef(ld)
            tr.parent.ops.remove(tr)
            dot.operands[i] = new.result
            new.result.name = tr.result.name
    return fn
