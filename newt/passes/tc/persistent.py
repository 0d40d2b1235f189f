"""Persistent pass: a TMA-ring matmul runs as one CTA per SM looping over the program ids,
its ring running on across the programs of a CTA.

Where it sits: before smem, which places the ring first when the kernel is persistent (it
needs the store_tma and dot_tma facts, and to know that nothing else uses shared memory:
smem.uses_arena); it only adds facts. It applies to a kernel whose body is

    scalar index math (program ids, parameters, constants)    the "pid slice"
    one `for` loop holding a dot whose ring arrives by TMA    bounds independent of the pid
    dot_ring_drain, the epilogue, a `tma_store` (store_tma.py)

with no early return, no other loop at the top level, no scratch arena, and a ring of more
than half the SM's shared memory (so that one CTA per SM is what the hardware runs anyway).
Then the launcher starts min(grid, SMs) CTAs and passes the grid as a hidden parameter; CTA b
runs programs b, b + gridDim.x, ... (`nl.program_id(0)` is the program's id, as in Triton).

Why: a non-persistent CTA fills its ring only after it starts and drains it before it stores
its tile, so every tile pays the first copies' latency and the epilogue with the tensor cores
idle. Here the copies are numbered over the CTA's whole run: the producer (thread 0) issues
the next program's first S - 1 k-steps while the current program's last ones are consumed
and its epilogue runs. It computes the next program's box coordinates itself, from a copy of
the pid slice, once per program. The epilogue stages its C tile in the stage the last k-step
freed, plus a region of its own for the boxes that do not fit there. The TMA store is waited
for only before that stage is filled again.

Measured on the H200, 2026-12-02 01:03 UTC (benchmarks/lab/matmul_variants.py, `base` against
`nopersist`, 5 interleaved rounds, best of 128x256x64 s4 / s3 and 256x128x64 s4, TFLOP/s):
fp16 4096^3 660 -> 674, 8192^3 637 -> 656; bf16 4096^3 685 -> 708, 8192^3 665 -> 681 (Triton
617 / 634 / 643 / 662). At 2048^3 (one program per CTA) level: 585 -> 584, 604 -> 614. The
hand-written first version (`persist`, benchmarks/lab/persist_variant.py) showed the one trap:
the producer must stay cheap. With the coordinates recomputed at every k-step (integer
divisions on thread 0's path to its copies) it ran 15% slower.

Facts: the loop's attrs["persistent"] (a PersistPlan, also fn.attrs["persistent"]), or
attrs["persistent_why"] on a TMA-ring loop the pass leaves alone (printed IR). Codegen:
codegen/tc/persistent.py; launch: runtime/launch.py.
"""
from __future__ import annotations

from ...ir.core import Op
from ...ir.schedule import PersistPlan, smem_limit
from ..smem import uses_arena

# scalar ops the pid slice may hold (codegen emits each as one C declaration)
_SLICE_OPS = {"constant", "binary", "unary", "cast", "select", "program_id", "num_programs"}


class NoSlice(Exception):
    pass


def scalar_slice(values, body) -> list:
    """The top-level scalar ops computing `values` (ints and parameters need none), in body
    order."""
    need, stack = set(), [v for v in values if not isinstance(v, int)]
    while stack:
        v = stack.pop()
        op = getattr(v, "owner", None)
        if op is None or id(op) in need:
            continue
        if op is body:       # a parameter
            continue
        if not isinstance(op, Op):
            raise NoSlice("a box coordinate or loop bound is a loop-carried value")
        if op.parent is not body or op.opcode not in _SLICE_OPS or op.result.shape:
            raise NoSlice(f"a box coordinate or loop bound comes from `{op.opcode}`, not scalar "
                      "index math before the loop")
        need.add(id(op))
        stack.extend(op.operands)
    return [op for op in body.ops if id(op) in need]


def _plan(fn, options, loop, ring) -> PersistPlan:
    body = fn.body
    if any(op.opcode in ("return", "while") for op in fn.walk()):
        raise NoSlice("the kernel returns early or has a while loop")
    loops = [op for op in body.ops if op.opcode == "for"]
    if len(loops) != 1:
        raise NoSlice("more than one loop at the top level")
    stores = [op for op in body.ops if op.opcode == "tma_store"]
    if len(stores) != 1:
        raise NoSlice("the epilogue is not one TMA store (passes/tc/store_tma.py)")
    if uses_arena(fn, options):
        raise NoSlice("other shared memory in use (scratch arena or dot area)")
    ring_bytes = ring.stages * ring.stage_bytes
    limit = smem_limit(options.arch)
    if 2 * ring_bytes <= limit:
        raise NoSlice(f"the ring ({ring_bytes} bytes) leaves room for a second CTA per SM")
    bounds = scalar_slice(loop.operands[:3], body)
    if any(op.opcode == "program_id" for op in bounds):
        raise NoSlice("the loop's bounds depend on the program id")
    coords = [v for t in ring.tma for v in (t.row0, t.col0, *t.outer)]
    slice_ops = scalar_slice(coords, body)
    sb = stores[0].attrs["tma_store"]
    box = sb.rows * 128                         # a panel: rows x 128 bytes
    n_boxes = sb.cols * sb.esize // 128
    free = min(ring.stage_bytes // box, n_boxes)
    plan = PersistPlan(ring, loop, stores[0], slice_ops, bounds, box, n_boxes, free)
    # the ring, its barriers, the extra panels and two alignment slacks
    if ring_bytes + 16 * ring.stages + plan.extra_bytes + 2048 > limit:
        raise NoSlice("the epilogue's own panels do not fit next to the ring")
    return plan


def plan_persistent(fn, options):
    if options.sm != 90 or not options.arch.endswith("a"):
        return fn
    for loop in (op for op in fn.walk() if op.opcode == "for"):
        ring = next((o.attrs["ring"] for o in loop.regions[0].ops
                     if o.opcode == "dot" and getattr(o.attrs.get("ring"), "tma", None)), None)
        if ring is None:
            continue
        try:
            plan = _plan(fn, options, loop, ring)
        except NoSlice as e:
            loop.attrs["persistent_why"] = str(e)
            continue
        loop.attrs["persistent"] = fn.attrs["persistent"] = plan
    return fn
