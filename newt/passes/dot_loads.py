"""Dot tile loads: a `load` whose only user is a synchronous tensor-core `dot` copies straight
into the dot's shared-memory tile, without registers.

Where it sits: called by the dot-rows pass (dot_rows.py, after the layout pass). Consumes a
dot with a plan on the "mma" engine and no cp.async ring (dot_pipeline.py handles loops whose
accumulator is carried; attention's dots are not); rewrites

    v = load(ptr, mask, other=0)          ->   dot_tile_load(ptr, mask)  {tile=TileRef}
    dot(v, ...) / dot(..., v, ...)              dot(...)                   {a_src/b_src="loaded"}

when the load sits in the dot's block, the dot is its only user, `other` is absent or zero and
the pointer and mask are index-computable (any thread can compute any address, so each 16-byte
chunk of the tile is addressed from index math where it is copied: no pointer arrays).

Orientation of B (16-bit): the tile is MN-major ([K][N], ldmatrix.trans / transposed wgmma B)
unless the pointer block is statically contiguous along K (axis 0) and not along N, as for
attention's K^T loaded through swapped strides; then it is K-major ([N][K], ldmatrix without
.trans / wgmma's default B) so that the copies are 16-byte cp.async along memory (dot attr
"b_kmajor"). `axis_stride` is the static analysis: the element stride of an index-computable
block along one axis when it is a compile-time constant (a stride specialized as 1 is one).
"""
from __future__ import annotations

from ..ir.core import Op, is_block


class TileRef:
    """Which tile of which dot a dot_tile_load fills (shown as `a-tile` / `b-tile`)."""

    def __init__(self, dot, role):
        self.dot, self.role = dot, role

    def __str__(self):
        return f"{self.role}-tile"


def axis_stride(v, axis):
    """The constant element stride of block `v` along `axis`, or None when unknown."""
    if not is_block(v.type):
        return 0
    op = v.owner
    if not isinstance(op, Op):
        return None
    c = op.opcode
    if c in ("splat", "constant"):
        return 0
    if c == "arange":
        return 1
    if c in ("broadcast", "convert_layout"):
        x = op.operands[0]
        if c == "broadcast" and x.shape[axis] == 1 and v.shape[axis] != 1:
            return 0
        return axis_stride(x, axis)
    if c == "reshape":
        x = op.operands[0]
        if v.shape[axis] == 1:
            return 0
        src = [i for i, d in enumerate(x.shape) if d != 1]
        dst = [i for i, d in enumerate(v.shape) if d != 1]
        if [x.shape[i] for i in src] != [v.shape[i] for i in dst]:
            return None
        return axis_stride(x, src[dst.index(axis)])
    if c == "cast" and v.dtype.is_int() and op.operands[0].dtype.is_int():
        return axis_stride(op.operands[0], axis)
    if c == "addptr" or (c == "binary" and op.attrs.get("op") in ("add", "sub")):
        s = [axis_stride(o, axis) for o in op.operands]
        if None in s:
            return None
        return s[0] - s[1] if op.attrs.get("op") == "sub" else s[0] + s[1]
    if c == "binary" and op.attrs.get("op") == "mul":
        s = [axis_stride(o, axis) for o in op.operands]
        if s == [0, 0]:
            return 0
        for k in (0, 1):
            if s[k] is not None and s[1 - k] == 0:
                c1 = _const(op.operands[1 - k])
                if c1 is not None:
                    return s[k] * c1
                if s[k] == 0:
                    return 0
        return None
    return None


def _const(v):
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("splat", "broadcast", "cast", "reshape",
                                               "convert_layout"):
        op = op.operands[0].owner
    if isinstance(op, Op) and op.opcode == "constant" and isinstance(op.attrs.get("value"), int):
        return op.attrs["value"]
    return None


def _zero(v) -> bool:
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("splat", "broadcast", "cast", "convert_layout"):
        op = op.operands[0].owner
    return isinstance(op, Op) and op.opcode == "constant" and op.attrs["value"] == 0


def plan_tile_loads(fn, options):
    uses = fn.uses()
    for dot in list(fn.walk()):
        if dot.opcode != "dot" or dot.attrs.get("ring") is not None:
            continue
        plan = dot.attrs.get("dot_plan")
        if plan is None or plan.engine != "mma":
            continue
        for role, idx in (("a", 0), ("b", 1)):
            if role == "a" and dot.attrs.get("a_src"):
                continue
            v = dot.operands[idx]
            ld = v.owner
            if not (isinstance(ld, Op) and ld.opcode == "load" and ld.parent is dot.parent
                    and [u for u in uses.get(v.id, [])] == [dot] and not ld.attrs.get("volatile")):
                continue
            ptr = ld.operands[0]
            mask = ld.operands[1] if ld.attrs.get("has_mask") else None
            if ld.attrs.get("has_other") and not _zero(ld.operands[-1]):
                continue
            if not ptr.attrs.get("icomp") or (mask is not None and not mask.attrs.get("icomp")):
                continue
            if idx == 0 and (dot.operands[0] is dot.operands[1]):
                continue
            ld.opcode = "dot_tile_load"
            ld.attrs["tile"] = TileRef(dot, role)
            dot.attrs[f"{role}_src"] = "loaded"
            if role == "b" and plan.esize == 2 and axis_stride(ptr, 0) == 1 \
                    and axis_stride(ptr, 1) != 1:
                dot.attrs["b_kmajor"] = True
    return fn


# ----------------------------------------------------------------------------- prefetch

def _inside(op, block) -> bool:
    b = op.parent
    while b is not None:
        if b is block:
            return True
        p = b.parent
        b = p.parent if isinstance(p, Op) else None
    return False


def _leaves_outside(v, body, iv, seen=None) -> bool:
    """Every scalar the index math of `v` reads is the loop's induction variable or defined
    outside the loop body (so the copy can be issued for another iteration, anywhere)."""
    seen = set() if seen is None else seen
    if v.id in seen:
        return True
    seen.add(v.id)
    if v is iv:
        return True
    op = v.owner
    if not isinstance(op, Op):
        return not is_block(v.type) and not any(v is a for a in body.args)
    if not is_block(v.type):
        return not _inside(op, body)
    return all(_leaves_outside(o, body, iv, seen) for o in op.operands)


def plan_prefetch(fn):
    """Two tile loads in a loop body feeding two dots in turn (attention's K then V): both
    tiles of iteration i+1 are copied while the second dot of iteration i runs, the second
    one into the other half of a double buffer (the second dot of iteration i still reads its
    own half):

        before the loop   dot_tile_prefetch: barrier; copy both tiles of the first iteration;
                          commit
        loads             (nothing: copied by the previous iteration or the prologue)
        first dot         wait_group 0 (both tiles landed); barrier; mma
        second dot        barrier (every warp is past the first dot, and past the previous
                          iteration's second dot, which read the other half); copy both tiles
                          of the next iteration (if any); commit; mma on this iteration's half

    Each tile has a whole iteration to arrive, and an iteration has two barriers.
    attrs: loads "prefetch" = "next"; first dot "cp_wait" = 0; second dot "prefetch_next" = the
    two loads, "double_b" (its B tile is two tiles, by iteration parity); dots "live" = the
    prefetch op to the loop (their tiles are in use across the whole loop)."""
    for loop in [op for op in fn.walk() if op.opcode == "for"]:
        body = loop.regions[0]
        iv = body.args[0]
        loads = [op for op in body.ops if op.opcode == "dot_tile_load"]
        if len(loads) != 2:
            continue
        dots = [ld.attrs["tile"].dot for ld in loads]
        if dots[0] is dots[1] or any(d.parent is not body for d in dots):
            continue
        if loads[1].attrs["tile"].role != "b":
            continue
        idx = body.ops.index
        if not idx(loads[0]) < idx(dots[0]) < idx(loads[1]) < idx(dots[1]):
            continue
        addr = [ld.operands[0] for ld in loads] + \
            [ld.operands[1] for ld in loads if ld.attrs.get("has_mask")]
        if not all(_leaves_outside(v, body, iv) for v in addr):
            continue
        pre = Op("dot_tile_prefetch", [], [], {"loads": _Ref(loads), "loop": _Ref(loop)},
                 (), loop.loc)
        pre.parent = loop.parent
        loop.parent.ops.insert(loop.parent.ops.index(loop), pre)
        for ld in loads:
            ld.attrs["prefetch"] = "next"
        dots[0].attrs["cp_wait"] = 0
        dots[1].attrs["cp_wait"] = 0       # nothing is in flight by then: a no-op wait
        dots[1].attrs["prefetch_next"] = _Ref(loads)
        dots[1].attrs["double_b"] = True
        for d in dots:
            d.attrs["live"] = _Ref((pre, loop))


class _Ref:
    """An IR reference kept in attrs without printing the referenced op."""

    def __init__(self, x):
        self.x = x

    def __str__(self):
        return "ref"
