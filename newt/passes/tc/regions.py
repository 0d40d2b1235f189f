"""The tensor-core part of the shared-memory pass: the dot area and the regions of their own.

Where it sits: called by newt/passes/smem.py (the `smem` pass) after the scratch arena is
placed; records SmemRegion facts (newt/ir/shared_memory.py) that codegen/tc reads.

The dot area (after the arena, 1024-byte aligned: wgmma's 128-byte swizzle needs it) holds the
tiles of synchronous tensor-core dots, placed by liveness: a dot's tiles and an accumulator's
staging after its loop live for one op (each starts with a barrier); a staged loop-invariant A
tile (dot_stage_a) lives until the end of the last loop that reads it. Regions whose intervals
do not meet share addresses (first fit), so the two dots of attention, and the two key loops of
causal attention, reuse one another's tiles.

After the area, in the order codegen reaches them (a persistent kernel's first: they are set up
before its program loop), each of these gets a window of its own: a dot loop's ring (its S
stages, and behind them 2 S mbarriers when TMA fills it), attention's ring barriers (8 bytes
per buffer), a persistent kernel's C panels that do not fit the ring's freed stage, a
tensor-core dot's accumulator arriving in another layout, an fma dot's operands. An epilogue
that leaves a ring's loop stages through the ring (idle after the loop) and records the ring's
region, which holds the larger of the stages and the staging, its mbarriers behind both.
"""
from __future__ import annotations

from ...ir.core import is_block
from ...ir.schedule import acc_layout, acc_out_bytes, check_limit, dot_bytes
from ...ir.shared_memory import AREA, OWN, SmemRegion


def align(n, a=1024):
    return -(-n // a) * a


def dot_area_regions(fn, num_threads):
    """[(what, bytes, start, end, ops, loc)] of the dot area, in program order (indices of
    fn.walk()); `ops` are the ops that read the region (op.attrs["smem"], or "smem_a" of the
    dots reading a staged A tile)."""
    order = {id(op): i for i, op in enumerate(fn.walk())}

    def end_of(op):                     # the last index inside op (op itself for plain ops)
        last = order[id(op)]
        for r in op.regions:
            for o in r.walk():
                last = max(last, order[id(o)])
        return last

    def loops_of(op):                   # enclosing loops, innermost first
        out, b = [], op.parent
        while b is not None and isinstance(b.parent, type(op)):
            if b.parent.opcode in ("for", "while"):
                out.append(b.parent)
            b = b.parent.parent
        return out

    regs = []
    staged = {}                         # id(tile) -> [last index, dot_stage_a op, readers]
    first_load = {}                     # dot -> index of its first dot_tile_load
    shared_b = []
    for op in fn.walk():
        i = order[id(op)]
        c = op.opcode
        if c == "dot_tile_load":
            first_load.setdefault(id(op.attrs["tile"].dot), i)
        plan = op.attrs.get("dot_plan")
        if c == "dot" and plan is not None and plan.engine == "mma":
            if op.attrs.get("ring") is not None:
                continue                # a region of its own (below)
            live = op.attrs.get("live")        # prefetched tiles (dot_loads.py)
            start, stop = (order[id(live.x[0])], end_of(live.x[1])) if live is not None \
                else (first_load.pop(id(op), i), i)
            if op.attrs.get("b_tile_of") is not None:  # reads another dot's B tile, in the
                shared_b.append(op)                    # same ring (walk_ring.py)
            else:
                regs.append(("tiles", dot_bytes(op, plan), start, stop, [op], op.loc))
            tile = op.attrs.get("a_tile")
            if tile is not None:
                ls = loops_of(op)
                last = end_of(ls[-1]) if ls else i
                entry = staged.setdefault(id(tile), [0, None, []])
                entry[0] = max(entry[0], last)
                entry[2].append(op)
        elif c == "dot_stage_a":
            entry = staged.setdefault(id(op.attrs["tile"]), [i, None, []])
            entry[1] = (op, i)
        elif c == "dot_acc_out" and plan is not None and plan.engine == "mma":
            if not _acc_out_staged(op, plan, num_threads):
                continue
            if _acc_out_in_ring(op):
                continue                # reuses the ring (codegen/tc/dot_epilogue.py)
            regs.append(("acc_out", acc_out_bytes(op), i, i, [op], op.loc))
    for op in shared_b:
        owner = op.attrs["b_tile_of"].x
        next(r for r in regs if r[0] == "tiles" and r[4][0] is owner)[4].append(op)
    for op in fn.walk():
        if op.opcode == "dot_stage_a":
            last, (_, i), readers = staged[id(op.attrs["tile"])]
            regs.append(("staged_a", op.attrs["tile"].nbytes, i, max(i, last),
                         [op] + readers, op.loc))
    return regs


def _acc_out_staged(op, plan, num_threads) -> bool:
    return op.result.attrs.get("layout") != acc_layout(plan, num_threads)


def _acc_out_in_ring(op) -> bool:
    """The epilogue stages through its loop's ring, idle after the loop: the ring's region
    grows to the staging when that is larger (place_own_regions)."""
    return op.attrs.get("ring") is not None


def place_dot_area(fn, options, arena: int) -> tuple[list, int]:
    """Place the dot area's regions by liveness (module docstring) from `arena` (the scratch
    arena's end); returns (regions, the kernel's bytes so far)."""
    area = align(arena)
    regs = dot_area_regions(fn, options.num_threads)
    placed, out = [], []                # (offset, bytes, start, end)
    for what, nbytes, start, end, ops, loc in sorted(regs, key=lambda r: (r[2], -r[1])):
        nbytes = align(nbytes)
        live = [(o, b) for o, b, s, e in placed if s <= end and start <= e]
        off = min(c for c in [0] + [o + b for o, b in live]
                  if not any(c < o + b and o < c + nbytes for o, b in live))
        placed.append((off, nbytes, start, end))
        region = SmemRegion(what, AREA, area, off, nbytes)
        out.append(region)
        for op in ops:
            op.attrs["smem_a" if op.opcode == "dot" and what == "staged_a" else "smem"] = region
    extent = max((o + b for o, b, _, _ in placed), default=0)
    total = area + 1024 + extent if placed else arena      # + run-time alignment slack
    biggest = max(regs, key=lambda r: r[1])[5] if regs else None
    check_limit(fn, options, total, biggest)
    return out, total


def _inline(v) -> bool:
    """v holds one scalar in every slot (a splat, or a free reshape / rounding of one): codegen
    reads it in any layout without moving it."""
    op = getattr(v, "owner", None)
    c = getattr(op, "opcode", None)
    if c == "splat":
        return True
    if c in ("broadcast", "reshape", "permute", "convert_layout"):
        return op.attrs.get("movement", "smem") == "none" and _inline(op.operands[0])
    if c == "cast" and op.attrs.get("rounded_by_user"):
        return _inline(op.operands[0])
    return False


def acc_moves(op) -> bool:
    """A tensor-core dot's accumulator arrives in a layout it cannot be read in place from:
    it moves into the fragment layout through shared memory."""
    acc, lay = op.operands[2], op.result.attrs["layout"]
    return not (not is_block(acc.type) or acc.attrs.get("layout") == lay
                or acc.attrs.get("icomp") or _inline(acc))


def place_own_regions(fn, options, total: int) -> tuple[list, int]:
    """A window of its own for each region below, after `total` bytes, in the order codegen
    reaches them (module docstring); returns (regions, the kernel's bytes)."""
    out = []

    def take(what, nbytes):
        nonlocal total
        anchor = align(total)
        total = anchor + nbytes + 1024              # + run-time alignment slack
        check_limit(fn, options, total)
        out.append(SmemRegion(what, OWN, anchor, 0, nbytes))
        return out[-1]

    rings = {}                                   # id(RingPlan) -> its region
    staging = {}                                 # id(RingPlan) -> its epilogues' largest
    for op in fn.walk():
        ring = op.attrs.get("ring")
        if op.opcode == "dot_acc_out" and ring is not None and \
                _acc_out_staged(op, op.attrs["dot_plan"], options.num_threads):
            staging[id(ring)] = max(staging.get(id(ring), 0), acc_out_bytes(op))

    def ring_region(ring):
        # the stages, or the epilogue's staging where that is larger (a 128 x 256 fp32 tile
        # is 132 KB, two stages of 128 x 64 and 256 x 64 fp16 tiles 96 KB), then the full and
        # empty mbarriers of a TMA ring: the region's last 16 S bytes (codegen/tc/dot_tma.py)
        if id(ring) not in rings:
            extra = 16 * ring.stages if ring.tma else 0
            body = max(ring.stages * ring.stage_bytes, staging.get(id(ring), 0))
            rings[id(ring)] = take("ring", body + extra)
        return rings[id(ring)]

    persist = fn.attrs.get("persistent")
    if persist is not None:
        ring_region(persist.ring)
        if persist.extra_bytes:
            persist.store.attrs["smem"] = take("panels", persist.extra_bytes)
    for op in fn.walk():
        c = op.opcode
        plan = op.attrs.get("dot_plan")
        if c == "dot" and plan.engine == "fma":
            rb = 8 if op.result.dtype.bits == 64 else 4
            op.attrs["smem"] = take("fma", (plan.M * plan.K + plan.K * plan.N) * rb)
        elif c == "dot" and op.attrs.get("ring") is None and not op.attrs.get("rotate") \
                and acc_moves(op):
            size = 8 if op.operands[2].dtype.bits == 64 else 4
            op.attrs["smem_acc"] = take("acc_in", op.result.attrs["layout"].numel * size)
        elif c == "dot_ring_load":
            ring = op.attrs["ring"]
            if ring.tma is None or op.attrs.get("ring_first") or id(ring) in rings:
                op.attrs["smem"] = ring_region(ring)
        elif c == "dot_tile_prefetch" and op.attrs.get("tma"):
            R = op.attrs["loads"].x[0].attrs["tile"].dot.attrs["tile_ring"]
            op.attrs["smem"] = take("ring_bars", 8 * R)
    for op in fn.walk():                         # the ring's other readers
        ring = op.attrs.get("ring")
        if ring is None or id(ring) not in rings:
            continue
        if op.opcode in ("dot", "dot_ring_load"):
            op.attrs["smem"] = rings[id(ring)]
        elif op.opcode == "dot_acc_out" and _acc_out_in_ring(op) and \
                _acc_out_staged(op, op.attrs["dot_plan"], options.num_threads):
            op.attrs["smem"] = rings[id(ring)]
    return out, total
