"""The TMA models the CPU emulator runs (tests/test_codegen_emulator.py, tests/emu_dot.py) and
the host's tensor maps (newt/runtime/tensormap.py).

Models written here from the PTX ISA of:

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

The map a kernel receives is the model's own 128-byte encoding, filled by an encoder with the
driver's cuTensorMapEncodeTiled signature that TensorMaps calls: the host's dims, strides, box
and swizzle are what the device model uses, so the host side is checked too."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

from newt.ir.schedule import tile_boxes  # noqa: E402
from newt.runtime.tensormap import TensorMaps, can_map  # noqa: E402


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
// An mbarrier's state lives in its 8 bytes of shared memory: the model keeps its own and marks
// those bytes, so a shared-memory write over a live barrier (a region placed on it) is caught.
static const newt_u64 nt_mbar_mark = 0x6d62617272696572ull;
static nt_mbar& nt_mbar_at(newt_u32 bar) {
  auto it = nt_mbars.find(bar);
  if (it == nt_mbars.end() || !it->second.count) nt_emu_fail("mbarrier used before init");
  if (memcmp(nt_smem + bar, &nt_mbar_mark, 8)) nt_emu_fail("mbarrier overwritten");
  return nt_mbars[bar];
}
static void newt_tma_prefetch(const newt_tmap*) {}
static void newt_mbar_init(newt_u32 bar, int count) {
  pthread_mutex_lock(&nt_mu); nt_mbars[bar] = nt_mbar(); nt_mbars[bar].count = count;
  nt_mbars[bar].pending = count; memcpy(nt_smem + bar, &nt_mbar_mark, 8);
  pthread_mutex_unlock(&nt_mu);
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
// TMA store (codegen/tc/store_tma.py): the box is read from shared memory, and written where its
// coordinates are inside the map's extents, only at the issuing thread's wait_group.read, so
// a missing wait leaves the output unwritten (NaN-poisoned); shared memory the box covers must
// have been fenced (fence.proxy.async) by its writers before the issue.
struct nt_tma_st { newt_tmap map; int c0, c1; newt_u32 src; int c2; };   // c2: a batch index
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
      long long gx = (long long)s.c0 + x, gy = (long long)s.c1 + y, gz = s.c2;
      long long outer = (int)f[8] == 3 ? gz * (long long)f[12] : 0;   // rank 3: the batch
      bool in_z = (int)f[8] == 2 || (gz >= 0 && gz < (long long)f[9]);
      if (in_z && gx >= 0 && gy >= 0 && gx < (long long)f[2] && gy < (long long)f[3])
        memcpy((unsigned char*)f[0] + outer + gy * (long long)f[4] + gx * es, nt_smem + a, es);
    }
}
static void newt_tma_store_2d(const newt_tmap* map, int c0, int c1, newt_u32 src) {
  if ((int)map->opaque[8] != 2) nt_emu_fail("TMA store of another rank than its map's");
  if (src % 128) nt_emu_fail("TMA store source not 128-byte aligned");
  nt_tma_st s{*map, c0, c1, src, 0};
  nt_tma_st_each(s, false);
  nt_stores.push_back(s);
}
static void newt_tma_store_3d(const newt_tmap* map, int c0, int c1, int c2, newt_u32 src) {
  if ((int)map->opaque[8] != 3) nt_emu_fail("TMA store of another rank than its map's");
  if (src % 128) nt_emu_fail("TMA store source not 128-byte aligned");
  nt_tma_st s{*map, c0, c1, src, c2};
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


def _maps_of(maps, a, b, bm, bn, bk):
    """(map of A, map of B) of row-major fp16/bf16 matrices a [M, K], b [K, N] for a bm x bn x bk
    tile, each box one 128-byte panel of its tile (tile_boxes)."""
    kind = {torch.float16: "f16", torch.bfloat16: "bf16"}[a.dtype]
    (M, K), N = a.shape, b.shape[1]
    box_a, _ = tile_boxes(bm, bk, a.element_size())
    box_b, _ = tile_boxes(bk, bn, b.element_size())
    return (maps.matrix(a.data_ptr(), kind, M, K, a.stride(0), box_a),
            maps.matrix(b.data_ptr(), kind, K, N, b.stride(0), box_b))


def test_tensor_maps_are_built_once_per_tensor():
    calls = []

    def enc(*args):
        calls.append(args)
        return model_encode(*args)
    maps = TensorMaps(enc, capacity=4)
    a = torch.randn(300, 200).half()
    b = torch.randn(200, 136).half()
    ma, mb = _maps_of(maps, a, b, 128, 128, 64)
    assert _maps_of(maps, a, b, 128, 128, 64) == (ma, mb) and len(calls) == 2
    # dims innermost first, row stride in bytes, box = one 128-byte panel x tile rows, 128B
    _, rank, addr, dims, strides, box, _, _, swz, _, _ = calls[0]
    assert (rank, addr, dims, strides, box, swz) == (2, a.data_ptr(), [200, 300], [400],
                                                     [64, 128], 3)
    assert calls[1][3:6] == ([136, 200], [272], [64, 64])
    for i in range(5):   # bounded: old entries leave
        maps.matrix(a.data_ptr() + 16 * i, "f16", 300, 200, 200, tile_boxes(128, 64, 2)[0])
    assert len(maps) == 4


def test_unmappable_operands_are_refused():
    assert not can_map(0x1000, 2, 10, 777, 777, 1)      # row of 1554 bytes
    assert not can_map(0x1008, 2, 10, 64, 64, 1)        # misaligned base
    assert not can_map(0x1000, 2, 10, 64, 64, 2)        # strided columns
    assert can_map(0x1000, 2, 10, 776, 776, 1)


def test_default_encoder_goes_through_the_driver(tmp_path, monkeypatch):
    """Without an encoder, TensorMaps calls cuTensorMapEncodeTiled with the declared ctypes
    prototype (here the stand-in driver, which fills the 128 bytes with 0xab)."""
    from runtime_fakes import build_fake_libcuda

    from newt.runtime import driver
    cu = driver.load_library(build_fake_libcuda(tmp_path))
    monkeypatch.setattr(driver, "_lib", cu)
    maps = TensorMaps()
    ma, mb = _maps_of(maps, torch.randn(130, 72).bfloat16(), torch.randn(72, 200).bfloat16(),
                      128, 128, 64)
    assert bytes(ma) == b"\xab" * 128 and bytes(mb) == b"\xab" * 128 and maps.built == 2
