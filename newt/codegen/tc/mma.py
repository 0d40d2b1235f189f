"""The tensor-core instructions: wgmma.mma_async (sm_90a) and ldmatrix + mma.sync (sm_80+).

Where it sits: codegen, called by dot.py (the synchronous dot), dot_ring.py and dot_loop.py
(ring and rotated loops) and dot_swap.py. This is where a dot's wgmma / mma.sync instructions
are emitted: `emit_wgmma` (A and B from shared memory, by descriptors), `emit_wgmma_rs` (A from
registers), `emit_mma_sync` (per warp: ldmatrix A and B, mma.sync m16n8k{16,8,32}). The tiles
and their swizzles are dot.py's `Tile`; the instruction strings are dot_ptx.py's.
"""
from __future__ import annotations

from ...ir.schedule import FP8_KINDS
from .dot_ptx import MMA_SYNC_HELPERS, WGMMA_HELPERS, add_helpers, mma_sync_instr, wgmma_instr

_SWZ_MODE = {128: 1, 64: 2, 32: 3}


# the warp index read through a shuffle from lane 0: ptxas then knows it is the same in every
# lane and keeps what is computed from it (the A descriptor) in uniform registers, instead of
# moving it into them (R2UR) before every wgmma
_WARP_UNIFORM = """NT_INLINE int newt_warp_uniform() {
#ifdef __CUDA_ARCH__
  return __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 5), 0);
#else
  return (int)(threadIdx.x >> 5);
#endif
}
"""


def b_tile_layout(tb, b_kmajor: bool):
    """(leading, stride byte offsets) of B's descriptors. A K-major tile holds 32-byte k-slices
    side by side in swizzle rows of tb.sw bytes; an MN-major tile is panels of tb.sw-byte rows,
    one row per k."""
    return (16 if b_kmajor else tb.rows * tb.sw), 8 * tb.sw


def b_tile_offset(tb, b_kmajor: bool, c0: int, kk) -> str:
    """Byte offset from B's base of its 16-deep k-step `kk` (a C expression or an int) for the
    columns from c0."""
    if b_kmajor:
        return (f"(u32)(({kk} * 32) / {tb.sw}) * {tb.rows * tb.sw}u + {c0 * tb.sw}u + "
                f"(u32)(({kk} * 32) % {tb.sw})")
    panel = (c0 * tb.esize // tb.sw) * tb.rows * tb.sw
    return f"{panel}u + (u32)({kk} * {32 // tb.esize}) * {tb.sw}u"


def b_slice_base(em, tb, b_kmajor, lay) -> str:
    """C expression: the address of the first column of the warp's column slice in B's tile
    (the tile's base when the accumulator does not split N: AccLayout's C). The column group
    is uniform in a warpgroup (newt_warp_uniform). A slice starting inside a swizzle panel
    (MN-major) starts its descriptor inside the panel's first row, as the k-steps of a K-major
    tile do (b_tile_offset)."""
    if lay.C == 1:
        return tb.base
    add_helpers(em, ("newt_warp_uniform", _WARP_UNIFORM))
    c0 = f"(u32)(newt_warp_uniform() / {lay.Wr}) * {lay.Nw}u"
    if b_kmajor:
        return f"({tb.base} + {c0} * {tb.sw}u)"
    per = tb.sw // tb.esize
    return (f"({tb.base} + (({c0}) / {per}u) * {tb.rows * tb.sw}u + (({c0}) % {per}u) * "
            f"{tb.esize}u)")


def desc_base(em, addr, lbo, sbo, sw) -> str:
    """Declare the descriptor of shared-memory address `addr`; the descriptor of addr + off is
    then `name + (off >> 4)` (shared addresses stay below 2^18, so the 14-bit address field
    never carries): one add per wgmma instead of the whole packing."""
    d = em.fresh("desc")
    em.emit(f"const newt_u64 {d} = newt_wgmma_desc2({addr}, {lbo}, {sbo}, {_SWZ_MODE[sw]});")
    return d


def desc_plus(desc, off) -> str:
    return f"{desc} + (newt_u64)(({off}) >> 4)"


def _wgmma_fns(em, plan, b_kmajor, prefix, instr, widest=256, N=None):
    """The N columns (plan.N, or a column slice's) in chunks of at most `widest` (wgmma's widest
    n: 256) and, per chunk width, the name of the device function issuing that wgmma (emitted
    once per kernel)."""
    N = plan.N if N is None else N
    chunks = [(c0, min(widest, N - c0)) for c0 in range(0, N, widest)]
    fns = {}
    # the name says B's order too: one kernel can hold both (attention's backward: K^T loaded
    # transposed, V^T as stored), and the instruction's trans-b operand differs between them
    order = "" if b_kmajor else "_tb"
    for _, w in chunks:
        fns[w] = name = f"{prefix}_{plan.kind}_n{w}{order}"
        add_helpers(em, ("newt_wgmma_helpers", WGMMA_HELPERS),
                 (name, instr(plan.kind, w, not b_kmajor, name)))
    return chunks, fns


def a_tile_desc(em, ta, lay) -> str:
    """The descriptor of the warpgroup's first A row (k-step 0) in tile ta, from the uniform
    warp index (_WARP_UNIFORM)."""
    add_helpers(em, ("newt_warp_uniform", _WARP_UNIFORM))
    warp = "newt_warp_uniform()"
    if lay.C > 1:       # (the warpgroup's place within its column group)
        warp = f"({warp} % {lay.Wr})"
    return (f"newt_wgmma_desc2({ta.base} + (u32)(({warp} / 4) * {lay.rows_grp}) * {ta.sw}u, 16, "
            f"{8 * ta.sw}, {_SWZ_MODE[ta.sw]})")


def emit_wgmma(em, plan, lay, n, ta, tb, b_kmajor, between=None, wait=0, zero=False, a_desc=None,
               promote=False):
    """acc n += A B per warpgroup from two shared-memory tiles (n = A B with zero: the first
    k-step ignores n's values); `between()` emits code to run while the mma is in flight;
    wait=None leaves it in flight; a_desc: a declared descriptor of A's first row. promote
    (an fp8 dot's attrs["fp8_promote"], passes/tc/canonical.py): the 8-bit products summed
    apart and added to n in fp32, all retired on return (_emit_promoted; the tensor cores' own
    fp8 accumulation keeps fewer bits than fp32)."""
    if promote and plan.kind in FP8_KINDS and not zero:
        return _emit_promoted(em, plan, lay, n, ta, tb, b_kmajor, between, a_desc)
    scale = "kk != 0" if zero else "1"
    N = lay.Nw                # (the warpgroup's column slice: all of N unless split)
    chunks, fns = _wgmma_fns(em, plan, b_kmajor, "newt_wgmma", wgmma_instr, N=N)
    ksteps = plan.K * plan.esize // 32
    em.emit("newt_wgmma_fence();")
    # k-steps outermost: consecutive wgmmas write different accumulators (sub-tiles, column
    # chunks), so none waits for the one before it to finish its accumulation
    da0, db0 = _descs(em, ta, tb, lay, b_kmajor, a_desc)
    em.emit("#pragma unroll")
    with em.scope(f"for (int kk = 0; kk < {ksteps}; ++kk)"):
        for ms in range(lay.nsub):
            for c0, w in chunks:
                da = desc_plus(da0, f"(u32)((kk * 32) / {ta.sw}) * {ta.rows * ta.sw}u + "
                                f"{ms * 64 * ta.sw}u + (u32)((kk * 32) % {ta.sw})")
                db = desc_plus(db0, b_tile_offset(tb, b_kmajor, c0, "kk"))
                off = ms * (N // 2) + c0 // 2
                em.emit(f"{fns[w]}(&{n}[{off}], {da}, {db}, {scale});")
    _commit_wait(em, between, wait)


def _descs(em, ta, tb, lay, b_kmajor, a_desc):
    """The descriptors of the warpgroup's first A row (a_desc where declared) and of B."""
    da0 = a_desc
    if da0 is None:
        da0 = em.fresh("desc")
        em.emit(f"const newt_u64 {da0} = {a_tile_desc(em, ta, lay)};")
    return da0, desc_base(em, b_slice_base(em, tb, b_kmajor, lay), *b_tile_layout(tb, b_kmajor),
                          tb.sw)


def _emit_promoted(em, plan, lay, n, ta, tb, b_kmajor, between, a_desc):
    """acc n += A B with each piece of at most 128 columns of a sub-tile summed over the k-step
    into a fresh block by 8-bit wgmma, retired, then added to n in fp32. Pieces of 128 columns
    keep the extra registers at 64 a thread, beside a 128x256 accumulator."""
    chunks, fns = _wgmma_fns(em, plan, b_kmajor, "newt_wgmma", wgmma_instr, widest=128,
                             N=lay.Nw)
    ksteps = plan.K * plan.esize // 32
    da0, db0 = _descs(em, ta, tb, lay, b_kmajor, a_desc)
    for ms in range(lay.nsub):
        for c0, w in chunks:
            part = em.fresh("fp8_part")
            em.emit(f"float {part}[{w // 2}];")
            em.emit("newt_wgmma_fence();")
            em.emit("#pragma unroll")
            with em.scope(f"for (int kk = 0; kk < {ksteps}; ++kk)"):
                da = desc_plus(da0, f"(u32)((kk * 32) / {ta.sw}) * {ta.rows * ta.sw}u + "
                                f"{ms * 64 * ta.sw}u + (u32)((kk * 32) % {ta.sw})")
                db = desc_plus(db0, b_tile_offset(tb, b_kmajor, c0, "kk"))
                em.emit(f"{fns[w]}(&{part}[0], {da}, {db}, kk != 0);")
            _commit_wait(em, between, 0)
            between = None
            off = ms * (lay.Nw // 2) + c0 // 2
            with em.slots(w // 2) as s:
                em.emit(f"{n}[{off} + {s}] += {part}[{s}];")


def _commit_wait(em, between, wait):
    em.emit("newt_wgmma_commit();")
    if between is not None:
        between()
    if wait is not None:
        em.emit(f"newt_wgmma_wait<{wait}>();")


FRAG_PACK = """NT_INLINE u32 newt_frag_pack_{kind}(float lo, float hi) {{
#ifdef __CUDA_ARCH__
  u32 r; asm("cvt.rn.{kind}x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
#else
  return (u32){cvt}(lo) | ((u32){cvt}(hi) << 16);
#endif
}}
"""


# two fp32 -> two 8-bit floats in the low 16 bits (the second operand goes to the low byte)
FRAG_PACK8 = """NT_INLINE u32 newt_frag_pack_{kind}(float lo, float hi) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u16 r; asm("cvt.rn.satfinite.{kind}x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo)); return r;
#else
  return {cvt}(lo) | ({cvt}(hi) << 8);
#endif
}}
"""


def _a_frag_regs(em, a, K):
    """The A fragment of k-step kk (a C loop variable) from a 16-bit value in AccLayout(M, K):
    C-fragment slots 8kk..8kk+7 of sub-tile ms are a0a1, a2a3, a4a5, a6a7 of the m16n8k16 A
    fragment (rows l/4, l/4 + 8; columns 2(l%4) + {0, 1}, + 8), packed in pairs."""
    kind = "f16" if a.dtype.name == "float16" else "bf16"
    pack = f"newt_frag_pack_{kind}"
    add_helpers(em, (pack, FRAG_PACK.format(kind=kind, cvt="nt_f2h" if kind == "f16" else "nt_f2b")))
    base = f"ms * {K // 2} + kk * 8"
    for j in range(4):
        em.emit(f"fa[{j}] = {pack}({em.at(a, f'{base} + {2 * j}')}, "
                f"{em.at(a, f'{base} + {2 * j + 1}')});")


def wgmma_rs_instr(kind: str, n: int, trans_b: bool, name: str) -> str:
    """One `wgmma.mma_async.m64n{n}k16` (k8 for tf32) with A from registers (four registers per
    thread, the m16n8k16 / m16n8k8 A fragment of the thread's warp: rows 16 * (warp % 4) + ...)
    and B from a shared-memory descriptor, into float d[n/2]. tf32 B is K-major (no transpose
    operand)."""
    nreg = n // 2
    regs = ",".join(f"%{i}" for i in range(nreg))
    a0, db, sc = nreg, nreg + 4, nreg + 5
    outs = ", ".join(f"\"+f\"(d[{i}])" for i in range(nreg))
    k, tail = (8, "p, 1, 1") if kind == "tf32" else (16, f"p, 1, 1, {int(trans_b)}")
    return (
        f"NEWT_DEV void {name}(float* d, const newt_u32* a, newt_u64 db, int scale_d) {{\n"
        "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + str(sc) + ", 0;\\n"
        f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{kind}.{kind} "
        f"{{{regs}}}, {{%{a0},%{a0 + 1},%{a0 + 2},%{a0 + 3}}}, %{db}, {tail};"
        "\\n}\\n\"\n"
        f"    : {outs}\n"
        "    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(scale_d));\n"
        "}\n")


def emit_wgmma_rs(em, plan, lay, n, a, tb, b_kmajor, between=None, wait=0):
    """P @ V on sm_90a: A (a 16-bit value in the accumulator layout) from registers. Every
    fragment is packed before the fence: wgmma may not read registers written after it."""
    N, K = plan.N, plan.K
    assert lay.C == 1, "A from registers needs whole rows per warp (passes/tc/dot_rows.py)"
    chunks, fns = _wgmma_fns(em, plan, b_kmajor, "newt_wgmma_rs", wgmma_rs_instr)
    kind = "f16" if a.dtype.name == "float16" else "bf16"
    pack = f"newt_frag_pack_{kind}"
    add_helpers(em, (pack, FRAG_PACK.format(kind=kind, cvt="nt_f2h" if kind == "f16" else "nt_f2b")))
    ksteps = K // 16
    pa = em.fresh("pa")
    em.emit(f"u32 {pa}[{lay.nsub}][{ksteps}][4];")
    for ms in range(lay.nsub):
        for kk in range(ksteps):
            base = ms * (K // 2) + kk * 8
            for j in range(4):
                em.emit(f"{pa}[{ms}][{kk}][{j}] = {pack}({em.at(a, base + 2 * j)}, "
                        f"{em.at(a, base + 2 * j + 1)});")
    em.emit("newt_wgmma_fence();")
    db0 = desc_base(em, tb.base, *b_tile_layout(tb, b_kmajor), tb.sw)
    for ms in range(lay.nsub):
        for c0, w in chunks:
            for kk in range(ksteps):
                db = desc_plus(db0, b_tile_offset(tb, b_kmajor, c0, kk))
                em.emit(f"{fns[w]}(&{n}[{ms * (N // 2) + c0 // 2}], {pa}[{ms}][{kk}], {db}, 1);")
    _commit_wait(em, between, wait)


def emit_mma_sync(em, plan, lay, n, ta, tb, b_kmajor, a_regs=None, rolled=False):
    N = lay.Nw                # (the warp's column slice: all of N unless split)
    add_helpers(em, ("newt_mma_sync_helpers", MMA_SYNC_HELPERS),
             (f"newt_mma_{plan.kind}", mma_sync_instr(plan.kind)))
    ki = 32 // plan.esize
    ksteps = plan.K // ki
    g, wi, c0 = lay.warp_terms("warp")
    mma_row = em.fresh("mma_row")
    em.emit(f"const int {mma_row} = {g} * {lay.rows_grp} + {wi} * 16;")
    # B's columns of the warp's slice (AccLayout's column groups; from 0 unless split)
    brow0, chunk0 = "", ""
    if lay.C > 1:
        assert a_regs is None, "A from registers needs whole rows per warp"
        col = em.fresh("mma_col")
        em.emit(f"const int {col} = {c0};")
        brow0, chunk0 = f"{col} + ", f"{col} / 8 + "
    with em.slots(lay.nsub, "ms"):
        # with 128+ accumulator registers (this dot's, or those its loop carries: `rolled`,
        # passes/tc/fragment_epilogue.py), unrolled k-steps prefetch fragments of the next
        # step and push live values out to local memory; rolled, nothing spills
        # (A from registers needs constant slot indices: always unrolled)
        unroll = (lay.nslots < 128 and not rolled) or a_regs is not None
        em.emit("#pragma unroll" if unroll else "#pragma unroll 1")
        with em.scope(f"for (int kk = 0; kk < {ksteps}; ++kk)"):
            em.emit("u32 fa[4];")
            if a_regs is not None:
                _a_frag_regs(em, a_regs, plan.K)
            else:
                arow = f"{mma_row} + ms * {lay.sub} + (lane % 8) + ((lane / 8) & 1) * 8"
                em.emit(f"newt_ldmatrix_x4({ta.chunk_addr(arow, 'kk * 2 + lane / 16')}, fa);")
            # B fragments of 16 columns at a time, used at once: 4 live registers instead of
            # N/4 (at N = 256 the whole row of fragments spilled next to the accumulators)
            em.emit("#pragma unroll")
            with em.scope(f"for (int nj = 0; nj < {N // 16}; ++nj)"):
                em.emit("u32 t4[4];")
                if b_kmajor:
                    brow = f"{brow0}nj * 16 + (lane % 8) + (lane / 16) * 8"
                    em.emit(f"newt_ldmatrix_x4({tb.chunk_addr(brow, 'kk * 2 + ((lane / 8) & 1)')}, t4);")
                else:
                    brow = f"kk * {ki} + (lane % 8) + ((lane / 8) & 1) * 8"
                    chunk = f"{chunk0}nj * 2 + lane / 16"
                    em.emit(f"newt_ldmatrix_x4_trans({tb.chunk_addr(brow, chunk)}, t4);")
                em.emit(f"newt_mma_{plan.kind}(&{n}[ms * {N // 2} + nj * 8], fa, &t4[0]);")
                em.emit(f"newt_mma_{plan.kind}(&{n}[ms * {N // 2} + nj * 8 + 4], fa, &t4[2]);")
