"""The standalone sm_90a matmul kernels (newt/codegen/wgmma.py: cp.async or TMA operand tiles,
staged or register epilogue) run on the CPU, and the host's tensor maps
(newt/runtime/tensormap.py).

The kernel source is built with the host C++ compiler against the emulator of
tests/test_codegen_emulator.py and the instruction models of tests/test_dot_emulated.py
(wgmma.mma_async, cp.async), plus models written here from the PTX ISA of:

  mbarrier      init (expected arrivals), arrive, arrive.expect_tx (adds transaction bytes),
                try_wait.parity (true once the phase of that parity has completed); a phase
                completes when every expected arrival came and the transaction count is 0
  TMA           cp.async.bulk.tensor.2d ... mbarrier::complete_tx::bytes: a box of the
                map's tensor at (c0, c1), out-of-bounds elements 0, rows of the box's width
                swizzled like wgmma's operands (address bits [4, 4+b) ^= [7, 7+b)); its bytes
                complete on the barrier. EAGER copies at issue (a stage overwritten while a
                wgmma may still read it fails the wgmma model's re-read at wait_group); LAZY
                copies when a thread first waits on the barrier (a consumer that reads a stage
                without waiting reads stale data and fails the comparison with torch).

The map the kernel receives is the model's own 128-byte encoding, filled by an encoder with
the driver's cuTensorMapEncodeTiled signature that TensorMaps calls: the host's dims, strides,
box and swizzle are what the device model uses, so the host side is checked too. Outputs are
NaN-poisoned, shapes odd, data random, the reference fp64 torch."""
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

from newt.codegen import dot_ptx, wgmma  # noqa: E402
from newt.codegen.tma import TMA_HELPERS  # noqa: E402
from newt.runtime.tensormap import TensorMaps, can_map  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

W = wgmma.WgmmaConfig

EMU_TMA = r"""
#include <map>
struct newt_tmap { alignas(64) newt_u64 opaque[16]; };
// the model's map encoding: base, element bytes, dim0, dim1, row stride (bytes), box0, box1,
// swizzle code (0 none, 1 32-byte, 2 64-byte, 3 128-byte), rank; outer dimension k (2..4):
// extent at 7 + k, stride (bytes) at 10 + k, one index per box
struct nt_tma_copy { newt_u32 dst; newt_tmap map; int c0, c1; int c[3]; };
struct nt_mbar { int count = 0, pending = 0; long long tx = 0; int phase = 0;
                 std::vector<nt_tma_copy> lazy; };
static std::map<newt_u32, nt_mbar> nt_mbars;     // by shared-memory address, under nt_mu
static int nt_tma_lazy = 0;
static int nt_box_bytes(const newt_tmap& m) { return (int)(m.opaque[1] * m.opaque[5] * m.opaque[6]); }
static void nt_tma_do(const nt_tma_copy& c) {
  const newt_u64* f = c.map.opaque;
  int es = (int)f[1], b0 = (int)f[5], b1 = (int)f[6], sw = (int)f[7];
  if (c.dst % 128) nt_emu_fail("TMA destination not 128-byte aligned");
  long long outer = 0;
  bool inside = true;
  for (int k = 2; k < (int)f[8]; ++k) {
    long long ck = c.c[k - 2];
    inside = inside && ck >= 0 && ck < (long long)f[7 + k];
    outer += ck * (long long)f[10 + k];
  }
  for (int y = 0; y < b1; ++y)
    for (int x = 0; x < b0; ++x) {
      long long gx = (long long)c.c0 + x, gy = (long long)c.c1 + y;
      unsigned char v[8] = {0};
      if (inside && gx >= 0 && gy >= 0 && gx < (long long)f[2] && gy < (long long)f[3])
        memcpy(v, (const unsigned char*)f[0] + outer + gy * (long long)f[4] + gx * es, es);
      newt_u32 a = c.dst + (newt_u32)((y * b0 + x) * es);
      if (sw) a = nt_swz_addr(a, 4 - sw);       // TMA codes 3/2/1 = wgmma modes 1/2/3
      memcpy(nt_smem + a, v, es);
    }
}
static void nt_mbar_settle(nt_mbar& b) {
  if (b.pending == 0 && b.tx == 0) { b.phase ^= 1; b.pending = b.count; }
}
static nt_mbar& nt_mbar_at(newt_u32 bar) {
  auto it = nt_mbars.find(bar);
  if (it == nt_mbars.end() || !it->second.count) nt_emu_fail("mbarrier used before init");
  return nt_mbars[bar];
}
static void newt_tma_prefetch(const newt_tmap*) {}
static void newt_mbar_init(newt_u32 bar, int count) {
  pthread_mutex_lock(&nt_mu); nt_mbars[bar] = nt_mbar(); nt_mbars[bar].count = count;
  nt_mbars[bar].pending = count; pthread_mutex_unlock(&nt_mu);
}
static void newt_fence_mbar_init() {}
static void nt_arrive(newt_u32 bar, newt_u32 tx) {
  pthread_mutex_lock(&nt_mu);
  nt_mbar& b = nt_mbar_at(bar);
  b.tx += tx;
  if (--b.pending < 0) nt_emu_fail("mbarrier: more arrivals than expected in a phase");
  nt_mbar_settle(b);
  pthread_mutex_unlock(&nt_mu);
}
static void newt_mbar_arrive(newt_u32 bar) { nt_arrive(bar, 0); }
static void newt_mbar_expect_tx(newt_u32 bar, newt_u32 bytes) { nt_arrive(bar, bytes); }
static bool newt_mbar_try_wait(newt_u32 bar, newt_u32 parity) {
  pthread_mutex_lock(&nt_mu);
  nt_mbar& b = nt_mbar_at(bar);
  for (const nt_tma_copy& c : b.lazy) { nt_tma_do(c); b.tx -= nt_box_bytes(c.map); }
  b.lazy.clear();
  nt_mbar_settle(b);
  bool done = (int)(parity & 1) != b.phase;
  pthread_mutex_unlock(&nt_mu);
  if (!done) sched_yield();
  return done;
}
static void newt_mbar_wait(newt_u32 bar, newt_u32 parity) {
  // a phase that never completes (or completed twice, so the parity came back) is a hang on
  // the GPU: fail after a few seconds instead of hanging the test
  time_t t0 = time(0);
  while (!newt_mbar_try_wait(bar, parity))
    if (time(0) - t0 > 5) { nt_emu_fail("mbarrier wait never completed"); return; }
}
static void nt_tma_load(newt_u32 dst, const newt_tmap* map, int c0, int c1, int c2, int c3,
                        int c4, newt_u32 bar, int rank) {
  if ((int)map->opaque[8] != rank) nt_emu_fail("TMA copy of another rank than its map's");
  pthread_mutex_lock(&nt_mu);
  nt_mbar& b = nt_mbar_at(bar);
  nt_tma_copy c{dst, *map, c0, c1, {c2, c3, c4}};
  if (nt_tma_lazy) b.lazy.push_back(c);
  else { nt_tma_do(c); b.tx -= nt_box_bytes(*map); nt_mbar_settle(b); }
  pthread_mutex_unlock(&nt_mu);
}
static void newt_tma_load_2d(newt_u32 dst, const newt_tmap* map, int c0, int c1, newt_u32 bar) {
  nt_tma_load(dst, map, c0, c1, 0, 0, 0, bar, 2); }
static void newt_tma_load_3d(newt_u32 dst, const newt_tmap* map, int c0, int c1, int c2,
                             newt_u32 bar) { nt_tma_load(dst, map, c0, c1, c2, 0, 0, bar, 3); }
static void newt_tma_load_4d(newt_u32 dst, const newt_tmap* map, int c0, int c1, int c2, int c3,
                             newt_u32 bar) { nt_tma_load(dst, map, c0, c1, c2, c3, 0, bar, 4); }
// TMA store (codegen/store_tma.py): the box is read from shared memory, and written where its
// coordinates are inside the map's extents, only at the issuing thread's wait_group.read, so
// a missing wait leaves the output unwritten (NaN-poisoned); shared memory the box covers must
// have been fenced (fence.proxy.async) by its writers before the issue.
struct nt_tma_st { newt_tmap map; int c0, c1; newt_u32 src; };
static thread_local std::vector<nt_tma_st> nt_stores;
static void nt_tma_st_each(const nt_tma_st& s, bool write) {
  const newt_u64* f = s.map.opaque;
  int es = (int)f[1], b0 = (int)f[5], b1 = (int)f[6], sw = (int)f[7];
  for (int y = 0; y < b1; ++y)
    for (int x = 0; x < b0; ++x) {
      newt_u32 a = s.src + (newt_u32)((y * b0 + x) * es);
      if (sw) a = nt_swz_addr(a, 4 - sw);
      if (!write) {
        if (__atomic_load_n(&nt_dirty[a / 16], __ATOMIC_RELAXED))
          nt_emu_fail("TMA store reads shared memory written without fence.proxy.async");
        continue;
      }
      long long gx = (long long)s.c0 + x, gy = (long long)s.c1 + y;
      if (gx >= 0 && gy >= 0 && gx < (long long)f[2] && gy < (long long)f[3])
        memcpy((unsigned char*)f[0] + gy * (long long)f[4] + gx * es, nt_smem + a, es);
    }
}
static void newt_tma_store_2d(const newt_tmap* map, int c0, int c1, newt_u32 src) {
  if ((int)map->opaque[8] != 2) nt_emu_fail("TMA store of another rank than its map's");
  if (src % 128) nt_emu_fail("TMA store source not 128-byte aligned");
  nt_tma_st s{*map, c0, c1, src};
  nt_tma_st_each(s, false);
  nt_stores.push_back(s);
}
static void newt_bulk_wait_read() {
  for (const nt_tma_st& s : nt_stores) nt_tma_st_each(s, true);
  nt_stores.clear();
}
static void newt_tma_load_5d(newt_u32 dst, const newt_tmap* map, int c0, int c1, int c2, int c3,
                             int c4, newt_u32 bar) { nt_tma_load(dst, map, c0, c1, c2, c3, c4, bar, 5); }
"""

EMU_STANDALONE = r"""
#include <sched.h>
#include <time.h>
#define __restrict__
#define __grid_constant__
struct float2 { float x, y; };
static float2 make_float2(float x, float y) { return {x, y}; }
static int min(int a, int b) { return a < b ? a : b; }
static void __syncwarp() { pthread_barrier_wait(&nt_warps[threadIdx.x / 32].bar); }
static newt_u32 newt_pack_f16(float lo, float hi) { return nt_f2h(lo) | ((newt_u32)nt_f2h(hi) << 16); }
static newt_u32 newt_pack_bf16(float lo, float hi) { return nt_f2b(lo) | ((newt_u32)nt_f2b(hi) << 16); }
"""


def model_encode(dtype_code, rank, address, dims, strides, box, elem_strides, interleave,
                 swizzle, l2, oob):
    """cuTensorMapEncodeTiled's stand-in: the model's encoding of the same arguments."""
    from newt.ir.schedule import DTYPE_CODE
    from newt.runtime.driver import CUtensorMap
    assert 2 <= rank <= 5 and list(elem_strides) == [1] * rank and interleave == 0 and oob == 0
    assert len(dims) == len(box) == rank and len(strides) == rank - 1
    assert list(box[2:]) == [1] * (rank - 2)     # outer dimensions: one index per box
    esize = {c: k for k, c in DTYPE_CODE.items()}[dtype_code]
    esize = {"u8": 1, "u16": 2, "f16": 2, "bf16": 2}.get(esize, 4)
    m = CUtensorMap()
    for i, v in enumerate([address, esize, dims[0], dims[1], strides[0], box[0], box[1], swizzle,
                           rank]):
        m.opaque[i] = v
    for k in range(2, rank):            # outer dimension k: extent at 7 + k, stride at 10 + k
        m.opaque[7 + k], m.opaque[10 + k] = dims[k], strides[k - 1]
    return m


_LIBS: dict = {}


def build(cfg):
    import test_codegen_emulator as E
    import emu_dot as DE
    from newt.codegen.header import PORTABLE, TYPES
    src = wgmma.matmul_source(cfg)
    for text in (dot_ptx.PRELUDE, dot_ptx.WGMMA_SYNC, dot_ptx.WGMMA_DESC, TMA_HELPERS):
        src = src.replace(text, "")
    src, wg = DE.wgmma_models(src)
    align = "(((unsigned long long)smem_raw + 1023) & ~1023ull)"
    assert align in src
    # 1024-byte alignment in the shared address space (offsets from nt_smem), as on the GPU
    src = src.replace(align, "(nt_smem + ((newt_smem_addr(nt_smem) + 1023u) & ~1023u))")
    src = src.replace("smem_raw", "nt_smem")
    ou = {"f16": "newt_u16", "bf16": "newt_u16", "f32": "newt_u32"}[cfg.out]
    u = {2: "newt_u16", 4: "newt_u32"}[cfg.esize]
    T = 32 * cfg.num_warps
    maps = ", nt_ta, nt_tb" if cfg.tma else ""
    launcher = f"""
static const void *nt_A, *nt_B; static void* nt_C; static int nt_M, nt_N, nt_K;
static long long nt_st[6]; static newt_tmap nt_ta, nt_tb;
static void* nt_thread(void* t) {{
  threadIdx = {{(unsigned)(size_t)t, 0, 0}};
  {cfg.name}((const {u}*)nt_A, (const {u}*)nt_B, ({ou}*)nt_C, nt_M, nt_N, nt_K, nt_st[0],
             nt_st[1], nt_st[2], nt_st[3], nt_st[4], nt_st[5]{maps});
  return 0;
}}
extern "C" int nt_launch(const void* A, const void* B, void* C, int M, int N, int K,
                         const long long* st, const void* ta, const void* tb, int grid, int lazy) {{
  nt_A = A; nt_B = B; nt_C = C; nt_M = M; nt_N = N; nt_K = K; nt_failed = 0; nt_tma_lazy = lazy;
  memcpy(nt_st, st, sizeof nt_st);
  if (ta) memcpy(&nt_ta, ta, 128);
  if (tb) memcpy(&nt_tb, tb, 128);
  pthread_barrier_init(&nt_bar, 0, {T});
  for (int w = 0; w < {T // 32}; ++w) pthread_barrier_init(&nt_warps[w].bar, 0, 32);
  pthread_t ts[{T}];
  for (int x = 0; x < grid; ++x) {{
    blockIdx = {{(unsigned)x, 0, 0}}; gridDim = {{(unsigned)grid, 1, 1}};
    nt_mbars.clear();
    for (int t = 0; t < {T}; ++t) pthread_create(&ts[t], 0, nt_thread, (void*)(size_t)t);
    for (int t = 0; t < {T}; ++t) pthread_join(ts[t], 0);
  }}
  pthread_barrier_destroy(&nt_bar);
  for (int w = 0; w < {T // 32}; ++w) pthread_barrier_destroy(&nt_warps[w].bar);
  return nt_failed;
}}
"""
    full = (TYPES.replace("static __device__ __forceinline__", "static inline") + E.EMU_PRELUDE
            + E.EMU_HELPERS + PORTABLE + DE.EMU_FAIL + DE.EMU_DOT + EMU_STANDALONE
            + DE.EMU_WGMMA + dot_ptx.WGMMA_DESC + wg + EMU_TMA + src + launcher)
    key = hashlib.sha256(full.encode()).hexdigest()[:20]
    if key not in _LIBS:
        path = os.path.join(E._DIR, key)
        with open(path + ".cpp", "w") as f:
            f.write(full)
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w",
                            "-o", path + ".so", path + ".cpp"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"emulation build failed:\n{r.stderr[:4000]}\n--- {path}.cpp")
        _LIBS[key] = ctypes.CDLL(path + ".so")
    return _LIBS[key]


def run(cfg, a, b, c, maps=None, lazy=False):
    lib = build(cfg)
    M, K = a.shape
    N = b.shape[1]
    st = (ctypes.c_longlong * 6)(*a.stride(), *b.stride(), *c.stride())
    ta = tb = None
    if cfg.tma:
        ma, mb = (maps or TensorMaps(model_encode)).matmul(cfg, a, b)
        ta, tb = ctypes.addressof(ma), ctypes.addressof(mb)
    grid = -(-M // cfg.bm) * -(-N // cfg.bn)
    lib.nt_launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    if lib.nt_launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, st, ta, tb, grid,
                     int(lazy)):
        raise AssertionError(f"emulated {cfg.name} reported a failure (see stderr)")


DT = {"f16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}


def check(cfg, M, N, K, lazy=False, b_rowpad=0):
    torch.manual_seed(M + N + K)
    a = torch.randn(M, K).to(DT[cfg.kind])
    b = torch.randn(K, N + b_rowpad).to(DT[cfg.kind])[:, :N]
    c = torch.full((M, N), float("nan"), dtype={"f32": torch.float32}.get(cfg.out, a.dtype))
    run(cfg, a, b, c, lazy=lazy)
    assert torch.isfinite(c).all(), f"{int((~torch.isfinite(c)).sum())} elements not written"
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < {"f16": 2e-3, "bf16": 8e-3, "tf32": 2e-3}[cfg.kind], err


# small tiles of the same code paths (the emulator runs one OS thread per CUDA thread)
CASES = [
    (W("f16", "f16", 64, 128, 64, 4, 3), 100, 200, 300),             # cp.async ring, K tail
    (W("f16", "f16", 64, 128, 64, 4, 3, late_loads=True), 100, 200, 300),
    (W("bf16", "bf16", 128, 64, 64, 8, 4, epilogue="regs"), 150, 72, 200),
    (W("tf32", "f32", 64, 64, 32, 4, 3, epilogue="regs"), 70, 67, 100),   # odd C rows: scalar stores
    (W("f16", "f16", 64, 128, 64, 4, 3, tma=True), 100, 200, 328),
    (W("bf16", "bf16", 128, 64, 64, 8, 4, tma=True, epilogue="regs"), 150, 72, 456),
    (W("f16", "f32", 64, 64, 128, 4, 4, tma=True), 65, 64, 520),    # two A boxes per stage
    (W("f16", "f16", 256, 128, 64, 8, 4, tma=True), 257, 136, 200),   # the benchmark's size
]


@pytest.mark.parametrize("cfg,M,N,K", CASES, ids=[c[0].name for c in CASES])
def test_standalone_wgmma_kernel_emulated(cfg, M, N, K):
    check(cfg, M, N, K)


@pytest.mark.parametrize("cfg", [CASES[3][0], CASES[4][0]], ids=lambda c: c.name)
def test_tma_lazy_completion(cfg):
    """Copies land only when a consumer waits: nothing reads a stage before its barrier."""
    check(cfg, 130, 72, 392, lazy=True, b_rowpad=8)


def test_tma_mutation_is_caught(monkeypatch):
    """The models see a broken protocol: with the empty-barrier wait removed, the copy of
    tile kt overwrites a stage a wgmma group may still read."""
    orig = wgmma._tma_loop

    def broken(cfg, issue, a_bytes):
        return orig(cfg, issue, a_bytes).replace(
            f"if (kt >= {cfg.num_stages}) newt_mbar_wait(empty", "if (0) newt_mbar_wait(empty")
    cfg = W("f16", "f16", 64, 64, 64, 4, 3, tma=True)
    delay = ctypes.c_int.in_dll(build(cfg), "nt_wg_wait_delay_us")
    delay.value = 20000
    try:
        check(cfg, 64, 64, 640)       # the real protocol passes under the same interleaving
        monkeypatch.setattr(wgmma, "_tma_loop", broken)
        delay = ctypes.c_int.in_dll(build(cfg), "nt_wg_wait_delay_us")
        delay.value = 20000
        with pytest.raises(AssertionError):
            check(cfg, 64, 64, 640)
    finally:
        delay.value = 0


def test_tensor_maps_are_built_once_per_tensor():
    calls = []

    def enc(*args):
        calls.append(args)
        return model_encode(*args)
    maps = TensorMaps(enc, capacity=4)
    cfg = W("f16", "f16", 128, 128, 64, 8, 4, tma=True)
    a = torch.randn(300, 200).half()
    b = torch.randn(200, 136).half()
    ma, mb = maps.matmul(cfg, a, b)
    assert maps.matmul(cfg, a, b) == (ma, mb) and len(calls) == 2
    # dims innermost first, row stride in bytes, box = one 128-byte panel x tile rows, 128B
    _, rank, addr, dims, strides, box, _, _, swz, _, _ = calls[0]
    assert (rank, addr, dims, strides, box, swz) == (2, a.data_ptr(), [200, 300], [400],
                                                     [64, 128], 3)
    assert calls[1][3:6] == ([136, 200], [272], [64, 64])
    for i in range(5):   # bounded: old entries leave
        maps.matrix(a.data_ptr() + 16 * i, "f16", 300, 200, 200, cfg_box(cfg))
    assert len(maps) == 4


def cfg_box(cfg):
    from newt.ir.schedule import tile_boxes
    return tile_boxes(cfg.bm, cfg.bk, cfg.esize)[0]


def test_unmappable_operands_are_refused():
    assert not can_map(0x1000, 2, 10, 777, 777, 1)      # row of 1554 bytes
    assert not can_map(0x1008, 2, 10, 64, 64, 1)        # misaligned base
    assert not can_map(0x1000, 2, 10, 64, 64, 2)        # strided columns
    assert can_map(0x1000, 2, 10, 776, 776, 1)
    cfg = W("f16", "f16", 128, 128, 64, 8, 4, tma=True)
    with pytest.raises(ValueError):
        TensorMaps(model_encode).matmul(cfg, torch.randn(64, 777).half(),
                                        torch.randn(777, 64).half())


@pytest.mark.parametrize("cfg", [W("f16", "f16", 256, 128, 64, 8, 4, tma=True),
                                 W("bf16", "bf16", 128, 256, 64, 8, 3, tma=True,
                                   epilogue="regs"),
                                 W("f16", "f16", 256, 128, 64, 8, 4, epilogue="regs")],
                         ids=lambda c: c.name)
def test_benchmark_variants_compile_for_sm90a(cfg):
    from newt.runtime import nvrtc
    r = nvrtc.compile_cuda(wgmma.matmul_source(cfg), cfg.name, "sm_90a")
    assert "wgmma.mma_async" in r.ptx
    assert ("cp.async.bulk.tensor" in r.ptx) == cfg.tma
    assert r.report["n_spills"] == 0 and r.report["local_bytes"] == 0, r.report
    assert cfg.shared_bytes <= 232448


def test_default_encoder_goes_through_the_driver(tmp_path, monkeypatch):
    """Without an encoder, TensorMaps calls cuTensorMapEncodeTiled with the declared ctypes
    prototype (here the stand-in driver, which fills the 128 bytes with 0xab)."""
    from runtime_fakes import build_fake_libcuda

    from newt.runtime import driver
    cu = driver.load_library(build_fake_libcuda(tmp_path))
    monkeypatch.setattr(driver, "_lib", cu)
    maps = TensorMaps()
    cfg = W("bf16", "bf16", 128, 128, 64, 8, 4, tma=True)
    ma, mb = maps.matmul(cfg, torch.randn(130, 72).bfloat16(), torch.randn(72, 200).bfloat16())
    assert bytes(ma) == b"\xab" * 128 and bytes(mb) == b"\xab" * 128 and maps.built == 2
