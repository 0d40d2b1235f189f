"""Dots whose B operand is contiguous along K (x @ W.T, Triton's fp8 tutorial's b.T), in the
generated code run on the CPU (the emulator of tests/test_dot_emulated.py): B's tile is K-major
([N][K]); on sm_90a TMA fills it with transposed boxes. fp8 dots take 8-bit wgmma there (by TMA
or by the cp.async ring), and the fp16 path where 8-bit wgmma cannot take the operands (sm_80,
B contiguous along N); fp16, bf16 and tf32 read the same K-major tile (tf32 then needs no
swapped product). Odd sizes, NaN-poisoned outputs, results against torch in fp64 (the emulator's
products are exact; the tensor cores' fp8 accumulation is checked on the GPU)."""
import os
import shutil
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

from test_dot_emulated import _STAGES, _emulator, _load_maps  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def _kinds(src: str) -> set:
    """The wgmma kinds the generated code calls (its helpers are named newt_wgmma_<kind>_n<N>;
    the emulator replaced their bodies)."""
    import re
    return set(re.findall(r"\bnewt_wgmma_(\w+?)_n\d+(?:_t?[ab])*\(", src))


def _check(c, a, b, act=""):
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = a.double() @ b.double()
    if act:
        ref = torch.where(ref >= 0, ref, 0.01 * ref)
    # the fp16 output rounds: relative 2^-11 of each element
    torch.testing.assert_close(c.double(), ref, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("da,db,M,N,K,cfg,act", [
    # one warpgroup, 64-byte rows (64-byte swizzle) for A and B; K tail; wrapped rows
    (E4, E4, 100, 90, 208, (64, 64, 64, 4, 3), "leaky_relu"),
    # two warpgroups, 128-byte rows; mixed formats; 4 stages
    (E4, E5, 130, 150, 304, (128, 128, 128, 8, 4), ""),
    # e5m2 both, 2 stages, N = 256 (one m64n256 instruction per k-step)
    (E5, E5, 70, 256, 96, (64, 256, 32, 4, 2), ""),
], ids=["e4m3-w4", "mixed-w8-s4", "e5m2-n256-s2"])
def test_tutorial_matmul_fp8_tma_emulated(monkeypatch, da, db, M, N, K, cfg, act):
    """A [M, K] and B = (B^T [N, K]).T with 16-byte aligned rows: both operands arrive by TMA,
    B's box set transposed ([N][K], the K-major tile 8-bit wgmma reads)."""
    import bench_matmul as bm
    E = _emulator(monkeypatch, "sm_90a")
    torch.manual_seed(0)
    a = torch.randn(M, K).to(da)
    b = torch.randn(N, K).to(db).t()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    BM, BN, BK, W, S = cfg
    _STAGES[0] = S
    E.emulate(bm.example().matmul_kernel, (-(-M // BM) * -(-N // BN),), a, b, c, M, N, K,
              *a.stride(), *b.stride(), *c.stride(), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
              BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION=act, num_warps=W, num_stages=S)
    assert _load_maps(E.build.last_maps) == 2, "the ring did not take TMA"
    names = {E4: "e4m3", E5: "e5m2"}
    assert _kinds(E.build.last_source) == {names[da] if da == db else f"{names[da]}_{names[db]}"}
    _check(c, a, b, act)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fp8_matmul_cp_async_emulated(monkeypatch, arch):
    """Rows not 16-byte aligned (K = 100): on sm_90a the cp.async ring feeds 8-bit wgmma (B
    copied into its K-major tile element by element); sm_80 computes in fp16. e4m3 A, e5m2 B
    contiguous along K, masked tails."""
    from test_fp8 import fp8_matmul_kernel
    E = _emulator(monkeypatch, arch)
    torch.manual_seed(2)
    M, N, K = 70, 45, 100
    a = torch.randn(M, K).to(E4)
    b = torch.randn(N, K).to(E5).t()
    c = torch.full((M, N), float("nan"))
    E.emulate(fp8_matmul_kernel, (-(-M // 64), -(-N // 64)), a, b, c, M, N, K, *a.stride(),
              *b.stride(), *c.stride(), BM=64, BN=64, BK=32, num_warps=4)
    assert not _load_maps(E.build.last_maps)
    assert _kinds(E.build.last_source) == ({"e4m3_e5m2"} if arch == "sm_90a" else set())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-3, rtol=1e-4)


def test_fp8_with_b_along_n_computes_in_fp16_emulated(monkeypatch):
    """B contiguous along N: 8-bit wgmma cannot read it, the dot runs on fp16 wgmma."""
    from test_fp8 import fp8_matmul_kernel
    E = _emulator(monkeypatch, "sm_90a")
    torch.manual_seed(3)
    M, N, K = 64, 80, 96
    a = torch.randn(M, K).to(E4)
    b = torch.randn(K, N).to(E4)
    c = torch.full((M, N), float("nan"))
    E.emulate(fp8_matmul_kernel, (1, 2), a, b, c, M, N, K, *a.stride(), *b.stride(),
              *c.stride(), BM=64, BN=64, BK=32, num_warps=4)
    assert _kinds(E.build.last_source) == {"f16"}
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-3, rtol=1e-4)


def _k_dot_kmajor():
    import newt
    import newt.language as nl

    @newt.jit
    def k_dot(a_ptr, bt_ptr, c_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr,
              K: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = nl.load(bt_ptr + rk[:, None] + rn[None, :] * K)      # B^T stored [N, K]
        c = nl.load(c_ptr + rm[:, None] * N + rn[None, :])
        nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.dot(a, b, c))
    return k_dot


@pytest.mark.parametrize("M,N,K,W", [(64, 32, 64, 4), (128, 64, 128, 8)])
def test_single_fp8_dot_emulated(monkeypatch, M, N, K, W):
    """A dot outside a loop: tiles copied from memory into the K-major tiles, acc from memory."""
    E = _emulator(monkeypatch, "sm_90a")
    torch.manual_seed(1)
    a = torch.randn(M, K).to(E5)
    bt = torch.randn(N, K).to(E4)
    c = torch.randn(M, N)
    out = torch.full((M, N), float("nan"))
    E.emulate(_k_dot_kmajor(), (1,), a, bt, c, out, M=M, N=N, K=K, num_warps=W)
    assert _kinds(E.build.last_source) == {"e5m2_e4m3"}
    torch.testing.assert_close(out.double(), a.double() @ bt.double().t() + c.double(),
                               atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("arch,dt,M,N,K,cfg", [
    # 16-byte aligned rows: both operands by TMA, B's boxes transposed; K tail, wrapped rows
    ("sm_90a", torch.float16, 100, 90, 208, (64, 64, 64, 4, 3)),
    ("sm_90a", torch.bfloat16, 130, 150, 336, (128, 128, 64, 8, 4)),
    # tf32 with a K-major B: no swapped product (B^T fragments from registers) needed
    ("sm_90a", torch.float32, 70, 72, 96, (64, 64, 32, 4, 3)),
    # rows not aligned (K = 100): the cp.async ring copies B into its K-major tile
    ("sm_90a", torch.float16, 70, 45, 100, (64, 64, 32, 4, 3)),
    # sm_80: ldmatrix without .trans reads the K-major tile
    ("sm_80", torch.float16, 100, 90, 208, (64, 64, 64, 4, 3)),
], ids=["f16-tma", "bf16-tma-w8", "tf32-tma", "f16-cp-async", "f16-sm80"])
def test_tutorial_matmul_b_along_k_emulated(monkeypatch, arch, dt, M, N, K, cfg):
    import bench_matmul as bm
    E = _emulator(monkeypatch, arch)
    torch.manual_seed(4)
    a = torch.randn(M, K).to(dt)
    b = torch.randn(N, K).to(dt).t()
    c = torch.full((M, N), float("nan"), dtype=dt)
    BM, BN, BK, W, S = cfg
    _STAGES[0] = S
    E.emulate(bm.example().matmul_kernel, (-(-M // BM) * -(-N // BN),), a, b, c, M, N, K,
              *a.stride(), *b.stride(), *c.stride(), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
              BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION="", num_warps=W, num_stages=S)
    aligned = (K * a.element_size()) % 16 == 0
    assert _load_maps(E.build.last_maps) == (2 if arch == "sm_90a" and aligned else 0)
    src = E.build.last_source
    assert "newt_lds64" not in src     # not swapped: B^T's fragments are not read into registers
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < {torch.float16: 2e-3, torch.bfloat16: 8e-3, torch.float32: 2e-3}[dt], err


@pytest.mark.parametrize("b_along_k,M,N,K,cfg", [
    (True, 100, 90, 208, (64, 64, 64, 4, 3)),        # TMA, B's boxes transposed
    (True, 70, 130, 100, (64, 128, 32, 4, 2)),       # rows not aligned: cp.async ring
    (False, 100, 90, 208, (128, 64, 64, 8, 3)),      # B along N: copied transposed
    (False, 130, 64, 96, (64, 64, 64, 4, 3)),        # ... also when its rows are aligned
], ids=["w_t-tma", "w_t-cp-async", "b-w8", "b-aligned"])
def test_int8_matmul_wgmma_emulated(monkeypatch, b_along_k, M, N, K, cfg):
    """int8 on sm_90a: 8-bit wgmma into an s32 accumulator (B's tile K-major as ever)."""
    from test_ops_dot import int8_matmul_kernel
    E = _emulator(monkeypatch, "sm_90a")
    torch.manual_seed(5)
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), dtype=torch.int8).t() if b_along_k else \
        torch.randint(-128, 128, (K, N), dtype=torch.int8)
    c = torch.full((M, N), -7, dtype=torch.int32)
    BM, BN, BK, W, S = cfg
    _STAGES[0] = S
    E.emulate(int8_matmul_kernel, (-(-M // BM), -(-N // BN)), a, b, c, M, N, K, *a.stride(),
              *b.stride(), *c.stride(), BM=BM, BN=BN, BK=BK, num_warps=W, num_stages=S)
    assert _load_maps(E.build.last_maps) == (2 if b_along_k and K % 16 == 0 else 0)
    assert _kinds(E.build.last_source) == {"s8"}
    assert torch.equal(c, (a.long() @ b.long()).to(torch.int32))


@pytest.mark.parametrize("arch,dt,M,N,K,W", [
    ("sm_90a", torch.float16, 100, 90, 208, 4),      # TMA: the boxes of the transposed block
    ("sm_90a", torch.bfloat16, 70, 45, 100, 4),      # rows not aligned: the cp.async ring
    ("sm_80", torch.float16, 100, 90, 208, 4),
    ("sm_90a", E4, 100, 90, 208, 4),                 # fp8: 8-bit wgmma on the K-major tile
], ids=["f16-tma", "bf16-cp-async", "f16-sm80", "e4m3-tma"])
def test_dot_of_transposed_load_emulated(monkeypatch, arch, dt, M, N, K, W):
    """nl.dot(a, nl.trans(w)): the transposed load becomes a load of the transposed block, so
    the tiles go through the ring (and TMA) as for B = W.T written with strides."""
    from test_ops_dot import matmul_wt_kernel
    E = _emulator(monkeypatch, arch)
    torch.manual_seed(6)
    a = torch.randn(M, K).to(dt)
    w = torch.randn(N, K).to(dt)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    E.emulate(matmul_wt_kernel, (-(-M // 64), -(-N // 64)), a, w, c, M, N, K, a.stride(0),
              w.stride(0), c.stride(0), BM=64, BN=64, BK=32, num_warps=W)
    aligned = (K * a.element_size()) % 16 == 0
    assert _load_maps(E.build.last_maps) == (2 if arch == "sm_90a" and aligned else 0)
    src = E.build.last_source
    assert "ring_it" in src, "the tiles did not go through the ring"
    if arch == "sm_90a":
        assert _kinds(src) == {"e4m3" if dt == E4 else {torch.float16: "f16"}.get(dt, "bf16")}
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = a.double() @ w.double().t()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < 8e-3, err
