"""Codegen of the dot-rows pass's ops (newt/passes/tc/dot_rows.py): row reductions and broadcasts
inside the accumulator fragment, and the one-time staging of a loop-invariant A tile.

Where it sits: codegen. Consumes
  dot_row_reduce  x in AccLayout(M, N) -> r in AccRowLayout(M): per thread, a balanced tree
                  over its N/4 columns of each of its rows (registers only), then
                  __shfl_xor_sync over lanes 1 and 2 (the quad holding the row's other columns)
  dot_row_bcast   row in AccRowLayout -> AccLayout(M, N): no code, a lazy block whose slot s
                  reads the row slot of s (newt.ir.layouts.acc_row_slot)
  dot_stage_a     the A operand -> its swizzled tile at the planned shared-memory offset
                  (a barrier first: the region may have been read by an earlier dot)
  dot_frag_icomp  an index-computable value evaluated in AccLayout inside a loop, from the
                  fragment's (row, column) with an unhoistable thread index
"""
from __future__ import annotations

from ...ir.layouts import acc_row_slot
from .dot import Tile, stage_tile, opaque_thread, planned_base
from .dot_ptx import add_helpers
from .dot_ptx import PRELUDE
from ..elementwise import binary_expr
from ..emitter import handles
from ..reduce import shfl

_OPS = {"sum": "add", "max": "maximum", "min": "minimum"}


def _tree(op, dt, xs):
    while len(xs) > 1:
        nxt = [binary_expr(op, dt, xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        xs = nxt + ([xs[-1]] if len(xs) % 2 else [])
    return xs[0]


@handles("dot_row_reduce")
def _row_reduce(em, op):
    x, r = op.operands[0], op.result
    lay = x.attrs["layout"]
    dt, ct = r.dtype, em.ctype(r)
    bop = _OPS[op.attrs["kind"]]
    assert lay.C == 1, "a row split over column groups (passes/tc/dot_rows.py keeps it out)"
    n = em.declare(r)
    half = lay.N // 2
    for ms in range(lay.nsub):
        for h in range(2):
            acc = f"{n}[{2 * ms + h}]"
            cols = [em.at(x, ms * half + 4 * c8 + 2 * h + e)
                    for c8 in range(lay.N // 8) for e in range(2)]
            em.emit(f"{acc} = {_tree(bop, dt, cols)};")
            for m in (1, 2):
                em.emit(f"{acc} = {binary_expr(bop, dt, acc, shfl(ct, acc, m))};")


@handles("dot_row_bcast")
def _row_bcast(em, op):
    x, r = op.operands[0], op.result
    lay = r.attrs["layout"]
    em.lazy[r.id] = lambda s: em.at(x, acc_row_slot(lay, s))


@handles("dot_stage_a")
def _stage_a(em, op):
    a = op.operands[0]
    tile, plan = op.attrs["tile"], op.attrs["dot_plan"]
    add_helpers(em, ("newt_dot_prelude", PRELUDE))
    base = planned_base(em, op.attrs["smem"])
    em.barrier()
    stage_tile(em, a, Tile(plan.M, plan.K, plan.esize, base), False)


@handles("dot_frag_icomp")
def _frag_icomp(em, op):
    """An index-computable value recomputed in the accumulator layout inside a loop (the
    causal mask of attention): (row, column) of each fragment slot from the layout's own
    formula, with a thread index NVRTC does not hoist (see dot.opaque_thread)."""
    from ..shapes import value_at      # (shapes imports the passes: import late)
    x, r = op.operands[0], op.result
    lay = r.attrs["layout"]
    n = em.declare(r)
    with em.scope(""):
        opaque_thread(em)
        with em.slots(lay.nslots) as s:
            em.emit(f"{n}[{s}] = {value_at(em, x, list(lay.row_col('tid', s)))};")
