"""C++ models of the dot instructions for the emulator of generated code (tests/
test_codegen_emulator.py runs one OS thread per CUDA thread): cp.async, ldmatrix and mma.sync
(EMU_DOT), wgmma.mma_async from shared-memory descriptors (EMU_WGMMA) and with A from registers
(EMU_WGMMA_RS), written from the PTX ISA, and `emulated_source`, which swaps the generated
code's inline-PTX helpers for them. Used by tests/test_dot_emulated.py and the other *_emulated
tests; what each model checks is said where it is defined."""

EMU_DOT = r"""
#define NEWT_DEV static inline
typedef unsigned short newt_u16;
typedef unsigned int newt_u32;
typedef unsigned long long newt_u64;
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
struct int4 { int x, y, z, w; };
static uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static int max(int a, int b) { return a > b ? a : b; }
static newt_u32 newt_smem_addr(const void* p) { return (newt_u32)((const unsigned char*)p - nt_smem); }
// Proxies: cp.async and st.shared write through the generic proxy, wgmma reads through the
// async proxy; a write is visible to it only after the writer's fence.proxy.async (then a
// barrier). Each 16-byte chunk remembers the thread whose write is not fenced yet.
#include <vector>
static int nt_dirty[(1 << 18) / 16];
static thread_local std::vector<newt_u32> nt_my_dirty;
static void nt_generic_write(newt_u32 dst, int n) {
  for (newt_u32 c = dst / 16; c <= (dst + n - 1) / 16; ++c) {
    __atomic_store_n(&nt_dirty[c], (int)threadIdx.x + 1, __ATOMIC_RELAXED);
    nt_my_dirty.push_back(c);
  }
}
static void newt_fence_proxy_async() {
  for (newt_u32 c : nt_my_dirty) {
    int me = (int)threadIdx.x + 1;
    __atomic_compare_exchange_n(&nt_dirty[c], &me, 0, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  nt_my_dirty.clear();
}
// cp.async is adversarial about when it lands. At issue its 16 (4) bytes become all-ones (a NaN
// in every float format): a buffer overwritten while some warp may still read it (a barrier
// missing before the copies) is caught when that read comes later. The data lands only at the
// wait_group that retires the copy's commit group (wait_group N: all but the N most recent
// groups): a read before that wait (a wait count one too small) sees the all-ones bytes. The
// source is read at issue (global memory does not change under a kernel).
struct nt_copy { unsigned group; newt_u32 dst; int size, n; unsigned char bytes[16]; };
static thread_local std::vector<nt_copy> nt_pending;
static thread_local unsigned nt_groups;       // commit groups closed by this thread
static void nt_cp_async(newt_u32 dst, const void* src, int size, int n) {
  nt_copy c{nt_groups, dst, size, n, {}};
  if (n) memcpy(c.bytes, src, n);
  nt_pending.push_back(c);
  nt_generic_write(dst, size);
  memset(nt_smem + dst, 0xff, size);
}
static void newt_cp_async16(newt_u32 dst, const void* src, int n) { nt_cp_async(dst, src, 16, n); }
static void newt_cp_async4(newt_u32 dst, const void* src, int n) { nt_cp_async(dst, src, 4, n); }
static void newt_cp_async_commit() { ++nt_groups; }
template <int N> static void newt_cp_async_wait() {
  std::vector<nt_copy> keep;
  for (const nt_copy& c : nt_pending) {
    if (c.group + N >= nt_groups) { keep.push_back(c); continue; }   // among the N newest
    nt_generic_write(c.dst, c.size);
    memset(nt_smem + c.dst, 0, c.size);
    memcpy(nt_smem + c.dst, c.bytes, c.n);
  }
  nt_pending.swap(keep);
}
static void newt_st_shared_v4(newt_u32 dst, uint4 v) {
  nt_generic_write(dst, 16); memcpy(nt_smem + dst, &v, 16); }
template <int B> static void nt_sts(newt_u32 dst, newt_u32 v) {
  nt_generic_write(dst, B); memcpy(nt_smem + dst, &v, B); }
static newt_u32 newt_lds_u32(newt_u32 a) { newt_u32 v; memcpy(&v, nt_smem + a, 4); return v; }
static newt_u32 newt_lds_u8(newt_u32 a) { return nt_smem[a]; }
static newt_u32 newt_f32_to_tf32(float f) { return nt_bits<newt_u32>(f) & 0xffffe000u; }
static float newt_f16_to_f32(newt_u16 h) { return nt_h2f(h); }
static float newt_bf16_to_f32(newt_u16 h) { return nt_bits<float>(((newt_u32)h) << 16); }
struct nt_mma_x { newt_u32 w[32][4]; newt_u32 b[32][2]; };
static nt_mma_x nt_mx[32];
static void nt_wbar() { pthread_barrier_wait(&nt_warps[threadIdx.x / 32].bar); }
// ldmatrix x4: lanes 8i..8i+7 give the row addresses of matrix i; lane l receives word
// (row l/4, columns 2(l%4), +1) of each matrix (.trans: the transposed element pair)
static void nt_ldm(newt_u32 addr, newt_u32* d, bool tr) {
  int l = threadIdx.x % 32; nt_mma_x& x = nt_mx[threadIdx.x / 32];
  x.w[l][0] = addr; nt_wbar();
  for (int i = 0; i < 4; ++i) {
    if (!tr) { memcpy(&d[i], nt_smem + x.w[8 * i + l / 4][0] + (l % 4) * 4, 4); continue; }
    newt_u16 lo, hi;
    memcpy(&lo, nt_smem + x.w[8 * i + 2 * (l % 4)][0] + (l / 4) * 2, 2);
    memcpy(&hi, nt_smem + x.w[8 * i + 2 * (l % 4) + 1][0] + (l / 4) * 2, 2);
    d[i] = lo | ((newt_u32)hi << 16);
  }
  nt_wbar();
}
static void newt_ldmatrix_x4(newt_u32 a, newt_u32* d) { nt_ldm(a, d, false); }
static void newt_ldmatrix_x4_trans(newt_u32 a, newt_u32* d) { nt_ldm(a, d, true); }
static float nt_el(newt_u32 w, int e, int kind) {   // element e of a 32-bit fragment word
  if (kind == 2) return nt_bits<float>(w);
  newt_u16 h = (newt_u16)(e ? w >> 16 : w & 0xffff);
  return kind == 0 ? nt_h2f(h) : nt_bits<float>(((newt_u32)h) << 16);
}
// mma.sync m16n8k16 (kind 0 f16, 1 bf16) / m16n8k8 (kind 2 tf32), row.col, f32 accumulate
static void nt_mma(float* c, const newt_u32* a, const newt_u32* b, int kind) {
  int l = threadIdx.x % 32; nt_mma_x& x = nt_mx[threadIdx.x / 32];
  for (int i = 0; i < 4; ++i) x.w[l][i] = a[i];
  x.b[l][0] = b[0]; x.b[l][1] = b[1]; nt_wbar();
  int g = l / 4, t = l % 4, K = kind == 2 ? 8 : 16;
  for (int i = 0; i < 4; ++i) {
    int r = g + 8 * (i / 2), n = 2 * t + i % 2;
    float s = 0.f;
    for (int k = 0; k < K; ++k) {
      float av, bv;
      if (kind == 2) {
        av = nt_el(x.w[(r % 8) * 4 + k % 4][r / 8 + 2 * (k / 4)], 0, 2);
        bv = nt_el(x.b[n * 4 + k % 4][k / 4], 0, 2);
      } else {
        av = nt_el(x.w[(r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)], k % 2, kind);
        bv = nt_el(x.b[n * 4 + (k % 8) / 2][k / 8], k % 2, kind);
      }
      s += av * bv;
    }
    c[i] += s;
  }
  nt_wbar();
}
static void newt_mma_f16(float* c, const newt_u32* a, const newt_u32* b) { nt_mma(c, a, b, 0); }
static void newt_mma_bf16(float* c, const newt_u32* a, const newt_u32* b) { nt_mma(c, a, b, 1); }
static void newt_mma_tf32(float* c, const newt_u32* a, const newt_u32* b) { nt_mma(c, a, b, 2); }
"""

# wgmma.mma_async (sm_90a), modelled from the PTX ISA ("Asynchronous Warpgroup Level Matrix
# Multiply-Accumulate": matrix descriptor, canonical shared-memory layouts, register fragment D).
# Each thread computes its own fragment of D = A[64xK] @ B[KxN] (+ D) from the descriptors, so
# no exchange between threads is needed. Asynchrony: the product is computed at issue; the
# accumulator registers only change when wait_group retires the op, and then the operands are
# read again and must be unchanged (a stage overwritten while the tensor cores may still read
# it, or an accumulator read before the wait, shows up as a failure or a wrong result).
EMU_WGMMA = r"""
#include <algorithm>
#include <map>
#include <vector>
// a_vals: A from registers (wgmma with A in registers): the 2 rows x 16 k of the issuing
// thread's D fragment, captured at issue; empty when A comes from a descriptor (da)
struct nt_wg_op { float* d; int n, scale_d; std::vector<float> delta; newt_u64 da, db; int kind, tb;
                  std::vector<float> a_vals; int* di = nullptr; };   // di: an s32 accumulator
struct nt_wg_state {
  std::vector<nt_wg_op> open;                  // issued since the last commit_group
  std::vector<std::vector<nt_wg_op>> groups;   // committed, not yet retired
  ~nt_wg_state() {                             // thread exit: nothing may still be in flight
    if (!open.empty() || !groups.empty()) nt_emu_fail("wgmma ops never waited for"); }
};
static thread_local nt_wg_state nt_wg;
struct nt_desc { newt_u32 start, lbo, sbo; int base_off, mode; };
static nt_desc nt_decode(newt_u64 d) {
  // bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
  // 49-51 matrix base offset, 62-63 swizzle (0 none, 1 128-byte, 2 64-byte, 3 32-byte)
  return {(newt_u32)(d & 0x3FFF) << 4, (newt_u32)((d >> 16) & 0x3FFF) << 4,
          (newt_u32)((d >> 32) & 0x3FFF) << 4, (int)((d >> 49) & 7), (int)(d >> 62)};
}
static int nt_swz_width(int mode) { return mode == 1 ? 128 : mode == 2 ? 64 : 32; }
// the swizzle XORs address bits [4, 4+b) with bits [7, 7+b), b = 3 / 2 / 1 (128/64/32-byte)
static newt_u32 nt_swz_addr(newt_u32 a, int mode) {
  newt_u32 m = mode == 1 ? 7 : mode == 2 ? 3 : 1;
  return a ^ (((a >> 7) & m) << 4);
}
static void nt_desc_check(const nt_desc& q) {
  if (q.base_off) nt_emu_fail("wgmma descriptor: matrix base offset is not modelled");
  // every start address newt forms lies within the first 128-byte row of a swizzle pattern
  // (k offsets only); the base offset field would be needed otherwise
  if (q.mode && ((q.start >> 7) & (nt_swz_width(q.mode) / 16 - 1)))
    nt_emu_fail("wgmma descriptor: start address not at a swizzle pattern row 0");
}
// K-major operand (A; B when not transposed): element (i, k-byte kb) of the i = 0.. rows
// (M or N), kb < 32. Swizzled: rows of W bytes, 8-row groups SBO apart (LBO unused).
// No swizzle: 8x16-byte core matrices, rows 16 bytes apart, K halves LBO apart, groups SBO.
static newt_u32 nt_kmajor(const nt_desc& q, int i, int kb) {
  if (q.mode == 0) return q.start + (i / 8) * q.sbo + (i % 8) * 16 + (kb / 16) * q.lbo + kb % 16;
  int W = nt_swz_width(q.mode);
  return nt_swz_addr(q.start + (i / 8) * q.sbo + (i % 8) * W + kb, q.mode);
}
// MN-major operand (transposed B, 16-bit): element (n, k): W/es consecutive n in a W-byte row,
// the next n block LBO away; k rows W bytes apart, 8-row groups SBO apart.
static newt_u32 nt_mnmajor(const nt_desc& q, int n, int k, int es) {
  if (q.mode == 0) { nt_emu_fail("wgmma: MN-major without swizzle is not modelled"); return 0; }
  int W = nt_swz_width(q.mode), per = W / es;
  return nt_swz_addr(q.start + (n / per) * q.lbo + (n % per) * es + (k % 8) * W + (k / 8) * q.sbo,
                     q.mode);
}
static float nt_wg_el(newt_u32 addr, int kind) {   // kind 0 f16, 1 bf16, 2 tf32, 3 e4m3, 4 e5m2
  if (__atomic_load_n(&nt_dirty[addr / 16], __ATOMIC_RELAXED))
    nt_emu_fail("wgmma reads shared memory written without fence.proxy.async");
  if (kind == 2) { newt_u32 w; memcpy(&w, nt_smem + addr, 4); return nt_bits<float>(w & 0xffffe000u); }
  if (kind == 3) return nt_e4m3_f(nt_smem[addr]);
  if (kind == 4) return nt_e5m2_f(nt_smem[addr]);
  if (kind == 7) return (float)(signed char)nt_smem[addr];
  newt_u16 h; memcpy(&h, nt_smem + addr, 2);
  return kind == 0 ? nt_h2f(h) : nt_bits<float>(((newt_u32)h) << 16);
}
static void nt_wg_compute(nt_wg_op& op) {
  nt_desc qa = nt_decode(op.a_vals.empty() ? op.da : op.db), qb = nt_decode(op.db);
  nt_desc_check(qa); nt_desc_check(qb);
  int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  // fp8 pairs (op.kind 3 + 2 * (A is e5m2) + (B is e5m2)) and s8 (7): k32, one byte each
  bool b1 = op.kind >= 3, f8 = b1 && op.kind != 7;
  int K = op.kind == 2 ? 8 : b1 ? 32 : 16, es = op.kind == 2 ? 4 : b1 ? 1 : 2;
  int ka = f8 ? 3 + (op.kind - 3) / 2 : op.kind, kb = f8 ? 3 + (op.kind - 3) % 2 : op.kind;
  op.delta.assign(op.n / 2, 0.f);
  for (int i = 0; i < op.n / 2; ++i) {   // fragment D: row 16w + l/4 + 8*((i%4)/2), column 8*(i/4) + 2*(l%4) + i%2
    int row = 16 * w + l / 4 + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    float s = 0.f;
    for (int k = 0; k < K; ++k) {
      float a = op.a_vals.empty() ? nt_wg_el(nt_kmajor(qa, row, k * es), ka)
                                  : op.a_vals[((i % 4) / 2) * 16 + k];
      float b = nt_wg_el(op.tb ? nt_mnmajor(qb, col, k, es) : nt_kmajor(qb, col, k * es), kb);
      s += a * b;
    }
    op.delta[i] = s;
  }
}
// wgmma is warpgroup-wide (.sync.aligned): the i-th wgmma of every thread of a warpgroup must
// be the same instruction with the same descriptors
static std::map<std::pair<long, long>, std::vector<newt_u64>> nt_wg_seen;
static pthread_mutex_t nt_wg_mu = PTHREAD_MUTEX_INITIALIZER;
static thread_local long nt_wg_seq;
static void nt_wg_uniform(newt_u64 da, newt_u64 db, int scale_d, int kind, int n, int tb) {
  // entry: the operands, then how many of the 128 threads issued it (erased at 128)
  std::vector<newt_u64> me{da, db, (newt_u64)scale_d, (newt_u64)kind, (newt_u64)n, (newt_u64)tb, 1};
  long blk = ((long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  std::pair<long, long> key{blk * 64 + threadIdx.x / 128, nt_wg_seq++};
  pthread_mutex_lock(&nt_wg_mu);
  auto it = nt_wg_seen.find(key);
  if (it == nt_wg_seen.end()) nt_wg_seen[key] = me;
  else {
    if (!std::equal(me.begin(), me.end() - 1, it->second.begin()))
      nt_emu_fail("wgmma operands differ within a warpgroup");
    if (++it->second.back() == 128) nt_wg_seen.erase(it);
  }
  pthread_mutex_unlock(&nt_wg_mu);
}
static void nt_wgmma(float* d, newt_u64 da, newt_u64 db, int scale_d, int kind, int n, int tb) {
  nt_wg_uniform(da, db, scale_d, kind, n, tb);
  nt_wg_op op{d, n, scale_d, {}, da, db, kind, tb};
  nt_wg_compute(op);
  nt_wg.open.push_back(op);
}
static void nt_wgmma_i(int* d, newt_u64 da, newt_u64 db, int scale_d, int kind, int n, int tb) {
  nt_wg_uniform(da, db, scale_d, kind, n, tb);
  nt_wg_op op{nullptr, n, scale_d, {}, da, db, kind, tb};
  op.di = d;   // products of 32 bytes per k-step: the float sums are exact integers
  nt_wg_compute(op);
  nt_wg.open.push_back(op);
}
static void newt_wgmma_fence() {}
static void newt_wgmma_commit() { nt_wg.groups.push_back(nt_wg.open); nt_wg.open.clear(); }
// tests set this to hold every warp but warp 0 in its waits (a fixed interleaving: warp 0
// runs ahead, so a protocol that lets it overwrite a stage under another warp's in-flight
// wgmma fails every time, not only when the host scheduler happens to interleave that way)
#include <unistd.h>
extern "C" { int nt_wg_wait_delay_us = 0; }
template <int N> static void newt_wgmma_wait() {
  if (nt_wg_wait_delay_us && threadIdx.x >= 32 && (int)nt_wg.groups.size() > N)
    usleep(nt_wg_wait_delay_us);
  while ((int)nt_wg.groups.size() > N) {
    for (nt_wg_op& op : nt_wg.groups.front()) {
      nt_wg_op again = op;
      nt_wg_compute(again);
      if (memcmp(again.delta.data(), op.delta.data(), op.delta.size() * 4))
        nt_emu_fail("shared memory under an in-flight wgmma changed before wait_group");
      for (int i = 0; i < op.n / 2; ++i) {
        if (op.di) op.di[i] = (op.scale_d ? op.di[i] : 0) + (int)op.delta[i];
        else op.d[i] = (op.scale_d ? op.d[i] : 0.f) + op.delta[i];
      }
    }
    nt_wg.groups.erase(nt_wg.groups.begin());
  }
}
"""

EMU_FAIL = r"""
static pthread_mutex_t nt_fail_mu = PTHREAD_MUTEX_INITIALIZER;   // models may hold nt_mu
static void nt_emu_fail(const char* why) {
  pthread_mutex_lock(&nt_fail_mu);
  if (!nt_failed) fprintf(stderr, "emulated kernel: %s (thread %u, block %u)\n", why,
                          threadIdx.x, blockIdx.x);
  nt_failed = 1;
  pthread_mutex_unlock(&nt_fail_mu);
}
"""


EMU_TMA_KERNEL = r"""
#include <sched.h>
#include <time.h>
#include <vector>
#define __grid_constant__
static void __syncwarp() { pthread_barrier_wait(&nt_warps[threadIdx.x / 32].bar); }
// __syncwarp(mask): the lanes of `mask` (each calling it with the same mask) meet; a
// generation count per warp lets the same mask meet again at once (matmul_variants' `lanes`)
struct nt_part { pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
                 pthread_cond_t cv = PTHREAD_COND_INITIALIZER; int n = 0; long gen = 0; };
static nt_part nt_parts[32];
static void nt_emu_fail(const char* why);
static void __syncwarp(unsigned mask) {
  if (mask == 0xffffffffu) { __syncwarp(); return; }
  if (!(mask >> (threadIdx.x % 32) & 1u)) nt_emu_fail("__syncwarp by a lane not in its mask");
  nt_part& p = nt_parts[threadIdx.x / 32];
  pthread_mutex_lock(&p.mu);
  long gen = p.gen;
  if (++p.n == __builtin_popcount(mask)) { p.n = 0; ++p.gen; pthread_cond_broadcast(&p.cv); }
  else while (gen == p.gen) pthread_cond_wait(&p.cv, &p.mu);
  pthread_mutex_unlock(&p.mu);
}
"""


def wgmma_models(src: str) -> tuple[str, str]:
    """(src without its wgmma device functions (dot_ptx.wgmma_instr's output, any name),
    definitions of the same functions calling the model)."""
    import re
    from newt.codegen.tc import dot_ptx
    kinds = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 3, "e4m3_e5m2": 4, "e5m2_e4m3": 5, "e5m2": 6,
             "s8": 7}
    pat = re.compile(r"NEWT_DEV void (\w+)\((?:float|int)\* d, newt_u64 da, newt_u64 db, "
                     r"int scale_d\) \{\n"
                     r"  asm volatile\(\"\{\\n\.reg \.pred p;\\nsetp\.ne\.b32 p, %\d+, 0;\\n"
                     r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k\d+\.[fs]32\.(\w+)\.(\w+) .*?\n\}\n",
                     re.S)

    def repl(m):
        name, n, ta, tb = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        kind = ta if ta == tb else f"{ta}_{tb}"
        trans = [t for t in (0, 1) if m.group(0) == dot_ptx.wgmma_instr(kind, n, bool(t), name)]
        assert trans, f"{name} is not dot_ptx.wgmma_instr's text"
        trans = trans[0]
        t, model = ("int", "nt_wgmma_i") if kind == "s8" else ("float", "nt_wgmma")
        defs.append(f"static void {name}({t}* d, newt_u64 da, newt_u64 db, int scale_d) "
                    f"{{ {model}(d, da, db, scale_d, {kinds[kind]}, {n}, {trans}); }}\n")
        return ""
    defs: list[str] = []
    out = pat.sub(repl, src)
    assert "wgmma.mma_async" not in out, "a wgmma helper was not replaced by the model"
    return out, "".join(defs)


# wgmma.mma_async with A from registers (newt.codegen.tc.mma.wgmma_rs_instr), modelled like the
# wgmma above, asynchronously: at issue every thread captures the A values of its D fragment's
# two rows (the A fragments of its warp, rows 16 * (warp % 4) + 0..15 of the m64 tile in the
# m16n8k16 A layout, or m16n8k8's for tf32, are exchanged through a per-warp buffer); the
# product lands in D at wait_group, which also fails if the B tile under the in-flight wgmma
# changed. tf32 operands keep their top 19 bits, as the hardware reads them.
EMU_WGMMA_RS = r"""
static newt_u32 nt_rs_a[1024][4];
static void nt_wgmma_rs(float* d, const newt_u32* a, newt_u64 db, int scale_d, int kind, int n,
                        int tb) {
  int t = threadIdx.x, l = t % 32;
  nt_wg_uniform(0, db, scale_d, kind, n, tb);
  for (int i = 0; i < 4; ++i) nt_rs_a[t][i] = a[i];
  nt_wbar();
  nt_wg_op op{d, n, scale_d, {}, 0, db, kind, tb, std::vector<float>(32)};
  for (int h = 0; h < 2; ++h) {
    int r = l / 4 + 8 * h;
    if (kind == 2) {   // m16n8k8 tf32: a0 (r, t), a1 (r + 8, t), a2 (r, t + 4), a3 (r + 8, t + 4)
      for (int k = 0; k < 8; ++k)
        op.a_vals[h * 16 + k] = nt_bits<float>(
            nt_rs_a[t - l + (r % 8) * 4 + k % 4][r / 8 + 2 * (k / 4)] & 0xffffe000u);
      continue;
    }
    for (int k = 0; k < 16; ++k)
      op.a_vals[h * 16 + k] = nt_el(nt_rs_a[t - l + (r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)],
                                    k % 2, kind);
  }
  nt_wbar();
  nt_wg_compute(op);
  nt_wg.open.push_back(op);
}
// codegen/tc/dot_swap.py's 8-byte shared-memory load
static void newt_lds64(newt_u32 a, newt_u32* d) { memcpy(d, nt_smem + a, 8); }
"""


def rs_models(src: str) -> tuple[str, str]:
    """(src without its register-A wgmma helpers, definitions of the same functions calling
    the model)."""
    import re

    from newt.codegen.tc.mma import wgmma_rs_instr
    kinds = {"f16": 0, "bf16": 1, "tf32": 2}
    defs = []

    def repl(m):
        name, n, kind = m.group(1), int(m.group(2)), m.group(3)
        tb = [t for t in (0, 1) if m.group(0) == wgmma_rs_instr(kind, n, bool(t), name)]
        assert tb, f"{name} is not wgmma_rs_instr's text"
        defs.append(f"static void {name}(float* d, const newt_u32* a, newt_u64 db, int s) "
                    f"{{ nt_wgmma_rs(d, a, db, s, {kinds[kind]}, {n}, {tb[0]}); }}\n")
        return ""
    pat = re.compile(r"NEWT_DEV void (newt_wgmma_rs_\w+)\(float\* d, const newt_u32\* a, "
                     r"newt_u64 db, int scale_d\) \{\n.*?m64n(\d+)k(?:8|16)\.f32\.(\w+)\..*?\n\}\n",
                     re.S)
    out = pat.sub(repl, src)
    return out, (EMU_WGMMA_RS + "".join(defs) if defs else "")


def _st_shared_models(src: str) -> str:
    """dot.py's element-wise staging writes shared memory with inline `st.shared`: calls of
    nt_sts<bytes>(address, value) instead."""
    import re
    head = re.compile(r'asm volatile\("st\.shared\.(?:b|u)(8|16|32) \[%0\], %1;" :: "r"\(')
    lines = []
    for line in src.split("\n"):
        m = head.search(line)
        if m:
            tail = ' : "memory");'
            assert line.endswith(tail), line
            pre, rest = line[:m.start()], line[m.end():-len(tail)]
            addr, sep, val = rest.rpartition('), "h"(') if '), "h"(' in rest else \
                rest.rpartition('), "r"(')
            assert sep, line
            line = f"{pre}nt_sts<{int(m.group(1)) // 8}>(({addr}), ({val});"
        lines.append(line)
    return "\n".join(lines)


def emulated_source(src: str) -> str:
    """Generated CUDA C++ (header already swapped by the emulator's build) with the dot helpers
    replaced by their models."""
    from newt.codegen.tc import dot_ptx, dot_ring, dot_swap
    from newt.codegen.tc.tma import TMA_HELPERS
    drop = [dot_ptx.PRELUDE, dot_ptx.MMA_SYNC_HELPERS, dot_ptx.WGMMA_SYNC, dot_ptx.WGMMA_DESC,
            dot_ring._CP4, dot_swap._LDS64] + [dot_ptx.mma_sync_instr(k)
                                               for k in ("f16", "bf16", "tf32", "s8")]
    from newt.codegen.tc.ring_tma import load_nd_helper
    from newt.codegen.tc.store_tma import STORE_HELPERS, store_nd_helper
    tma = TMA_HELPERS in src
    for text in drop + [TMA_HELPERS, STORE_HELPERS] + [load_nd_helper(r) for r in (3, 4, 5)] \
            + [store_nd_helper(3)]:
        src = src.replace(text, "")
    src, rs = rs_models(src)
    src, wg = wgmma_models(src)
    wg += rs
    src = _st_shared_models(src)
    head, body = src.split("extern \"C\"", 1)
    body = body.replace("nt_dot_smem", "nt_smem")
    if tma:   # mbarriers and TMA boxes: the models of tests/test_dot_tma.py
        from test_dot_tma import EMU_TMA
        head += EMU_TMA_KERNEL
    return (head + EMU_FAIL + EMU_DOT + EMU_WGMMA + dot_ptx.WGMMA_DESC + wg
            + (EMU_TMA if tma else "") + "extern \"C\"" + body)


def patch_emulator(monkeypatch, arch=None, num_stages=3):
    """tests/test_codegen_emulator.py with the instruction models swapped into the generated
    code (and, given `arch`, compiling for it): returns that module, whose `emulate` then runs
    a kernel's generated code on the CPU."""
    import test_codegen_emulator as E

    import newt.codegen as C
    from newt.options import Options
    orig = C.generate
    monkeypatch.setattr(C, "generate", lambda fn, opts: (
        lambda r: (emulated_source(r[0]), r[1]))(orig(fn, opts)))
    if arch is not None:
        monkeypatch.setattr(E, "Options", lambda arch=None, num_warps=4, _a=arch:
                            Options(arch=_a, num_warps=num_warps, num_stages=num_stages))
    return E
