"""Dot pipeline pass: loops around a `dot` lose their pointer arrays and stage their operand
tiles through a cp.async ring with deferred consumption.

Where it sits: before the layout pass (it rewrites IR; layouts are decided afterwards).
Consumes the frontend's IR; produces:

1. Strength-reduced pointer blocks. A loop-carried pointer block P with an index-computable
   initial value I and the update `P = P + splat(s)` (the tutorial's `a_ptrs += BK * stride`)
   becomes a carried *scalar* offset o (i64): inside the body P is `I + splat(o)`, which is
   index-computable, so no thread keeps 2 registers per element alive across iterations (the
   tutorial matmul at 128x128x64 otherwise carries 96 pointers per thread and spills).
   Then two rewrites that make more dot operands plain loads or keep them narrow:
   `dot(a, trans(load(p)))` loads the transposed block instead (trans_loads.py), and fp8 dots
   keep 8-bit operands where wgmma takes them, or cast to fp16 (dot_fp8.py).
2. Ring loads. In a `for` body, a `load` whose only user is a `dot` operand, with `other`
   absent or 0, becomes opcode `dot_ring_load` (attrs ring_role "a"/"b", ring_first on the
   first of the body; the opcode changes when the layout pass reaches the dot, so that vector
   widths are still chosen from the loads); the dot gets attrs["ring"] = RingPlan. Conditions: the dot's acc is a
   carried value used only by the dot, and the dot's result only by the loop's yield (so
   consuming tile i at iteration i + D and the last D tiles at the last iteration computes the
   same sum), acc is fp32 or int32, and the dot runs on tensor cores.
   Codegen (newt/codegen/tc/dot.py) then emits, per iteration i, with D = S - 1:
       first ring load: if i >= D: wait for tile i-D, fence, barrier;
                        wgmma (sm_90a): consume stage (i-D) % S, leaving it in flight
                        (wait_group 1 retires tile i-D-1's), barrier: stage i % S is free
       each ring load:  16-byte cp.async per layout group into stage i % S (a gather for
                        groups that are not consecutive, aligned and unmasked)
       dot:             commit; mma.sync: if i >= D: consume stage (i-D) % S;
                        at the last iteration: wait for all, consume the remaining tiles

3. TMA rings. On sm_90a a wgmma ring whose tiles are provably boxes of 2-D tensors
   (passes/tc/dot_tma.py: aligned pointer parameter, row stride, `start + arange` indices, mask
   terms bounded by parameters) gets ring.tma and the schedule of codegen/tc/dot_tma.py: D = S-1,
   tiles copied by TMA on mbarriers, no CTA barrier in the loop.

Listed in newt/passes/__init__.py's PASSES. Codegen: newt/codegen/tc/dot_ring.py (ring loads: one pointer per operand stepped by a
constant, invariant tests declared before the loop, slow groups gathered out of line),
dot_masks.py (one test per 16-byte group), dot_epilogue.py (dot_acc_out through padded shared
memory; the epilogue's stores addressed per group from index math).
"""
from __future__ import annotations

import dataclasses

from ... import dtypes as D
from ...ir.core import BlockType, Op, ScalarType, is_block
from ...ir.layouts import SwappedAccLayout
from ...ir.pointers import b_tile_kmajor, k_contiguous
from ...ir.schedule import RingPlan, plan_dot, uses_wgmma


def _new_op(block, index, opcode, operands, rtype, attrs=None, loc=None):
    op = Op(opcode, operands, [rtype], attrs or {}, (), loc)
    op.parent = block
    block.ops.insert(index, op)
    return op.result


def _icomp_ok(v, body_ids) -> bool:
    """Defined outside the loop from index math only (arange/program ids/scalars)."""
    op = v.owner
    if not isinstance(op, Op) or id(op) in body_ids:
        return not is_block(v.type)
    if op.opcode in ("arange", "constant", "program_id", "num_programs"):
        return True
    if op.opcode in ("splat", "broadcast", "reshape", "binary", "addptr", "cast", "unary",
                     "select", "fma"):
        return all(_icomp_ok(o, body_ids) for o in op.operands)
    return not is_block(v.type)


def _reduce_pointers(loop):
    body = loop.regions[0]
    yld = body.ops[-1]
    body_ids = {id(o) for o in body.walk()}
    for i, arg in enumerate(list(body.args[1:])):
        init, nxt = loop.operands[3 + i], yld.operands[i]
        if not (is_block(arg.type) and arg.dtype.is_ptr()):
            continue
        upd = nxt.owner
        if not (isinstance(upd, Op) and upd.opcode == "addptr" and upd.parent is body
                and upd.operands[0] is arg):
            continue
        inc = upd.operands[1]
        if not (isinstance(inc.owner, Op) and inc.owner.opcode == "splat"):
            continue
        if not _icomp_ok(init, body_ids):
            continue
        step = inc.owner.operands[0]
        shape, loc = arg.type.shape, loop.loc
        # the carried value becomes the scalar element offset
        parent = loop.parent
        zero = _new_op(parent, parent.ops.index(loop), "constant", [], ScalarType(D.int64),
                       {"value": 0}, loc)
        loop.operands[3 + i] = zero
        res = loop.results[i]
        arg.type = ScalarType(D.int64)
        res.type = ScalarType(D.int64)
        # inside: P = I + splat(o), in front of everything
        sp = _new_op(body, 0, "splat", [arg], BlockType(D.int64, shape), None, loc)
        ptr = _new_op(body, 1, "addptr", [init, sp], init.type, None, loc)
        ptr.name = arg.name
        for op in body.walk():
            if op is sp.owner:
                continue
            op.operands = [ptr if o is arg else o for o in op.operands]
        # the update: o + s (s widened to i64)
        at = body.ops.index(yld)
        s64 = step if step.dtype is D.int64 else _new_op(body, at, "cast", [step],
                                                         ScalarType(D.int64), {"bitcast": False},
                                                         loc)
        at = body.ops.index(yld)
        o2 = _new_op(body, at, "binary", [arg, s64], ScalarType(D.int64), {"op": "add"}, loc)
        yld.operands[i] = o2
        # after the loop the pointer block is I + splat(final offset), if anyone reads it
        uses = [op for op in parent.walk() if res in op.operands]
        if uses:
            k = parent.ops.index(loop) + 1
            sp2 = _new_op(parent, k, "splat", [res], BlockType(D.int64, shape), None, loc)
            p2 = _new_op(parent, k + 1, "addptr", [init, sp2], init.type, None, loc)
            for op in uses:
                op.operands = [p2 if o is res else o for o in op.operands]


def _zero_other(v) -> bool:
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("splat", "broadcast", "cast"):
        op = op.operands[0].owner
    return isinstance(op, Op) and op.opcode == "constant" and op.attrs["value"] == 0


def _mark_ring(loop, options):
    body = loop.regions[0]
    uses = body.uses()
    yld = body.ops[-1]
    first = True
    for op in list(body.ops):
        if op.opcode != "dot":
            continue
        a, b, acc = op.operands[:3]
        if acc not in body.args[1:] or op.result.dtype not in (D.float32, D.int32):
            continue
        j = body.args.index(acc) - 1
        if [u for u in uses.get(acc.id, [])] != [op] or uses.get(op.result.id, []) != [yld] \
                or yld.operands[j] is not op.result:
            continue
        plan = plan_dot(op, options.num_threads)
        if plan.engine != "mma":
            continue
        loads = []
        for v in (a, b):
            ld = v.owner
            ok = (isinstance(ld, Op) and ld.opcode == "load" and ld.parent is body
                  and uses.get(v.id, []) == [op] and not ld.attrs.get("volatile")
                  and (not ld.attrs.get("has_other") or _zero_other(ld.operands[-1])))
            loads.append(ld if ok else None)
        if None in loads:
            continue
        S = max(2, loop.attrs.get("num_stages") or options.num_stages)
        use_wg = uses_wgmma(options.arch, options.num_threads, plan)
        # wgmma: consume tile i - (S-1) first, leave it in flight (wait_group 1 retires the one
        # before), barrier, then copy tile i into the stage that one read: S-1 tiles in flight,
        # as Triton's pipeliner does. Copying first (the mma.sync order) would have to leave
        # the stage of the in-flight wgmma alone too: one tile fewer in flight.
        D_, wait = S - 1, (1 if use_wg else 0)
        a_bytes = -(-plan.M * plan.K * plan.esize // 1024) * 1024
        b_bytes = -(-plan.K * plan.N * plan.esize // 1024) * 1024
        b_kmajor = b_tile_kmajor(plan.esize, loads[1].operands[0])
        if use_wg and plan.kind == "tf32" and not k_contiguous(loads[1].operands[0]) \
                and SwappedAccLayout.fits(plan.M, plan.N, options.num_threads) \
                and plan.col_groups == 1:
            # wgmma reads a 4-byte B only K-major from shared memory; copied as it lies (N-major,
            # 16-byte copies) and computed swapped, C^T = B^T A^T (B^T's fragments read into
            # registers: codegen/tc/dot_swap.py), instead of transposed by 4-byte copies.
            # dot_tma decides the same for its boxes.
            plan, b_kmajor = dataclasses.replace(plan, swap=True), False
        ring = RingPlan(S, D_, wait, a_bytes, a_bytes + b_bytes, early=use_wg, b_kmajor=b_kmajor)
        op.attrs["dot_plan"] = plan
        op.attrs["ring"] = ring
        for role, ld in zip("ab", loads):
            # the opcode becomes dot_ring_load in the layout pass (passes/tc/dot.py), after the
            # pass has chosen vector widths from the loads
            ld.attrs.update(ring_role=role, ring=ring, ring_first=False)
        # the first ring load of the body issues the iteration's wait + barrier
        firsts = sorted(loads, key=body.ops.index)
        if first:
            firsts[0].attrs["ring_first"] = True
            first = False
        else:   # a second ring in the same loop shares the first one's barrier
            firsts[0].attrs["ring_first"] = True


def _acc_out(loop, options):
    """A carried dot accumulator leaves the loop through `dot_acc_out`: codegen moves it from
    the fragment layout to the default layout through shared memory (coalesced epilogue
    stores), whatever layout the loop's result value was given."""
    body = loop.regions[0]
    yld = body.ops[-1]
    for j, y in enumerate(yld.operands):
        dot = y.owner
        if not (isinstance(dot, Op) and dot.opcode == "dot" and dot.parent is body):
            continue
        res = loop.results[j]
        parent = loop.parent
        uses = [op for op in parent.walk() if res in op.operands]
        if not uses:
            continue
        plan = dot.attrs.get("dot_plan") or plan_dot(dot, options.num_threads)
        dot.attrs["dot_plan"] = plan
        k = parent.ops.index(loop) + 1
        out = _new_op(parent, k, "dot_acc_out", [res], res.type,
                      {"dot_plan": plan, "ring": dot.attrs.get("ring")}, loop.loc)
        out.name = res.name
        for op in uses:
            op.operands = [out if o is res else o for o in op.operands]


def _dot_loops(fn):
    return [op for op in fn.walk() if op.opcode == "for"
            and any(o.opcode == "dot" for o in op.regions[0].ops)]


def reduce_pointers(fn, options):
    """1. Pointer strength reduction in every loop holding a dot."""
    for loop in _dot_loops(fn):
        _reduce_pointers(loop)
    return fn


def plan_rings(fn, options):
    """2. The cp.async ring of each loop's dot, and the accumulator's way out (dot_acc_out)."""
    for loop in _dot_loops(fn):
        _mark_ring(loop, options)
        _acc_out(loop, options)
    return fn


def plan_tma_rings(fn, options):
    """3. TMA boxes for the rings that can take them (passes/tc/dot_tma.py)."""
    for loop in _dot_loops(fn):
        _plan_tma(fn, loop, options.num_threads)
    return fn


def place_drains(fn, options):
    """The ring's drain after each loop."""
    for loop in _dot_loops(fn):
        _drain_after(loop)
    return fn


def _drain_after(loop):
    """One dot_ring_drain per ring, right after the loop (before the epilogue's dot_acc_out):
    codegen consumes the tiles still in the ring there and retires every wgmma."""
    for dot in [o for o in loop.regions[0].ops if o.opcode == "dot" and o.attrs.get("ring")]:
        k = loop.parent.ops.index(loop) + 1
        drain = Op("dot_ring_drain", [], [], {"dot": _DotRef(dot)}, (), loop.loc)
        drain.parent = loop.parent
        loop.parent.ops.insert(k, drain)


class _DotRef:
    """The ring dot a drain belongs to, kept in attrs without printing it."""

    def __init__(self, x):
        self.x = x

    def __str__(self):
        return "ring-dot"


def _plan_tma(fn, loop, num_threads):
    """wgmma rings whose tiles are provably TMA boxes (passes/tc/dot_tma.py) take TMA copies
    (codegen/tc/dot_tma.py): the same depth and order as the cp.async wgmma ring (D = S-1,
    consumption first), with mbarriers instead of CTA barriers."""
    from .dot_tma import plan_tma
    body = loop.regions[0]
    yld = body.ops[-1]
    for dot in [o for o in body.ops if o.opcode == "dot" and o.attrs.get("ring")]:
        ring = dot.attrs["ring"]
        if not ring.early:
            continue
        loads = sorted([o for o in body.ops if o.attrs.get("ring") is ring and o is not dot],
                       key=lambda o: o.attrs["ring_role"])
        j = yld.operands.index(dot.result)
        outs = [op for op in loop.parent.ops if op.opcode == "dot_acc_out"
                and op.operands[0] is loop.results[j]]
        plan_tma(fn, loop, ring, dot, loads, outs[0].result if outs else None, num_threads)

