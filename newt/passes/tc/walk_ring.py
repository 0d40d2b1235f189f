"""Walk rings: the tiles a loop body copies for its dots, any number of them read in any order,
through a ring of buffers filled one or more iterations ahead (the pair form of
passes/tc/dot_loads.py, plan_prefetch, covers attention's forward: two tiles, two dots in
turn, with wgmma deferral and rotation).

Where it sits: the `walk_ring` entry of PASSES, right after `prefetch`, for the loops that pass
left alone. Consumes a `for` body whose dot_tile_loads (dot_loads.py, plan_tile_loads) fill the
B tiles of distinct dots of that body, each dot's A a staged tile or registers, every address
and mask computable for any iteration (dot_loads.leaves_outside); records the same facts as the
pair form (a dot_tile_prefetch op with attrs "walk" = the number of tiles, "tile_ring",
"cp_wait", "ring_issue", "ring_ready", "live"), so codegen (codegen/tc/dot_loads.py, dot.py)
and the TMA pass (ring_tma.py) serve both forms alike. A loop it leaves alone says why on its
first dot (attrs "walk_why"). On sm_90a it also orders the walk's wgmma waits: a dot whose
result only accumulates into its carried value is left in flight (attrs "wg_defer"), and a dot
is issued right behind the first earlier one it does not depend on, one wait retiring both
("wg_wait_at", "retires", "zero_acc").

Attention's backward: a key block's walk over query blocks reads Q^T, Q, dO and dO^T in four
dots, a query block's walk over key blocks K^T, K and V^T in three. Copied where each dot
reads it, every tile costs a cp.async wait, a proxy fence and two block barriers, its global
latency exposed each iteration (Triton's pipeliner issues these loads ahead too).
"""
from __future__ import annotations

from ...ir.core import Op
from ...ir.layouts import AccLayout
from ...ir.schedule import uses_wgmma
from .dot_loads import IrRef, hoist_before, insert_by, is_zero, iv_slope, leaves_outside


def plan_walk_rings(fn, options):
    done = {id(op.attrs["loop"].x) for op in fn.walk() if op.opcode == "dot_tile_prefetch"}
    for loop in [op for op in fn.walk() if op.opcode == "for" and id(op) not in done]:
        loads = [op for op in loop.regions[0].ops if op.opcode == "dot_tile_load"]
        if len(loads) >= 2:
            _walk_ring(loop, loads, options)
    return fn


def _walk_ring(loop, loads, options):
    """The walk form of the ring: N >= 2 B tiles, one per dot, read by the dots of one
    iteration in any order (attention's backward walks: Q^T, Q, dO, dO^T against a key block's
    four dots; K^T, K, V^T against a query block's three). Issued like the pair form without
    wgmma deferral: the body's first ring dot waits for every tile of this iteration
    (cp.async.wait_group ahead - 1), crosses the iteration's one barrier and issues the copies
    of iteration i + ahead, ahead = R - 1, into the buffers of iteration i - 1, which every
    warp finished reading (each dot waited for its mma) before that barrier; the other dots
    find their tiles landed. Without it every tile is copied where it is read, each copy's
    latency exposed behind a wait and two barriers (Triton pipelines these loads too). Each
    dot's A must be a staged tile or registers: the later dots have no barrier of their own
    to cover an A staged in the loop."""
    body = loop.regions[0]
    iv = body.args[0]
    dots = [ld.attrs["tile"].dot for ld in loads]
    if len({id(d) for d in dots}) != len(dots) or any(
            d.parent is not body or ld.attrs["tile"].role != "b"
            or d.attrs.get("a_src") not in ("staged", "regs") for ld, d in zip(loads, dots)):
        return
    addr = [ld.operands[0] for ld in loads] + \
        [ld.operands[1] for ld in loads if ld.attrs.get("has_mask")]
    hoist = []
    if not all(leaves_outside(v, body, iv, hoist=hoist) for v in addr):
        return
    acc = sum(a.attrs["layout"].nslots for a in body.args[1:]
              if isinstance(a.attrs.get("layout"), AccLayout))
    if acc >= 64 and not all(uses_wgmma(options.arch, options.num_threads, d.attrs[
            "dot_plan"], d.attrs.get("a_src")) for d in dots):
        # mma.sync's fragments and the copies' addresses on top of 64 accumulator registers
        # per thread spill (attention's backward at D = 128 on sm_80, either walk)
        dots[0].attrs["walk_why"] = f"{acc} accumulator registers per thread on mma.sync"
        return
    hoist_before(hoist, loop)
    R = max(2, loop.attrs.get("num_stages") or options.num_stages)
    # in the order their dots run: the first load's dot is the one that waits (ring_tma.py
    # and codegen read it from there)
    loads = sorted(loads, key=lambda ld: body.ops.index(ld.attrs["tile"].dot))
    dots = [ld.attrs["tile"].dot for ld in loads]
    copied = _share_transposed(loads)
    pre = Op("dot_tile_prefetch", [], [], {"loads": IrRef(copied), "loop": IrRef(loop),
                                           "ahead": R - 1, "walk": len(loads)}, (), loop.loc)
    insert_by(pre, loop, 0)
    for ld in loads:
        ld.attrs["prefetch"] = "ahead"
        sl = iv_slope(ld.operands[0], iv, body)
        if sl:
            ld.attrs["iv_slope"] = IrRef(sl)
    dots[0].attrs["cp_wait"] = R - 2
    dots[0].attrs["ring_issue"] = IrRef(copied)
    for d in dots:
        d.attrs["tile_ring"] = R
        d.attrs.pop("ring_why", None)     # (the K-loop ring's reason: this ring took the dot)
        d.attrs["live"] = IrRef((pre, loop))
        if d is not dots[0]:
            d.attrs["ring_ready"] = True
    if all(uses_wgmma(options.arch, options.num_threads, d.attrs["dot_plan"],
                      d.attrs.get("a_src")) for d in dots):
        _pair_independent(body)
        _defer_waits(body)


_MOVABLE = ("splat", "broadcast", "reshape", "constant", "convert_layout", "dot_tile_load",
            "binary", "unary", "cast", "select", "addptr", "arange")


def _pair_independent(body):
    """A wgmma dot X and the first later dot Y that does not read X's result, directly or
    through the body's ops (attention's Q K^T and dO V^T in either walk): Y, with the ops
    between them that only it needs (its zero accumulator, its ring tile's load, which
    copies nothing here), moves up right behind X, and X is left in flight (attrs
    "wg_wait_at"): Y's wait retires both, one mma latency per iteration instead of two. Y
    then pins X's registers (attrs "retires") so that nothing reads them before that wait.
    Only ops that compute nothing (constants, splats, layout moves in registers, ring loads)
    move; Y itself reads no value made between X and Y otherwise."""
    dots = [op for op in body.ops if op.opcode == "dot"]
    if not all(d.attrs.get("tile_ring") for d in dots):
        return          # (a dot of its own may stage tiles and cross barriers: stay in order)
    taken = set()
    for x in dots:
        if id(x) in taken:
            continue
        i = body.ops.index(x)
        for y in [d for d in dots if body.ops.index(d) > i and id(d) not in taken]:
            need, ok = _closure(body, x, y)
            if ok:
                _place_after(body, x, sorted(need, key=body.ops.index) + [y])
                x.attrs["wg_wait_at"] = IrRef(y)
                y.attrs["retires"] = IrRef([x])
                if is_zero(y.operands[2]) and y.attrs.get("a_src") != "regs":
                    # its first k-step overwrites the accumulator: no zero fill, which would
                    # be a register write while x's wgmma runs (ptxas then waits for x)
                    y.attrs["zero_acc"] = True
                taken.update((id(x), id(y)))
                break


def _closure(body, x, y):
    """(the ops after dot x that dot y reads, transitively; whether none is x and all can move
    up to just after x: elementwise index math and register values, ring loads)."""
    need, seen, ok = [], set(), True
    i = body.ops.index(x)

    def visit(v):
        nonlocal ok
        op = v.owner
        if not ok or not isinstance(op, Op) or op.parent is not body or id(op) in seen:
            return
        seen.add(id(op))
        if op is x:
            ok = False
            return
        if body.ops.index(op) < i:
            return
        if op.opcode not in _MOVABLE or (op.opcode == "convert_layout" and op.attrs.get(
                "movement") not in ("none", "recompute")) or (
                op.opcode == "dot_tile_load" and op.attrs.get("prefetch") != "ahead"):
            ok = False
            return
        for o in op.operands:
            visit(o)
        need.append(op)

    for o in y.operands:
        visit(o)
    return need, ok


def _place_after(body, x, ops):
    """Put `ops` (in this order) right after x."""
    moved = {id(op) for op in ops}
    body.ops[:] = [op for op in body.ops if id(op) not in moved]
    at = body.ops.index(x) + 1
    body.ops[at:at] = ops


def _defer_waits(body):
    """A wgmma dot whose result only becomes the carried accumulator it adds to (attention's
    dV += P^T dO) is left in flight, accumulating in place (attrs "wg_defer", as the pair
    form's second dot): the next wgmma dot of the body, issued right behind it, waits for
    both (wgmma groups complete in order), so the two run back to back instead of each
    waiting out its own latency. Not across the back edge: the next iteration's copies reuse
    this one's buffers once the barrier is crossed, which needs every mma on them done."""
    uses = body.uses()
    wg = [op for op in body.ops if op.opcode == "dot"]
    y = body.ops[-1]
    for x in wg[:-1]:
        if x.attrs.get("wg_wait_at") is not None or x.attrs.get("retires") is not None:
            continue
        r = x.result
        if y.opcode != "yield" or uses.get(r.id) != [y] or sum(o is r for o in y.operands) != 1:
            continue
        carried = body.args[1 + [o is r for o in y.operands].index(True)]
        if carried.attrs.get("layout") != r.attrs.get("layout") or \
                uses.get(carried.id) != [x] or x.operands[2] is not carried:
            continue
        x.attrs["wg_defer"] = IrRef(carried)


def _share_transposed(loads):
    """The loads of `loads` (in dot order) whose tiles are copied: a load of the transpose of
    another (trans_loads.py: attrs "transposed_from"), whose dot takes B in the other
    orientation (one K-major, one MN-major), holds the same bytes in the same places (tile row
    r, column c is element (c, r) of one block and (r, c) of the other), so its dot reads the
    other's tile (dot attrs "b_tile_of", passes/tc/regions.py gives both one region) and it is
    not copied: attention's backward copies Q and dO (K and V) once per iteration, not
    twice."""
    def pair(a, b):
        return any(x.attrs.get("transposed_from") is not None
                   and x.attrs["transposed_from"].x is y for x, y in ((a, b), (b, a)))

    copied = []
    for ld in loads:
        d = ld.attrs["tile"].dot
        twin = next((c for c in copied if pair(c, ld)), None)
        o = twin.attrs["tile"].dot if twin is not None else None
        p, q = (o.attrs["dot_plan"], d.attrs["dot_plan"]) if o is not None else (None, None)
        if o is not None and bool(o.attrs.get("b_kmajor")) != bool(d.attrs.get("b_kmajor")) \
                and (p.N, p.K, p.esize) == (q.K, q.N, q.esize):
            d.attrs["b_tile_of"] = IrRef(o)
            ld.attrs["tile_of"] = "its transpose's"
            continue
        copied.append(ld)
    return copied
