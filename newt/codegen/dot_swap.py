"""Codegen of a swapped dot (plan.swap): C^T = B^T A^T on wgmma, for tf32 tiles that arrive by TMA.

Where it sits: called by dot_ring.py's `_consume` for a TMA ring whose dot the dot-TMA pass
marked swapped (newt/passes/dot_tma.py). Why swapped: wgmma reads a 4-byte operand from shared
memory only K-major, and a TMA box of B ([K][N], N contiguous) lands N-major. Transposing B on
its way in costs a register round trip per element (the cp.async ring's 4-byte transposed
copies). Swapped, nothing is transposed:

    wgmma B operand   = A's tile ([M][K], K-major, as the box wrote it): N' = M columns
    wgmma A operand   = B^T from registers: lane (g, t) of warp w reads B[k][n] for k = t, t+4
                        of each 8-deep k-step and the two columns n of its fragment rows g, g+8,
                        which SwappedAccLayout.perm makes adjacent: one 8-byte ld.shared per k
    accumulator       = C^T in SwappedAccLayout (dot_acc_out stages it back to C's layout)

Every fragment of the tile is loaded before the wgmma fence (wgmma may not read registers
written after it), and after the wgmma of the tile before has retired (wait_group 0): an
in-flight wgmma reads its A registers until it completes, and the compiler is free to give
this tile's fragments the registers of the last one's. The ring's postcondition is unchanged
(the tile before is retired, this one in flight); with two warpgroups per CTA the other
warpgroup's wgmma keeps the tensor cores busy while this one loads. Loads of k-step kk sit kk * 8 rows below those of k-step 0; a row is one
128-byte swizzle row and the swizzle repeats every 8 rows, so their addresses differ by a
constant: two addresses per thread and sub-tile, offsets for the rest.
"""
from __future__ import annotations

from .dot import _b_layout, _b_off, _commit_wait, _desc_base, _helpers, _plus, wgmma_rs_instr
from .dot_ptx import WGMMA_HELPERS

_LDS64 = """NEWT_DEV void newt_lds64(newt_u32 addr, newt_u32* lo_hi) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\\n" : "=r"(lo_hi[0]), "=r"(lo_hi[1]) : "r"(addr));
}
"""


def wgmma_swapped(em, plan, lay, n, ta, tb, wait):
    """n (C^T's fragment) += B^T A^T per warpgroup; ta: A's K-major tile [M][K], tb: B's
    N-major tile [K][N] (both in the ring's stage). wait as _wgmma's."""
    inner = lay.inner                       # AccLayout(N, M): rows n, columns m
    M, K = plan.M, plan.K
    assert plan.kind == "tf32" and tb.sw == 128 and tb.rpl == 1, (plan, tb.sw)
    ksteps = K // 8
    _helpers(em, ("newt_wgmma_helpers", WGMMA_HELPERS), ("newt_lds64", _LDS64))
    chunks = [(c0, min(256, M - c0)) for c0 in range(0, M, 256)]
    fns = {}
    for _, w in chunks:
        fns[w] = name = f"newt_wgmma_rs_tf32_n{w}"
        _helpers(em, (name, wgmma_rs_instr("tf32", w, False, name)))
    em.emit("newt_wgmma_wait<0>();   // the last tile's wgmma still reads its A registers")
    fa = em.fresh("fa")
    em.emit(f"u32 {fa}[{inner.nsub}][{ksteps}][4];")
    wi = "((warp) & 3)"
    grp = f"((warp) >> 2) * {inner.rows_grp}" if inner.ngrp > 1 else "0"
    np_ = em.fresh("np")
    em.emit(f"const int {np_} = {grp} + {lay.perm(wi, '(lane >> 2)')};")
    for ms in range(inner.nsub):
        col = f"({np_} + {ms * 64})"
        lo, hi = em.fresh("fb"), em.fresh("fb")
        em.emit(f"const u32 {lo} = {tb.elem_addr('(lane & 3)', col)}, "
                f"{hi} = {tb.elem_addr('(lane & 3) + 4', col)};")
        for kk in range(ksteps):
            em.emit(f"newt_lds64({lo} + {kk * 8 * tb.sw}u, &{fa}[{ms}][{kk}][0]);")
            em.emit(f"newt_lds64({hi} + {kk * 8 * tb.sw}u, &{fa}[{ms}][{kk}][2]);")
    em.emit("newt_wgmma_fence();")
    db0 = _desc_base(em, ta.base, *_b_layout(ta, True), ta.sw)
    for kk in range(ksteps):
        for ms in range(inner.nsub):
            for c0, w in chunks:
                db = _plus(db0, _b_off(ta, True, c0, kk))
                em.emit(f"{fns[w]}(&{n}[{ms * (M // 2) + c0 // 2}], {fa}[{ms}][{kk}], {db}, 1);")
    _commit_wait(em, None, wait)
