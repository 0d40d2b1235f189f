"""Ring copies: how a cp.async ring load of a K-major B tile copies into shared memory.

Where it sits: the `ring_copies` entry of PASSES, after the layout, icomp and run passes (it
reads the pointer block's index-computable facts) and after dot_tma (a ring filled by TMA boxes
copies nothing itself). Consumes the `dot_ring_load` ops of dot_pipeline.py's rings; records

    op.attrs["ring_copy"] = "k_runs"

on the B load of a ring whose B tile is K-major ([N][K], RingPlan.b_kmajor) when its pointer
block is statically contiguous along K and not along N (B given column-major: x @ W.T through
strides), its elements are 1 or 2 bytes, the pointer is a loop-invariant index-computable block
plus a carried scalar offset (ir/pointers.py split_ptr) and the mask, if any, is
index-computable. Codegen (codegen/tc/ring_kmajor.py) then copies 16-byte runs of consecutive k
of one column n, each address and mask bit recomputed from index math, instead of following the
pointer block's layout, which runs along N and would gather the tile one element at a time.
4-byte B tiles have their own transposed copies (codegen/tc/dot_ring.py).
"""
from __future__ import annotations

from ...ir.pointers import k_contiguous, split_ptr


def takes_k_runs(op) -> bool:
    """Whether ring load `op` copies its K-major B tile by 16-byte runs of k."""
    ring = op.attrs.get("ring")
    if ring is None or ring.tma is not None or op.attrs.get("ring_role") != "b" \
            or not ring.b_kmajor:
        return False
    ptr = op.operands[0]
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    heads = split_ptr(ptr, op.parent)
    return (heads is not None and op.result.dtype.bits in (8, 16) and k_contiguous(ptr)
            and bool(heads[0].attrs.get("icomp"))
            and (mask is None or bool(mask.attrs.get("icomp"))))


def plan_ring_copies(fn, options):
    for op in fn.walk():
        if op.opcode == "dot_ring_load" and takes_k_runs(op):
            op.attrs["ring_copy"] = "k_runs"
    return fn
