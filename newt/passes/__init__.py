"""Passes: IR -> IR decisions, run in order after the frontend and before codegen.

Every pass is one entry of PASSES, in the order they run; NEWT_DEBUG=2 prints the IR after each.

  core
    masks             masks the value ranges prove all-true are dropped (masks.py)
    scaled_reduce     max / min of a block times a positive constant: the reduction first
                      (scaled_reduce.py)
  tensor cores, before layouts (tc/squeeze.py, tc/canonical.py, tc/dot_pipeline.py,
  tc/trans_loads.py, tc/dot_fp8.py)
    squeeze_dots      a dot loop's unit-dim operand loads and accumulator -> their 2-D form
    fuse_acc          acc + dot(a, b) of a carried acc -> dot(a, b, acc)
    carry_pointers    dot operand pointers recomputed from the induction variable -> incremented
    reduce_pointers   pointer strength reduction in loops holding a dot
    trans_loads       dot(a, trans(load)) -> dot(a, load of the transpose)
    fp8_dots          fp8 dots wgmma cannot take run on fp16 tensor cores
    dot_ring          loads that feed only a dot go through an asynchronous shared-memory ring
    ring_why          a loop's dot left without a ring says which fact is missing (tc/canonical.py)
    dot_tma           rings whose tiles are provably boxes are filled by TMA (tc/dot_tma.py)
    ring_drain        the ring's tiles consumed after its loop
  core
    wide_index        64-bit offsets for tensors of 2**31+ elements (wide_index.py)
    layout            a register layout for every block value (layout.py; the dot's accumulator
                      layout from tc/dot.py)
    icomp             index-computable values (layout.py)
    runs              run facts: contiguity, divisibility, constant masks (runs.py)
    movement          how each layout conversion moves its data (layout.py)
  tensor cores, after layouts (tc/dot_rows.py, tc/fragment_split.py, tc/fragment_epilogue.py,
  tc/dot_loads.py, tc/ring_copies.py, tc/ring_tma.py, tc/store_tma.py)
    acc_between_loops an accumulator passed from loop to loop stays in the fragment
    dot_rows          dot results' row statistics stay in the fragment layout
    row_scale         acc / l[:, None] in the fragment
    frag_split        split(permute(reshape(acc, (M, 2, N/2)))): two column halves of the fragment
    frag_cast         the epilogue's elementwise ops up to the 16-bit cast in the fragment
    dot_operands      A from registers; loop-invariant A tiles staged once
    tile_loads        loads feeding only a synchronous dot copied straight into its tile
    ring_copies       a cp.async ring's K-major B tile copied by 16-byte runs of k
                      (tc/ring_copies.py)
    prefetch          attention's ring of tiles across iterations
    walk_ring         a loop's tiles read by its dots in any order, copied ahead (attention's
                      backward walks: tc/walk_ring.py)
    walk_loads        a walk ring's row loads issued before its first dot (tc/walk_loads.py)
    ring_tma          attention's rings by TMA boxes
    recompute_index   fragment index math inside loops recomputed, not hoisted
    store_tma         a dot epilogue's masked store of a TMA-ring dot as TMA boxes
    tc_instr          each tensor-core dot's instruction: wgmma or mma.sync (tc/dot.py)
  core
    accesses          each block load's and store's vector accesses (accesses.py)
    thread_order      barriers where a scalar access could pass another thread's access to
                      the same tensor (thread_order.py)
  tensor cores
    persistent        a TMA-ring matmul as one CTA per SM looping over program ids
                      (tc/persistent.py)
  core
    smem              reduction plans and every shared-memory region: the scratch arena, the
                      dot area, rings, barriers, staging (smem.py, tc/regions.py)
  tensor cores
    dot_stores        the epilogue's stores of a staged accumulator stored group by group
                      (tc/dot_stores.py)
  core
    occupancy         the blocks per SM asked of ptxas (smem.py)

Each pass records its decisions in Value.attrs / Op.attrs / Function.attrs, so the printed IR
(NEWT_DEBUG=1) shows every choice codegen will follow.
"""
from __future__ import annotations

import sys

from .accesses import plan_accesses
from .layout import assign_layouts, decide_movement, mark_icomp
from .masks import drop_true_masks
from .runs import mark_runs
from .scaled_reduce import scale_reductions
from .smem import plan_occupancy, plan_shared_memory
from .tc.canonical import carry_pointers, explain_rings, fuse_acc
from .tc.dot import record_instructions
from .tc.dot_fp8 import lower_fp8_dots
from .tc.dot_loads import plan_prefetch, plan_tile_loads
from .tc.dot_pipeline import place_drains, plan_rings, plan_tma_rings, reduce_pointers
from .tc.dot_rows import fuse_rows, plan_operands
from .tc.dot_stores import claim_dot_stores
from .tc.fragment_split import split_in_fragment
from .tc.fragment_epilogue import (cast_in_fragment, keep_acc_between_loops, recompute_index,
                                   scale_in_fragment)
from .tc.persistent import plan_persistent
from .tc.ring_copies import plan_ring_copies
from .tc.ring_tma import plan_ring_tma
from .tc.squeeze import squeeze_dots
from .tc.store_tma import plan_store_tma
from .tc.trans_loads import load_transposed_operands
from .tc.walk_loads import hoist_walk_loads
from .tc.walk_ring import plan_walk_rings
from .thread_order import order_threads
from .wide_index import mark_wide_indices

PASSES = (
    ("masks", drop_true_masks),
    ("scaled_reduce", scale_reductions),
    ("squeeze_dots", squeeze_dots),
    ("fuse_acc", fuse_acc),
    ("carry_pointers", carry_pointers),
    ("reduce_pointers", reduce_pointers),
    ("trans_loads", load_transposed_operands),
    ("fp8_dots", lower_fp8_dots),
    ("dot_ring", plan_rings),
    ("ring_why", explain_rings),
    ("dot_tma", plan_tma_rings),
    ("ring_drain", place_drains),
    ("wide_index", mark_wide_indices),
    ("layout", assign_layouts),
    ("icomp", mark_icomp),
    ("runs", lambda fn, options: mark_runs(fn)),
    ("movement", decide_movement),
    ("acc_between_loops", keep_acc_between_loops),
    ("dot_rows", fuse_rows),
    ("row_scale", scale_in_fragment),
    ("frag_split", split_in_fragment),
    ("frag_cast", cast_in_fragment),
    ("dot_operands", plan_operands),
    ("tile_loads", plan_tile_loads),
    ("ring_copies", plan_ring_copies),
    ("prefetch", plan_prefetch),
    ("walk_ring", plan_walk_rings),
    ("walk_loads", hoist_walk_loads),
    ("ring_tma", plan_ring_tma),
    ("recompute_index", recompute_index),
    ("store_tma", plan_store_tma),
    ("tc_instr", record_instructions),
    ("accesses", plan_accesses),
    ("thread_order", order_threads),
    ("persistent", plan_persistent),
    ("smem", plan_shared_memory),
    ("dot_stores", claim_dot_stores),
    ("occupancy", plan_occupancy),
)


def run_passes(fn, options):
    from ..ir.printer import format_function
    from ..options import flags
    for name, p in PASSES:
        fn = p(fn, options) or fn
        if flags.debug_level >= 2:
            print(f"// ===== newt IR after pass {name}: {fn.name}\n{format_function(fn)}",
                  file=sys.stderr)
    return fn
