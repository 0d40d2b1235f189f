"""Early row loads: in a loop whose tiles come through a walk ring, the plain loads the body
issues after its first dot move up to just before that dot.

Where it sits: the `walk_loads` entry of PASSES, right after `walk_ring` (passes/tc/walk_ring.py:
attrs "walk" on the dot_tile_prefetch op). Consumes a `for` body with a walk
ring; moves each `load` that follows the ring's first dot, together with the body ops after
that dot it reads (index math: its pointer, mask and other), to just before the dot. Marks the
load attrs["early"] (printed).

Why: attention's backward reads two row vectors per iteration, the logsumexp and delta of the
walked query block (loaded straight into the fragment layout of the dot they offset:
passes/tc/dot_rows.py). Where the user wrote them, after Q K^T and after dO V^T, each load's
global-memory latency is paid in full between two dots: every wgmma and mma.sync wait before it
is a compiler barrier (asm with a memory clobber), so NVRTC cannot start the load earlier. Moved
before the ring's wait, the loads are in flight while the warps wait for the iteration's tiles
and run the first dot. Their values stay in registers until used (a [128, 32] row broadcast
over two warpgroups: 16 per thread).

Only when the move cannot change what is read or computed: the loop body stores nothing and
runs no atomics or barriers of its own (no other op writes memory the load could read), the
moved ops compute index math only (no dot, no reduction, no layout change through shared
memory), and none reads a value the first dot or anything after it defines.
"""
from __future__ import annotations

from ...ir.core import Op

_MOVABLE = ("splat", "broadcast", "reshape", "binary", "unary", "cast", "select", "addptr",
            "arange", "constant", "dot_frag_icomp", "convert_layout", "load")
_WRITES = ("store", "atomic", "atomic_rmw", "atomic_cas", "atomic_xchg", "tma_store",
           "debug_barrier", "inline_asm", "assert", "print")


def _movable(op) -> bool:
    if op.opcode not in _MOVABLE or op.regions:
        return False
    if op.opcode == "convert_layout":
        return op.attrs.get("movement") in ("none", "recompute")
    if op.opcode == "load":
        return not op.attrs.get("volatile")
    return True


def hoist_walk_loads(fn, options=None):
    for pre in [op for op in fn.walk() if op.opcode == "dot_tile_prefetch"]:
        if not pre.attrs.get("walk"):
            continue
        loop = pre.attrs["loop"].x
        body = loop.regions[0]
        if any(o.opcode in _WRITES for o in body.walk()):
            continue
        first = pre.attrs["loads"].x[0].attrs["tile"].dot
        _hoist(body, first)
    return fn


def _hoist(body, first):
    start = body.ops.index(first)
    after = {id(o) for o in body.ops[start:]}
    for ld in [o for o in body.ops[start + 1:] if o.opcode == "load"]:
        need, seen, ok = [], set(), True

        def visit(v):
            nonlocal ok
            op = v.owner
            if not ok or not isinstance(op, Op) or id(op) not in after or id(op) in seen:
                return
            seen.add(id(op))
            if not _movable(op):       # (the first dot itself, or what it defines)
                ok = False
                return
            for o in op.operands:
                visit(o)
            need.append(op)

        visit(ld.result)
        if not ok:
            continue
        for op in sorted(need, key=body.ops.index):
            body.ops.remove(op)
            body.ops.insert(body.ops.index(first), op)
            after.discard(id(op))
        ld.attrs["early"] = "before the first ring dot"
