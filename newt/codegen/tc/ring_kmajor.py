"""The cp.async ring's copies of a B operand contiguous along K (x @ W.T, B given column-major)
into its K-major tile ([N][K], codegen/tc/dot.py's Tile), 16 bytes at a time.

Where it sits: called by dot_ring.py's `_ring_load` for a ring load with attrs["ring_copy"] =
"k_runs" (decided by passes/tc/ring_copies.py: a K-major B tile, a pointer block statically
contiguous along K, 1- and 2-byte elements). The pointer block's own layout runs along N (a
[K, N] block's rows), so copying by it gathers single elements with synchronous loads; here
each thread takes whole
16-byte runs of consecutive k of one column n instead, with the address and mask recomputed
from their index math (shapes.value_at: the base must be index-computable), adjacent threads on
adjacent runs (coalesced). A run that is not 16-byte aligned or is partly masked is gathered
element by element into the same chunk.
"""
from __future__ import annotations

from ..shapes import value_at


def kmajor_copies(em, mask, tile, base, o, R: int, C: int, es: int):
    """Copy the [R = K, C = N] block at `base + o` into K-major `tile` by 16-byte runs of k."""
    epc = 16 // es
    per_n = R // epc
    total, T = C * per_n, em.T
    u = {1: "u8", 2: "u16"}[es]
    # rolled: unrolled, NVRTC keeps every run's loop-invariant address terms in registers
    em.emit("#pragma unroll 1")
    with em.scope(f"for (int g = 0; g < {-(-total // T)}; ++g)"):
        em.emit(f"const int ch = g * {T} + tid;")
        if total % T:
            em.emit(f"if (ch >= {total}) continue;")
        em.emit(f"const int nn = ch / {per_n}, kq = (ch % {per_n}) * {epc};")
        em.emit(f"const u32 dst = {tile.elem_addr('nn', 'kq')};")
        em.emit(f"const {em.ctype(base)} p0 = {value_at(em, base, ['kq', 'nn'])} + {o};")
        ms = [value_at(em, mask, [f"(kq + {j})", "nn"]) for j in range(epc)] if mask else []
        conds = ["(((u64)(p0)) & 15) == 0"] + ms
        with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
            em.emit("newt_cp_async16(dst, p0, 16);")
        with em.scope("else"):
            em.emit(f"union {{ uint4 v; {u} e[{epc}]; }} t;")
            for j in range(epc):
                rd = f"*(const {u}*)(p0 + {j})"
                em.emit(f"t.e[{j}] = {f'({ms[j]}) ? {rd} : ({u})0' if ms else rd};")
            em.emit("newt_st_shared_v4(dst, t.v);")
