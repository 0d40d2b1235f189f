"""The tutorial matmul's generated sm_80 code (cp.async ring, strided copies, transposed 4-byte
copies, mask groups, ldmatrix + mma.sync, the per-group epilogue store) run on the CPU.

Uses the backend's emulator (tests/test_codegen_emulator.py: one OS thread per CUDA thread)
and swaps the dot helpers' inline PTX for C++ models of the instructions: cp.async copies at
once (so commit/wait are no-ops), ldmatrix and mma.sync exchange fragments through a per-warp
buffer with the PTX ISA's fragment tables. Results are compared with torch on odd shapes with
a NaN-poisoned output, so every element must be written. (wgmma has no model here; the sm_90a
path shares the copies and the epilogue, and is checked on the GPU by bench_matmul.)"""
import os
import shutil
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

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
static void newt_fence_proxy_async() {}
static void newt_cp_async16(newt_u32 dst, const void* src, int n) {
  memset(nt_smem + dst, 0, 16); if (n) memcpy(nt_smem + dst, src, n); }
static void newt_cp_async4(newt_u32 dst, const void* src, int n) {
  memset(nt_smem + dst, 0, 4); if (n) memcpy(nt_smem + dst, src, n); }
static void newt_cp_async_commit() {}
template <int N> static void newt_cp_async_wait() {}
static void newt_st_shared_v4(newt_u32 dst, uint4 v) { memcpy(nt_smem + dst, &v, 16); }
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


@pytest.fixture
def emu(monkeypatch):
    import test_codegen_emulator as E

    import newt.codegen as C
    from newt.codegen import dot_ptx, dot_ring
    from newt.options import Options
    orig = C.generate
    drop = [dot_ptx.PRELUDE, dot_ptx.MMA_SYNC_HELPERS, dot_ring._CP4] + \
        [dot_ptx.mma_sync_instr(k) for k in ("f16", "bf16", "tf32", "s8")]

    def generate(fn, opts):
        src, name = orig(fn, opts)
        for text in drop:
            src = src.replace(text, "")
        head, body = src.split("extern \"C\"", 1)
        body = body.replace("nt_dot_smem", "nt_smem")
        return head + EMU_DOT + "extern \"C\"" + body, name

    monkeypatch.setattr(C, "generate", generate)
    monkeypatch.setattr(E, "Options", lambda arch, num_warps: Options(arch="sm_80",
                                                                     num_warps=num_warps))
    return E


def _ref(a, b, act):
    r = a.double() @ b.double()
    return torch.where(r >= 0, r, 0.01 * r) if act else r


@pytest.mark.parametrize("dt,M,N,K,BK,act", [
    (torch.float16, 100, 90, 70, 32, "leaky_relu"),   # wrapped rows (gathers), K tail
    (torch.bfloat16, 128, 128, 96, 32, ""),           # in range: the strided fast path
    (torch.float32, 70, 64, 40, 32, ""),              # tf32: B copied transposed, 4 bytes
])
def test_tutorial_matmul_emulated(emu, dt, M, N, K, BK, act):
    import bench_matmul as bm
    torch.manual_seed(0)
    k = bm.example().matmul_kernel
    a = torch.randn(M, K).to(dt)
    b = torch.randn(K, N).to(dt)
    c = torch.full((M, N), float("nan"), dtype=dt)
    BM = BN = 64
    grid = (-(-M // BM) * -(-N // BN),)
    emu.emulate(k, grid, a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK,
                GROUP_SIZE_M=8, ACTIVATION=act, num_warps=4, num_stages=3)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = _ref(a, b, act)
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (2e-3 if dt != torch.float32 else 2e-3) * (4 if dt == torch.bfloat16 else 1), err
