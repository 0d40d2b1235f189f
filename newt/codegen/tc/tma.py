"""TMA (cp.async.bulk.tensor) and mbarrier building blocks for the sm_90a matmul.

Where it sits: codegen, beside dot_ptx.py. The TMA rings (dot_tma.py, ring_tma.py) and the
epilogue's stores (store_tma.py) paste TMA_HELPERS and issue one copy per box of
newt/ir/schedule.py's `tile_boxes`; the host builds the matching tensor maps with
newt/runtime/tensormap.py from the same TmaBox, so the box size and the swizzle the kernel
assumes are the ones the map encodes.

Shared-memory format written by a box (PTX ISA, "Tensor copy: swizzling modes"): the box's rows
of `swizzle` bytes are stored one after another; inside each 1024/512/256-byte pattern, 16-byte
chunk c of a row lands at chunk c ^ (address bits 7..) -- for a box at a 1024-byte aligned
address that is exactly dot.py's Tile format (rows of SW bytes, chunk c of row r at
c ^ (r / (128/SW)) % (SW/16)), which is also the wgmma descriptor's swizzle mode. A tile wider
than one swizzle row is several boxes, one per 128-byte panel.

Completion: one elected thread arms the stage's "full" mbarrier with the stage's byte count
(mbarrier.arrive.expect_tx) and issues the boxes; each box's bytes complete on that barrier
(complete_tx); consumers wait for the barrier's phase with try_wait.parity. Out-of-bounds box
elements are filled with zeros and still count towards the transaction bytes, so masked tails
need no code.
"""
from __future__ import annotations

TMA_HELPERS = r"""
// A CUtensorMap as a kernel parameter (128 bytes, 64-byte aligned): passed by value,
// __grid_constant__, its generic address is what cp.async.bulk.tensor takes.
struct __align__(64) newt_tmap { newt_u64 opaque[16]; };
NEWT_DEV void newt_mbar_init(newt_u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// barrier initialisation visible to the async proxy (the copy engine completes on it)
NEWT_DEV void newt_fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
NEWT_DEV void newt_mbar_arrive(newt_u32 bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n"
               :: "r"(bar) : "memory");
}
NEWT_DEV void newt_mbar_expect_tx(newt_u32 bar, newt_u32 bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
               :: "r"(bar), "r"(bytes) : "memory");
}
NEWT_DEV bool newt_mbar_try_wait(newt_u32 bar, newt_u32 parity) {
  newt_u32 ok;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  return ok != 0;
}
// wait until the barrier's phase of parity `parity` has completed
NEWT_DEV void newt_mbar_wait(newt_u32 bar, newt_u32 parity) {
  while (!newt_mbar_try_wait(bar, parity)) {}
}
// fetch a map into the TMA unit's descriptor cache ahead of its first copy (a hint: the first
// copy of every CTA otherwise waits for the 128-byte descriptor itself)
NEWT_DEV void newt_tma_prefetch(const newt_tmap* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"((newt_u64)map) : "memory");
}
// box at coordinates (c0 innermost, c1) of the map's tensor -> shared memory at dst; its bytes
// complete on the mbarrier at bar
NEWT_DEV void newt_tma_load_2d(newt_u32 dst, const newt_tmap* map, int c0, int c1, newt_u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"((newt_u64)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
"""


def load_nd_helper(rank: int) -> str:
    """cp.async.bulk.tensor of a rank-D box (the outer dimensions: one index each)."""
    cs = ", ".join(f"int c{i}" for i in range(rank))
    regs = ", ".join(f"%{i + 2}" for i in range(rank))
    ins = ", ".join(f'"r"(c{i})' for i in range(rank))
    return (f"NEWT_DEV void newt_tma_load_{rank}d(newt_u32 dst, const newt_tmap* map, {cs}, "
            f"newt_u32 bar) {{\n"
            f'  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.'
            f'mbarrier::complete_tx::bytes"\n'
            f'               " [%0], [%1, {{{regs}}}], [%{rank + 2}];\\n"\n'
            f'               :: "r"(dst), "l"((newt_u64)map), {ins}, "r"(bar) : "memory");\n}}\n')

