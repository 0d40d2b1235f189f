"""Tensor-core building blocks as CUDA C++ device helpers (inline PTX), shared by both dot paths.

Where it sits: codegen. The dot handlers (dot.py: ldmatrix + mma.sync on sm_80/sm_89,
wgmma.mma_async on sm_90a; dot_ring.py, dot_loads.py) paste `PRELUDE` once into a translation
unit and call these helpers from the code they generate. Nothing here decides anything: tile
shapes, stage counts and swizzles are chosen by the passes and passed as constants.

Why inline PTX and raw bits: no CUDA headers are needed (NVRTC compiles faster and the source is
self-contained), and the exact instruction is visible in the generated code.

The operand staging scheme used by both paths (the "deferred-consumption ring"):
  - every global tile the dot consumes is copied into shared memory with `cp.async` in 16-byte
    chunks; a chunk that is not "8 (or 4, or 16) consecutive, 16-byte aligned, fully in bounds"
    elements is gathered element by element instead (`ld` + `st.shared`), a chunk fully out of
    bounds is zero-filled by cp.async itself (src-size 0). This runtime check replaces static
    contiguity analysis (DESIGN.md) and makes any pointer block and any mask legal.
  - a tile's 16-byte chunks are XOR-swizzled by row inside 128-byte lines (see `swz`), which is
    both bank-conflict free for ldmatrix and exactly the hardware's 128B swizzle mode for wgmma.
"""

PRELUDE = r"""
#define NEWT_DEV __device__ __forceinline__
typedef unsigned short newt_u16;
typedef unsigned int newt_u32;
typedef unsigned long long newt_u64;

NEWT_DEV newt_u32 newt_smem_addr(const void* p) {
  return (newt_u32)__cvta_generic_to_shared(p);
}
// 16-byte asynchronous copy global -> shared; src_bytes = 0 zero-fills (masked-off chunk).
NEWT_DEV void newt_cp_async16(newt_u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
NEWT_DEV void newt_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> NEWT_DEV void newt_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
NEWT_DEV void newt_st_shared_v4(newt_u32 dst, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n"
               :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// Generic-proxy writes (cp.async, st.shared) must be fenced before the async proxy (wgmma,
// TMA) reads them; each writing thread fences, then the block barrier orders the rest.
NEWT_DEV void newt_fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// 16-byte chunk `c` of row `r` in a tile whose rows are `row_chunks` chunks long, swizzled:
// chunk index XOR (row mod 8) within each 128-byte line. For rows shorter than 128 bytes,
// consecutive rows share a line, so the row index is scaled down first.
NEWT_DEV newt_u32 newt_swz(int r, int c, int row_chunks) {
  int per_line = row_chunks >= 8 ? 1 : 8 / row_chunks;       // rows per 128-byte line
  int x = (r / per_line) & (row_chunks >= 8 ? 7 : row_chunks - 1);
  return (newt_u32)(r * row_chunks + (c ^ x)) * 16u;
}
// fp32 pair -> packed fp16x2 / bf16x2 (lo = first element), round to nearest even.
NEWT_DEV newt_u32 newt_pack_f16(float lo, float hi) {
  newt_u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
NEWT_DEV newt_u32 newt_pack_bf16(float lo, float hi) {
  newt_u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
NEWT_DEV float newt_f16_to_f32(newt_u16 h) {
  float f; asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h)); return f;
}
NEWT_DEV float newt_bf16_to_f32(newt_u16 h) { return __uint_as_float(((newt_u32)h) << 16); }
NEWT_DEV newt_u32 newt_f32_to_tf32(float f) {
  newt_u32 r; asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(f)); return r;
}
"""

# ldmatrix / mma.sync (sm_80+): fragments as arrays of 32-bit registers.
MMA_SYNC_HELPERS = r"""
NEWT_DEV void newt_ldmatrix_x4(newt_u32 addr, newt_u32* d) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(addr));
}
NEWT_DEV void newt_ldmatrix_x4_trans(newt_u32 addr, newt_u32* d) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(addr));
}
NEWT_DEV newt_u32 newt_lds_u32(newt_u32 addr) {
  newt_u32 v; asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr)); return v;
}
NEWT_DEV newt_u32 newt_lds_u8(newt_u32 addr) {
  newt_u32 v; asm volatile("ld.shared.u8 %0, [%1];\n" : "=r"(v) : "r"(addr)); return v;
}
"""


def mma_sync_instr(kind: str) -> str:
    """One `mma.sync` as a device function over (float|int) c[4], u32 a[4], u32 b[2].

    kind: "f16" | "bf16" (m16n8k16 -> f32), "tf32" (m16n8k8 -> f32), "s8" (m16n8k32 -> s32).
    """
    shape, types, acc_c, acc_t = {
        "f16": ("m16n8k16", "f32.f16.f16.f32", "f", "float"),
        "bf16": ("m16n8k16", "f32.bf16.bf16.f32", "f", "float"),
        "tf32": ("m16n8k8", "f32.tf32.tf32.f32", "f", "float"),
        "s8": ("m16n8k32", "s32.s8.s8.s32", "r", "int"),
    }[kind]
    return (
        f"NEWT_DEV void newt_mma_{kind}({acc_t}* c, const newt_u32* a, const newt_u32* b) {{\n"
        f"  asm volatile(\"mma.sync.aligned.{shape}.row.col.{types} "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
        f"    : \"+{acc_c}\"(c[0]), \"+{acc_c}\"(c[1]), \"+{acc_c}\"(c[2]), \"+{acc_c}\"(c[3])\n"
        "    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
        "}\n")


# wgmma (sm_90a): fences, group commit/wait (WGMMA_SYNC), shared-memory matrix descriptors
# (WGMMA_DESC: plain integer code, which the CPU emulator of the tests runs as it is).
WGMMA_SYNC = r"""
NEWT_DEV void newt_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
NEWT_DEV void newt_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> NEWT_DEV void newt_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
"""
WGMMA_DESC = r"""
// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1 in bits 62-63). Built at run
// time on purpose: NVRTC 13.0 was seen to crash on wgmma with compile-time-constant descriptors.
NEWT_DEV newt_u64 newt_wgmma_desc(newt_u32 saddr, newt_u32 lbo, newt_u32 sbo) {
  return (newt_u64)((saddr & 0x3FFFF) >> 4) | ((newt_u64)(lbo >> 4) << 16)
       | ((newt_u64)(sbo >> 4) << 32) | (1ull << 62);
}
// Same with the swizzle mode given: 1 = 128-byte, 2 = 64-byte, 3 = 32-byte rows.
NEWT_DEV newt_u64 newt_wgmma_desc2(newt_u32 saddr, newt_u32 lbo, newt_u32 sbo, int mode) {
  return (newt_u64)((saddr & 0x3FFFF) >> 4) | ((newt_u64)(lbo >> 4) << 16)
       | ((newt_u64)(sbo >> 4) << 32) | ((newt_u64)mode << 62);
}
"""
WGMMA_HELPERS = WGMMA_SYNC + WGMMA_DESC


def wgmma_instr(kind: str, n: int, trans_b: bool, name: str) -> str:
    """A device function issuing one `wgmma.mma_async.m64n{n}k*` with A and B from shared-memory
    descriptors into `float|int d[n/2]` (the m64nN accumulator fragment of one thread).

    kind: "f16" | "bf16" (k16, f32 acc), "tf32" (k8, f32 acc, K-major B only), "s8" (k32, s32),
    fp8 "e4m3" | "e5m2" | "e4m3_e5m2" | "e5m2_e4m3" (A's type, B's; k32, f32 acc, K-major B
    only). scale_d = 0 makes the instruction overwrite d (first k-step without an incoming acc).
    The immediates after scale-d: scale-a, scale-b (1: not negated) for float inputs, then
    the transpose flags, which only 16-bit inputs have.
    """
    nreg = n // 2
    ta, _, tb = kind.partition("_")     # fp8: A's type, then B's when they differ
    k, types, c, t = {
        "f16": (16, "f32.f16.f16", "f", "float"),
        "bf16": (16, "f32.bf16.bf16", "f", "float"),
        "tf32": (8, "f32.tf32.tf32", "f", "float"),
        "s8": (32, "s32.s8.s8", "r", "int"),
    }.get(kind, (32, f"f32.{ta}.{tb or ta}", "f", "float"))
    regs = ",".join(f"%{i}" for i in range(nreg))
    a, b, s = nreg, nreg + 1, nreg + 2
    tail = f"p, 1, 1, 0, {int(trans_b)}" if kind in ("f16", "bf16") else (
        "p" if kind == "s8" else "p, 1, 1")
    outs = ", ".join(f"\"+{c}\"(d[{i}])" for i in range(nreg))
    return (
        f"NEWT_DEV void {name}({t}* d, newt_u64 da, newt_u64 db, int scale_d) {{\n"
        "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + str(s) + ", 0;\\n"
        f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{types} "
        f"{{{regs}}}, %{a}, %{b}, {tail};\\n}}\\n\"\n"
        f"    : {outs}\n"
        "    : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
        "}\n")


def add_helpers(em, *parts):
    """Declare device functions once per kernel. A name declared again must mean the same
    text: two dots whose instructions differ under one name would both run the first one."""
    for key, text in parts:
        if em.helpers.setdefault(key, text) != text:
            raise AssertionError(f"helper {key} declared twice with different code")
