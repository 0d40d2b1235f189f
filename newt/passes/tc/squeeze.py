"""Unit dims squeezed out of a dot loop: a batched tile of one batch element brought to the 2-D
form the ring planner reads.

Where it sits: the `squeeze_dots` entry of PASSES (newt/passes/__init__.py), first of the
tensor-core passes, before `fuse_acc` (tc/canonical.py). It rewrites IR; the decisions that
follow (ring, TMA, persistence) are then those of the 2-D spelling.

The form: a tile program over [batch, M, N] with a batch block of 1 (what deuteron emits for
Helion's `torch.bmm` / `torch.baddbmm` on 3-D tiles, and what a Triton user writes with a
`[1, BM, BK]` load) reads its operands as 3-D blocks with a leading unit dim, reshapes them to
2-D for `nl.dot`, and adds the dot, reshaped back, to a 3-D accumulator:

    a = nl.load(pa)                         # [1, BM, BK]
    acc = acc + nl.reshape(nl.dot(nl.reshape(a, (BM, BK)), ...), (1, BM, BN))

Neither is a dot of loads with a carried accumulator, so no ring could take it (each step's
product went through shared memory to reach the 3-D layout: 10x slower than the 2-D loop).

1. An operand `reshape(load(p, mask, other))` whose reshape only drops unit dims becomes a load
   of the squeezed pointer block: the pointer, mask and other index math is rebuilt without the
   unit dims (`x[:, None, None]` of the batch offset becomes `x[:, None]`'s scalar splat), so
   the pointer analyses see the 2-D form a user would write.
2. A carried accumulator whose only update is `acc + reshape(dot)` (the reshape only adding
   unit dims) is carried as the dot's 2-D block: squeezed before the loop, reshaped back after
   it. fuse_acc then makes the update `dot(a, b, acc)`.
"""
from __future__ import annotations

from ...ir.builder import type_like
from ...ir.core import Op, is_block
from ...ir.index_forms import index_constant, op_of
from ..masks import remove_dead

_ELEMENTWISE = ("binary", "addptr", "cast")


def _dropped(big, small):
    """Axes of shape `big` that are unit dims absent from `small` (None when `small` is not
    `big` without some of its unit dims)."""
    drop, j = [], 0
    for i, s in enumerate(big):
        if j < len(small) and small[j] == s:
            j += 1
        elif s == 1:
            drop.append(i)
        else:
            return None
    return tuple(drop) if j == len(small) else None


def _without(shape, drop):
    return tuple(s for i, s in enumerate(shape) if i not in drop)


class _Squeezer:
    """Rebuilds index math without some unit dims, in front of an anchor op."""

    def __init__(self, block, anchor):
        self.block, self.anchor, self.memo = block, anchor, {}

    def emit(self, opcode, operands, rtype, attrs, loc):
        op = Op(opcode, operands, [rtype], dict(attrs), (), loc)
        op.parent = self.block
        self.block.ops.insert(self.block.ops.index(self.anchor), op)
        return op.result

    def squeeze(self, v, drop):
        """v (a block) with the unit axes `drop` removed; scalars are left as they are."""
        if not is_block(v.type):
            return v
        key = (v.id, drop)
        if key in self.memo:
            return self.memo[key]
        shape = _without(v.shape, drop)
        op, out = v.owner, None
        one = self.scalar(v) if all(n == 1 for n in shape) else None
        if one is not None:                           # one element: a splat of scalar math
            out = self.emit("splat", [one], type_like(v.type, shape=shape), {}, self.anchor.loc)
        elif isinstance(op, Op) and not op.regions:
            k = op.opcode
            if k in _ELEMENTWISE or (k == "broadcast" and is_block(op.operands[0].type)
                                     and len(op.operands[0].shape) == len(v.shape)):
                ins = [self.squeeze(o, drop) for o in op.operands]
                out = self.emit(k, ins, type_like(v.type, shape=shape), op.attrs, op.loc)
            elif k == "splat":
                out = self.emit(k, op.operands, type_like(v.type, shape=shape), op.attrs, op.loc)
            elif k == "reshape":                      # the expand_dims that added unit dims
                x = op.operands[0]
                out = x if x.shape == shape else self.emit(k, [x], type_like(v.type, shape=shape),
                                                           op.attrs, op.loc)
        if out is None:                               # anything else: one reshape of its value
            out = self.emit("reshape", [v], type_like(v.type, shape=shape), {}, v.owner.loc
                            if isinstance(v.owner, Op) else self.anchor.loc)
        if out.owner is not v.owner and not out.name:
            out.name = v.name
        self.memo[key] = out
        return out


    def scalar(self, v):
        """The scalar of a one-element block's index math (a batch offset: `pid * 1 +
        arange(0, 1)` is `pid`), so the pointer analyses see `P + pid * stride` as the scalar
        base a 2-D kernel adds; None when it is not index math."""
        if not is_block(v.type):
            return v
        key = ("scalar", v.id)
        if key in self.memo:
            return self.memo[key]
        op, out = v.owner, None
        if isinstance(op, Op) and not op.regions:
            k, st = op.opcode, type_like(v.type, shape=())
            if k == "splat":
                out = op.operands[0]
            elif k in ("broadcast", "reshape", "convert_layout"):
                out = self.scalar(op.operands[0])
            elif k == "arange":
                out = self.emit("constant", [], st, {"value": op.attrs["start"]}, op.loc)
            elif k in _ELEMENTWISE:
                ins = [self.scalar(o) for o in op.operands]
                if None not in ins:
                    out = _plus_zero(k, op, ins, st) or self.emit(k, ins, st, op.attrs, op.loc)
        self.memo[key] = out
        return out


def _plus_zero(k, op, ins, st):
    """x of `x + 0` (`start + arange(0, 1)`: the start itself), else None."""
    if k == "addptr" or (k == "binary" and op.attrs.get("op") == "add"):
        pairs = [ins] if k == "addptr" else [ins, ins[::-1]]
        for x, y in pairs:
            if index_constant(y) == 0 and x.type == st:
                return x
    return None


def _replace_uses(block, old, new):
    for op in block.walk():
        op.operands = [new if o is old else o for o in op.operands]


def _squeeze_operand(body, dot, i, uses):
    r = op_of(dot.operands[i], "reshape")
    ld = op_of(r.operands[0], "load") if r is not None else None
    if ld is None or ld.parent is not body or r.parent is not body:
        return False
    drop = _dropped(ld.result.shape, r.result.shape)
    if not drop or any(u is not r for u in uses.get(ld.result.id, [])):
        return False
    sq = _Squeezer(body, ld)
    ins = [sq.squeeze(o, drop) for o in ld.operands]
    new = sq.emit("load", ins, r.result.type, ld.attrs, ld.loc)
    new.name = ld.result.name
    _replace_uses(body, r.result, new)
    body.ops.remove(r)          # (remove_dead keeps loads: a load may fault)
    body.ops.remove(ld)
    return True


def _squeeze_acc(loop, dot, uses):
    """2.: the carried 3-D accumulator of `acc + reshape(dot)` carried as the 2-D dot block."""
    body = loop.regions[0]
    r_uses = uses.get(dot.result.id, [])
    if len(r_uses) != 1 or r_uses[0].opcode != "reshape":
        return False
    r = r_uses[0]
    adds = uses.get(r.result.id, [])
    if len(adds) != 1 or adds[0].opcode != "binary" or adds[0].attrs.get("op") != "add":
        return False
    add = adds[0]
    acc = add.operands[0] if add.operands[1] is r.result else add.operands[1]
    carried = body.args[1:]
    yld = body.ops[-1]
    drop = _dropped(acc.shape, dot.result.shape) if is_block(acc.type) else None
    if (not drop or not any(acc is c for c in carried) or acc.type != r.result.type
            or uses.get(acc.id, []) != [add] or uses.get(add.result.id, []) != [yld]
            or yld.operands.count(add.result) != 1):
        return False
    pos = yld.operands.index(add.result)
    if body.args.index(acc) - 1 != pos:
        return False
    flat = dot.result.type
    outer = loop.parent
    init = _Squeezer(outer, loop).squeeze(loop.operands[3 + pos], drop)
    loop.operands[3 + pos] = init
    acc.type = flat
    new = Op("binary", [acc, dot.result], [flat], dict(add.attrs), (), add.loc)
    new.parent = body
    new.result.name = add.result.name
    body.ops.insert(body.ops.index(add), new)
    yld.operands[pos] = new.result
    res = loop.results[pos]
    back = Op("reshape", [res], [res.type], {}, (), loop.loc)
    back.parent = outer
    back.result.name = res.name
    res.type = flat
    outer.ops.insert(outer.ops.index(loop) + 1, back)
    for op in outer.walk():
        if op is not back:
            op.operands = [back.result if o is res else o for o in op.operands]
    return True


def squeeze_dots(fn, options):
    """Unit dims of a dot loop's operand loads and accumulator squeezed out (module doc)."""
    for loop in [op for op in fn.walk() if op.opcode == "for"]:
        body = loop.regions[0]
        changed = False
        for dot in [o for o in body.ops if o.opcode == "dot"]:
            for i in (0, 1):
                changed |= _squeeze_operand(body, dot, i, body.uses())
            changed |= _squeeze_acc(loop, dot, body.uses())
        if changed:
            remove_dead(body)
    return fn
