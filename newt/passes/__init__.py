"""Passes: IR -> IR decisions, run in order after the frontend and before codegen.

    masks        masks the value ranges prove all-true are dropped (masks.py)
    scaled_reduce max / min of a block times a positive constant: the reduction first
                 (scaled_reduce.py)
    dot_pipeline loads that feed only a dot go through an asynchronous shared-memory ring (dot_pipeline.py)
    wide_index   64-bit offsets for tensors of 2**31+ elements (wide_index.py)
    layout       a register layout for every block value; how shape ops move data (layout.py)
    dot_rows     dot results' row statistics and the next dot's A operand stay in the
                 fragment layout; loop-invariant A tiles staged once (dot_rows.py)
    store_tma    a dot epilogue's masked store of a TMA-ring dot as TMA boxes (store_tma.py)
    accesses     each block load's and store's vector accesses: their groups tested at run
                 time or proven, addressed by immediate offsets or index math (accesses.py)
    smem         reduction plans and the shared-memory scratch arena (smem.py)
    persistent   a TMA-ring matmul as one CTA per SM looping over program ids (persistent.py)
    occupancy    the blocks per SM asked of ptxas (smem.py)

Each pass records its decisions in Value.attrs / Op.attrs / Function.attrs, so the printed IR
(NEWT_DEBUG=1) shows every choice codegen will follow.
"""
from __future__ import annotations

from .accesses import plan_accesses
from .dot_pipeline import pipeline_dots
from .dot_rows import fuse_dot_rows
from .layout import assign_layouts
from .masks import drop_true_masks
from .persistent import plan_persistent
from .scaled_reduce import scale_reductions
from .smem import plan_occupancy, plan_shared_memory
from .store_tma import plan_store_tma
from .wide_index import mark_wide_indices

PASSES = (
    ("masks", drop_true_masks),
    ("scaled_reduce", scale_reductions),
    ("dot_pipeline", pipeline_dots),
    ("wide_index", mark_wide_indices),
    ("layout", assign_layouts),
    ("dot_rows", fuse_dot_rows),
    ("store_tma", plan_store_tma),
    ("accesses", plan_accesses),
    ("smem", plan_shared_memory),
    ("persistent", plan_persistent),
    ("occupancy", plan_occupancy),
)


def run_passes(fn, options):
    for _, p in PASSES:
        fn = p(fn, options) or fn
    return fn
