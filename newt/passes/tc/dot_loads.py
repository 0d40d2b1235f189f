"""Dot tile loads: a `load` whose only user is a synchronous tensor-core `dot` copies straight
into the dot's shared-memory tile, without registers.

Where it sits: the `tile_loads` and `prefetch` entries of PASSES, after dot_rows. Consumes a
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

from ...ir.core import Op, is_block
from ...ir.pointers import b_tile_kmajor, int_constant
from ...ir.schedule import TileRef


def is_zero(v) -> bool:
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
            if ld.attrs.get("has_other") and not is_zero(ld.operands[-1]):
                continue
            if not ptr.attrs.get("icomp") or (mask is not None and not mask.attrs.get("icomp")):
                continue
            if idx == 0 and (dot.operands[0] is dot.operands[1]):
                continue
            ld.opcode = "dot_tile_load"
            ld.attrs["tile"] = TileRef(dot, role)
            dot.attrs[f"{role}_src"] = "loaded"
            if role == "b" and b_tile_kmajor(plan.esize, ptr):
                dot.attrs["b_kmajor"] = True
    return fn


# ----------------------------------------------------------------------------- prefetch

def op_inside(op, block) -> bool:
    b = op.parent
    while b is not None:
        if b is block:
            return True
        p = b.parent
        b = p.parent if isinstance(p, Op) else None
    return False


def leaves_outside(v, body, iv, seen=None, hoist=None) -> bool:
    """Every scalar the index math of `v` reads is the loop's induction variable, defined
    outside the loop body, or computed in the body from such scalars only (`base + pid *
    stride` written inside the loop, as deuteron does): those ops are collected in `hoist`, to
    be moved before the loop. Then the copy can be issued for another iteration, anywhere."""
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
        if not op_inside(op, body):
            return True
        if hoist is None or op.parent is not body or op.opcode not in _PURE_SCALAR:
            return False
        if not all(leaves_outside(o, body, None, seen, hoist) for o in op.operands):
            return False
        hoist.append(op)
        return True
    return all(leaves_outside(o, body, iv, seen, hoist) for o in op.operands)


_PURE_SCALAR = ("binary", "addptr", "cast", "constant")


def hoist_before(ops, loop):
    """Move loop-invariant scalar ops (collected by leaves_outside, operands first) from the
    loop body to just before the loop, in body order."""
    body = loop.regions[0]
    ops = sorted(set(ops), key=body.ops.index)
    for op in ops:
        body.ops.remove(op)
        insert_by(op, loop, 0)


def plan_prefetch(fn, options):
    """Two tile loads in a loop body feeding two dots in turn (attention's K then V) become a
    ring of R = max(2, num_stages) buffers per tile, iteration i in buffer i % R, the copies
    running `ahead` iterations in front of the dots:

        before the loop   dot_tile_prefetch: barrier; per iteration t < ahead: copy both tiles
                          of iteration t (if it exists); commit
        loads             (nothing: copied by an earlier iteration or the prologue)
        first dot         cp.async.wait_group ahead-1 (both tiles of this iteration landed);
                          barrier; issue the mma; copy both tiles of iteration i + ahead (if it
                          exists) while it runs; commit; wait for the mma
        second dot        the mma on this iteration's buffer: no wait, no barrier

    One barrier per iteration. It makes this iteration's tiles visible to every warp, and
    guarantees that buffer (i + ahead) % R is free: its previous tiles, iteration i + ahead - R,
    were read by dots every warp has finished. With wgmma the second dot is left in flight
    (attrs "wg_defer" = the carried value it accumulates into, in place: _carried_result):
    the first dot's wait of the next iteration completes it (wgmma groups complete in order),
    and a dot_async_wait after the loop drains the last one; the mma of iteration i - 1 may
    then still read its buffer, so ahead = R - 2 (R >= 3). Without the deferral ahead = R - 1.

    Late copies (the deferral without rotation, an accumulator under 64 registers per thread:
    attention at HEAD_DIM 64): the first dot waits for its mma, which retires the second dot
    of i - 1 as well, then a second barrier, then the copies of iteration i + ahead with
    ahead = R - 1: every warp is past the second dot of i - 1, so its buffer is free, and the
    copies get one more iteration to land. Triton orders its pipelined loop this way too.
    H200, 3 stages, seven interleaved rounds: D=64 406 -> 409 TFLOP/s, causal 362 -> 368
    (Triton 420 / 372). Not with a large accumulator: there one CTA fills the SM and nothing
    covers the second barrier (D=128 causal, 3 stages: 420 -> 394).

    Rotation (R >= 4 with the deferral, ahead = R - 2 >= 2; wgmma; the first dot's A staged
    before the loop and its accumulator zero, as attention's Q K^T): the first dot runs one
    iteration ahead, so that the tensor cores compute it while the warps do the softmax of
    the current one. It costs a second array of scores in registers, so it is only done when
    the carried accumulator holds 64+ registers per thread (HEAD_DIM 128 on two warpgroups):
    such a kernel runs one CTA per SM anyway, and nothing else overlaps its softmax. (H200,
    attention D=128, num_stages=4: 437 TFLOP/s rotated against 407; at D=64 the extra array
    costs the second CTA per SM: 323 against 396.) Its result is carried in a register
    array S:

        before the loop   ... ; wait for iteration 0's tiles; barrier; S = first dot (0)
        first dot         wait_group ahead-2 (the tiles of i + 1 landed); barrier; issue
                          S' = first dot (i + 1) if it exists, left in flight; copy the tiles
                          of i + ahead; the dot's result is S
        dot_async_wait    (before the first read of the carried accumulator) wait_group 0:
                          retires the second dot of i - 1 and S'
        second dot        issue, left in flight; S = S'

    Buffers in use when the copies of i + ahead are issued: i - 1 (the second dot of i - 1
    may be in flight), i, i + 1 ... i + ahead - 1: ahead + 2 <= R.

    attrs: loads "prefetch" = "ahead", "iv_slope" (iv_slope: the pointer moves uniformly with
    the induction variable, so codegen advances per-chunk pointers); both dots "tile_ring" = R
    and "live" = the prefetch op
    to the loop (their tiles are in use across the whole loop); first dot "cp_wait" = ahead - 1
    (ahead - 2 rotated), "ring_issue" = the two loads, "rotate" or "late_copies"; second dot
    "ring_ready", and "a_sync" when it stages its A from registers that other warps than its
    readers wrote (_a_sync),
    "rotate_from" = the first dot; prefetch op "ahead"; dot_async_wait "next" = the loop
    inside it."""
    from ...ir.schedule import uses_wgmma
    for loop in [op for op in fn.walk() if op.opcode == "for"]:
        body = loop.regions[0]
        iv = body.args[0]
        loads = [op for op in body.ops if op.opcode == "dot_tile_load"]
        if len(loads) != 2:
            continue        # (a walk of more: passes/tc/walk_ring.py)
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
        hoist = []
        if not all(leaves_outside(v, body, iv, hoist=hoist) for v in addr):
            continue
        hoist_before(hoist, loop)
        R = max(2, loop.attrs.get("num_stages") or options.num_stages)
        uses = fn.uses()
        carried = _carried_result(dots, body, uses)
        defer = R >= 3 and carried is not None and uses_wgmma(
            options.arch, options.num_threads, dots[1].attrs["dot_plan"],
            dots[1].attrs.get("a_src"))
        ahead = R - 1 - defer
        rotate = defer and ahead >= 2 and _rotatable(dots[0], body, uses, options) \
            and carried.attrs["layout"].nslots >= 64
        # deferred, not rotated, a small accumulator (two CTAs per SM): the copies wait for
        # the first dot's mma and a barrier, which free the buffer of i - 1, and so run one
        # more iteration ahead
        late = defer and not rotate and carried.attrs["layout"].nslots < 64
        if late:
            ahead = R - 1
        pre = Op("dot_tile_prefetch", [], [], {"loads": IrRef(loads), "loop": IrRef(loop),
                                               "ahead": ahead}, (), loop.loc)
        insert_by(pre, loop, 0)
        for ld in loads:
            ld.attrs["prefetch"] = "ahead"
            sl = iv_slope(ld.operands[0], iv, body)
            if sl:                          # (0: the same tile every iteration: keep as is)
                ld.attrs["iv_slope"] = IrRef(sl)
        dots[0].attrs["cp_wait"] = ahead - 1
        dots[0].attrs["ring_issue"] = IrRef(loads)
        if late:
            dots[0].attrs["late_copies"] = True
        dots[1].attrs["ring_ready"] = True
        if _a_sync(dots[1], options):
            dots[1].attrs["a_sync"] = True
        for d in dots:
            d.attrs["tile_ring"] = R
            d.attrs["live"] = IrRef((pre, loop))
        if defer:
            dots[1].attrs["wg_defer"] = IrRef(carried)
            insert_by(Op("dot_async_wait", [], [], {}, (), loop.loc), loop, 1)
        if rotate:
            uses = fn.uses()
            dots[0].attrs["rotate"] = True
            dots[0].attrs["cp_wait"] = ahead - 2
            dots[1].attrs["rotate_from"] = IrRef(dots[0])
            first = min(idx(u) for u in uses[carried.id])
            w = Op("dot_async_wait", [], [], {"next": IrRef(loop)}, (), loop.loc)
            w.parent = body
            body.ops.insert(first, w)


def _a_sync(dot, options):
    """Whether a ring-ready dot that stages its A from registers (a_src None) needs a barrier
    (and, for wgmma, the async-proxy fence) between the staging and the mma: always, except
    on mma.sync with A in the unsplit fragment layout of the dot's own rows, where each warp
    reads back only the rows it wrote. (P of attention in a fragment split in column groups,
    AccLayout's C, is written by the warps of every group.)"""
    from ...ir.layouts import AccLayout
    from ...ir.schedule import uses_wgmma
    if dot.attrs.get("a_src") is not None:
        return False
    plan = dot.attrs["dot_plan"]
    lay = dot.operands[0].attrs.get("layout")
    local = isinstance(lay, AccLayout) and lay.C == 1 and plan.col_groups == 1 \
        and lay.M == plan.M and lay.num_threads == options.num_threads
    return not local or uses_wgmma(options.arch, options.num_threads, plan)


def _rotatable(dot, body, uses, options):
    """The first dot can run one iteration ahead (plan_prefetch's rotation): wgmma, A a tile
    staged before the loop, a zero accumulator, its result read only inside the body."""
    from ...ir.schedule import uses_wgmma
    return uses_wgmma(options.arch, options.num_threads, dot.attrs["dot_plan"]) \
        and dot.attrs.get("a_src") == "staged" and is_zero(dot.operands[2]) \
        and all(op_inside(u, body) and u.opcode != "yield" for u in uses.get(dot.result.id, []))


def iv_slope(v, iv, body):
    """How the pointer (or integer) block `v` moves per unit of the loop's induction variable
    `iv`, the same for every element: (scalar Value or None, int c) meaning c * scalar (c
    alone when None), 0 when v does not depend on iv; None when the step is not uniform or not
    provable (a wrap, a product of two iv-dependent terms, a sum of two symbolic slopes).
    Lets the copies of a tile ring advance one pointer per 16-byte chunk by a constant delta
    per iteration instead of recomputing the address from the index math."""
    memo = {}

    def dep(x):
        if x.id in memo:
            return memo[x.id]
        memo[x.id] = False
        op = x.owner
        d = x is iv or (isinstance(op, Op) and op_inside(op, body)
                        and any(dep(o) for o in op.operands))
        memo[x.id] = d
        return d

    def slope(x):
        if not dep(x):
            return 0
        if x is iv:
            return (None, 1)
        op = x.owner
        c = op.opcode
        if c in ("splat", "broadcast", "reshape", "convert_layout") or \
                (c == "cast" and x.dtype.is_int() and op.operands[0].dtype.is_int()):
            return slope(op.operands[0])
        k = op.attrs.get("op") if c == "binary" else None
        if c == "addptr" or k in ("add", "sub"):
            a, b = slope(op.operands[0]), slope(op.operands[1])
            if a is None or b is None or (a and b):
                return None
            if k == "sub" and b:
                return (b[0], -b[1])
            return a or b
        if k == "mul":
            for i in (0, 1):
                sa, o = slope(op.operands[i]), op.operands[1 - i]
                if sa and not dep(o):
                    w = int_constant(o)
                    if w is not None:
                        return (sa[0], sa[1] * w)
                    u = _scalar_of(o)
                    if u is not None and sa[0] is None:
                        return (u, sa[1])
            return None
        return None

    return slope(v)


def _scalar_of(v):
    """The scalar a block is a splat of (through shape ops), or v itself for a scalar."""
    while is_block(v.type):
        op = v.owner
        if not isinstance(op, Op) or op.opcode not in ("splat", "broadcast", "reshape",
                                                      "convert_layout"):
            return None
        v = op.operands[0]
    return v


def _carried_result(dots, body, uses):
    """The loop-carried value the second dot's result becomes, when the dot can accumulate
    into that value's variable in place while it is in flight: the result is only yielded
    (once), in the accumulator's layout, and every read of the carried value sits in the body
    between the two dots (after the first dot's wait has retired the previous iteration's
    mma, before this iteration's is issued). Else None."""
    r = dots[1].result
    y = body.ops[-1]
    if y.opcode != "yield" or uses.get(r.id) != [y] or \
            sum(o is r for o in y.operands) != 1:
        return None
    carried = body.args[1 + [o is r for o in y.operands].index(True)]
    if carried.attrs.get("layout") != r.attrs.get("layout"):
        return None
    lo, hi = body.ops.index(dots[0]), body.ops.index(dots[1])
    for u in uses.get(carried.id, []):
        if u.parent is not body or not lo < body.ops.index(u) < hi:
            return None
    return carried


def insert_by(op, loop, after):
    """Put `op` just before (after=0) or just after (after=1) `loop` in its block."""
    op.parent = loop.parent
    ops = loop.parent.ops
    ops.insert(ops.index(loop) + after, op)


class IrRef:
    """An IR reference kept in attrs without printing the referenced op."""

    def __init__(self, x):
        self.x = x

    def __str__(self):
        return "ref"
