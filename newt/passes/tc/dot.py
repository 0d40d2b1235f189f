"""Dot decisions: which engine computes each `dot`, and the accumulator's register layout.

Where it sits: the layout pass (layout.py) calls `result_layout(op, num_threads)` for every
`dot` op; the answer anchors the accumulator (and, through elementwise ops and loop-carried
values, every epilogue value computed from it), so that bias, activation, cast and masked store
work on the tensor-core fragment in place, without a trip through shared memory. The same call
records the decision in `op.attrs["dot_plan"]` (a DotPlan, shown by the printer); codegen
(newt/codegen/tc/dot.py) follows it.

Engines:
  "mma"   tensor cores. On sm_90a with num_warps % 4 == 0 and 16-bit, tf32, fp8 or int8 inputs
          codegen uses wgmma.mma_async (warpgroups); otherwise ldmatrix + mma.sync (sm_80+).
          Both produce the same accumulator layout (AccLayout), so the layout does not depend
          on the arch. fp8 reaches a plan only where wgmma takes it (passes/tc/dot_fp8.py).
  "fma"   exact scalar products (fp32 with input_precision="ieee", fp64, and shapes the
          fragment layout cannot cover): result in the default group-cyclic layout.

AccLayout (the m16n8 / m64nN fragment, PTX ISA "Matrix fragments for mma.m16n8k16" and
"wgmma.mma_async register fragment D"): warps form groups of G = min(4, W) consecutive warps
(a warpgroup when G = 4); group g owns rows [g*M/ngrp, (g+1)*M/ngrp) in sub-tiles of 16*G rows;
warp i of the group owns rows 16i..16i+15 of every sub-tile and all N columns. Within a warp's
16 x N strip, lane l and register r = 4*(c/8) + 2*h + e hold row l/4 + 8h, column
8*(c/8) + 2*(l%4) + e. Slots run sub-tile by sub-tile (N/2 registers each), which is exactly the
register order of a wgmma m64nN accumulator and of consecutive mma.sync m16n8 C fragments.
Where M rows cannot give every warp 16-row strips (BM = 64 at 8 warps), the warps form C column
groups (DotPlan.col_groups, chosen by plan_dot, printed `n-split=C` with its reason): group c
holds columns [c N/C, (c+1) N/C) laid out as above with W/C warps, and issues its own mma.sync
or m64n(N/C) wgmma on that slice of B.
"""
from __future__ import annotations

from ...errors import CompilationError
from ...ir.schedule import acc_layout, plan_dot, uses_wgmma
from .facts import replace_fact


def record_instructions(fn, options):
    """The `tc_instr` pass: each tensor-core dot's instruction, DotPlan.wgmma (wgmma.mma_async,
    else mma.sync), once its A source is known (passes/tc/dot_rows.py: A from registers takes
    wgmma only for 16-bit inputs). Codegen follows it."""
    for op in list(fn.walk()):
        plan = op.attrs.get("dot_plan") if op.opcode == "dot" else None
        if plan is None:
            continue
        wg = uses_wgmma(options.arch, options.num_threads, plan, op.attrs.get("a_src"))
        if wg != plan.wgmma:
            replace_fact(fn, plan, wgmma=wg)
    return fn


def result_layout(op, num_threads):
    """The layout pass's hook: the accumulator layout of `dot` op (None: the default)."""
    plan = op.attrs.get("dot_plan")
    if plan is None:
        try:
            plan = plan_dot(op, num_threads)
        except (ValueError, KeyError) as e:
            raise CompilationError(f"dot: {e}", op.loc) from None
        op.attrs["dot_plan"] = plan
    _route_loop_result(op)
    if op.attrs.get("ring") is not None:     # marked by dot_pipeline.py: the loads go async
        for v in op.operands[:2]:
            if v.owner.attrs.get("ring_role"):
                v.owner.opcode = "dot_ring_load"
    if plan.engine == "mma":
        return acc_layout(plan, num_threads)
    return None



def _route_loop_result(dot):
    """When `dot` is the yielded accumulator of a `for` loop, the loop's result leaves through a
    `dot_acc_out` op (codegen: fragment layout -> the default layout via shared memory, which
    also makes the epilogue's stores 16-byte and coalesced). Inserted right after the loop while
    the layout pass walks the loop's parent block, so the pass visits it next.

    Why here: the layout pass gives a loop's results the default layout after settling its
    carried values (newt/passes/layout.py, `_Assigner.op` falls through to `self.set(r)` for
    for/while), while codegen aliases results to the carried arrays, which hold the fragment
    layout. Routing the result through this op is correct either way."""
    body = dot.parent
    loop = getattr(body, "parent", None)
    if loop is None or loop.opcode != "for" or dot.attrs.get("acc_routed"):
        return
    dot.attrs["acc_routed"] = True
    yld = body.ops[-1]
    if dot.result not in yld.operands:
        return
    res = loop.results[yld.operands.index(dot.result)]
    parent = loop.parent
    uses = [o for o in parent.walk() if res in o.operands]
    if not uses or any(o.opcode == "dot_acc_out" for o in uses):
        return
    from ...ir.core import Op
    out = Op("dot_acc_out", [res], [res.type],
             {"dot_plan": dot.attrs["dot_plan"], "ring": dot.attrs.get("ring")}, (), loop.loc)
    out.parent = parent
    out.result.name = res.name
    parent.ops.insert(parent.ops.index(loop) + 1, out)
    for o in uses:
        o.operands = [out.result if v is res else v for v in o.operands]

