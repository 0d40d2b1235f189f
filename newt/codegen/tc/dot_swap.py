"""Codegen of a swapped dot (plan.swap): C^T = B^T A^T on wgmma, for tf32 tiles that arrive by TMA.

Where it sits: called by dot_ring.py's `_consume` for a TMA ring whose dot the dot-TMA pass
marked swapped (newt/passes/tc/dot_tma.py). Why swapped: wgmma reads a 4-byte operand from shared
memory only K-major, and a TMA box of B ([K][N], N contiguous) lands N-major. Transposing B on
its way in costs a register round trip per element (the cp.async ring's 4-byte transposed
copies). Swapped, nothing is transposed:

    wgmma B operand   = A's tile ([M][K], K-major, as the box wrote it): N' = M columns
    wgmma A operand   = B^T from registers: lane (g, t) of warp w reads B[k][n] for k = t, t+4
                        of each 8-deep k-step and the two columns n of its fragment rows g, g+8,
                        which SwappedAccLayout.perm makes adjacent: one 8-byte ld.shared per k
    accumulator       = C^T in SwappedAccLayout (dot_acc_out stages it back to C's layout)

Fragments are loaded before a wgmma fence (wgmma may not read registers written after it),
and an in-flight wgmma reads its A registers until it completes. So the tile's k-steps go in
two halves with their own fragment registers X and Y, each half one commit group:

    wait_group 1 (the last tile's first half retired)   load X   fence   wgmma half 1   commit
    wait_group 1 (the last tile's second half retired)  load Y   fence   wgmma half 2   commit

Each load overwrites registers whose wgmma has retired while the other half keeps the tensor
cores busy. X is read again (an empty asm) after the second half's issue: X and Y are then
alive together, so the compiler cannot give them the same registers. After the tile, the
last one is retired, as the ring expects (codegen/tc/dot_tma.py releases its stage).
"""
from __future__ import annotations

from .dot_ptx import add_helpers
from .mma import b_tile_layout, b_tile_offset, desc_base, desc_plus, wgmma_rs_instr
from .dot_ptx import WGMMA_HELPERS

_LDS64 = """NEWT_DEV void newt_lds64(newt_u32 addr, newt_u32* lo_hi) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\\n" : "=r"(lo_hi[0]), "=r"(lo_hi[1]) : "r"(addr));
}
"""


def wgmma_swapped(em, plan, lay, n, ta, tb, wait):
    """n (C^T's fragment) += B^T A^T per warpgroup; ta: A's K-major tile [M][K], tb: B's
    N-major tile [K][N] (both in the ring's stage). wait as emit_wgmma's."""
    inner = lay.inner                       # AccLayout(N, M): rows n, columns m
    M, K = plan.M, plan.K
    assert plan.kind == "tf32" and tb.sw == 128 and tb.rpl == 1, (plan, tb.sw)
    ksteps = K // 8
    add_helpers(em, ("newt_wgmma_helpers", WGMMA_HELPERS), ("newt_lds64", _LDS64))
    chunks = [(c0, min(256, M - c0)) for c0 in range(0, M, 256)]
    fns = {}
    for _, w in chunks:
        fns[w] = name = f"newt_wgmma_rs_tf32_n{w}"
        add_helpers(em, (name, wgmma_rs_instr("tf32", w, False, name)))
    wi = "((warp) & 3)"
    grp = f"((warp) >> 2) * {inner.rows_grp}" if inner.ngrp > 1 else "0"
    np_ = em.fresh("np")
    em.emit(f"const int {np_} = {grp} + {lay.perm(wi, '(lane >> 2)')};")
    addrs = []
    for ms in range(inner.nsub):
        col = f"({np_} + {ms * 64})"
        lo, hi = em.fresh("fb"), em.fresh("fb")
        em.emit(f"const u32 {lo} = {tb.elem_addr('(lane & 3)', col)}, "
                f"{hi} = {tb.elem_addr('(lane & 3) + 4', col)};")
        addrs.append((lo, hi))
    db0 = desc_base(em, ta.base, *b_tile_layout(ta, True), ta.sw)
    assert ksteps >= 2, "dot's K is at least 16: two 8-deep k-steps"
    half = ksteps // 2
    regs = []
    for ks in (range(0, half), range(half, ksteps)):
        fa = em.fresh("fa")
        regs.append(fa)
        em.emit("newt_wgmma_wait<1>();   // these registers' last wgmma retired")
        em.emit(f"u32 {fa}[{inner.nsub}][{len(ks)}][4];")
        for ms, (lo, hi) in enumerate(addrs):
            for j, kk in enumerate(ks):
                em.emit(f"newt_lds64({lo} + {kk * 8 * tb.sw}u, &{fa}[{ms}][{j}][0]);")
                em.emit(f"newt_lds64({hi} + {kk * 8 * tb.sw}u, &{fa}[{ms}][{j}][2]);")
        em.emit("newt_wgmma_fence();")
        for j, kk in enumerate(ks):
            for ms in range(inner.nsub):
                for c0, w in chunks:
                    db = desc_plus(db0, b_tile_offset(ta, True, c0, kk))
                    em.emit(f"{fns[w]}(&{n}[{ms * (M // 2) + c0 // 2}], {fa}[{ms}][{j}], "
                            f"{db}, 1);")
        em.emit("newt_wgmma_commit();")
    add_helpers(em, ("newt_keep_u32", _KEEP))
    em.emit("#pragma unroll")
    with em.scope(f"for (int i = 0; i < {inner.nsub * half * 4}; ++i)"):
        em.emit(f"newt_keep_u32((&{regs[0]}[0][0][0])[i]);   // X alive with Y: other registers")
    if wait is not None and wait < 1:
        em.emit(f"newt_wgmma_wait<{wait}>();")


_KEEP = """NT_INLINE void newt_keep_u32(unsigned x) {
#ifdef __CUDA_ARCH__
  asm volatile("" :: "r"(x));
#endif
}
"""
