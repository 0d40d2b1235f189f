"""The tutorial matmul's generated code for sm_80 and sm_90a run on the CPU: cp.async ring,
strided copies, transposed 4-byte copies, mask groups, ldmatrix + mma.sync, wgmma.mma_async
from shared-memory descriptors, the per-group epilogue store.

Uses the backend's emulator (tests/test_codegen_emulator.py: one OS thread per CUDA thread)
and swaps the dot helpers' inline PTX for C++ models of the instructions, written from the PTX
ISA: cp.async copies at once (so commit/wait are no-ops), ldmatrix and mma.sync exchange
fragments through a per-warp buffer with the fragment tables; wgmma.mma_async decodes its
matrix descriptors (start, LBO, SBO, swizzle mode) and reads the canonical K-major / MN-major
swizzled layouts itself, with commit_group / wait_group as real ordering points (see
EMU_WGMMA in tests/emu_dot.py); it also fails on operands written through the generic proxy
(cp.async, st.shared) by a thread that has not executed fence.proxy.async since, and on wgmmas
that are not the same instruction across a warpgroup. Results are compared with torch on odd shapes
with a NaN-poisoned output, so every element must be written."""
import os
import shutil
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

from emu_dot import emulated_source  # noqa: E402  (the instruction models)


_STAGES = [3]


def _load_maps(maps) -> int:
    """How many of a build's TMA maps feed operand loads (passes/tc/dot_tma.py)."""
    return sum(not m.get("optional") for m in maps)


def _store_maps(maps) -> int:
    """How many store the epilogue's tile (passes/tc/store_tma.py: optional maps)."""
    return sum(bool(m.get("optional")) for m in maps)


def _emulator(monkeypatch, arch):
    import test_codegen_emulator as E

    import newt.codegen as C
    from newt.options import Options
    orig = C.generate

    def generate(fn, opts):
        src, name = orig(fn, opts)
        return emulated_source(src), name

    monkeypatch.setattr(C, "generate", generate)
    # the emulator's build() passes num_warps only: num_stages comes from _STAGES
    monkeypatch.setattr(E, "Options", lambda arch=None, num_warps=4, _a=arch:
                        Options(arch=_a, num_warps=num_warps, num_stages=_STAGES[0]))
    _STAGES[0] = 3
    return E


@pytest.fixture
def emu(monkeypatch):
    return _emulator(monkeypatch, "sm_80")


@pytest.fixture
def emu90(monkeypatch):
    return _emulator(monkeypatch, "sm_90a")


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


def _run_tutorial(E, dt, M, N, K, cfg, act, strides=None):
    import bench_matmul as bm
    torch.manual_seed(0)
    k = bm.example().matmul_kernel
    a = torch.randn(M, K).to(dt)
    b = torch.randn(K, N).to(dt)
    if strides == "bT":     # B stored transposed (column-major), A with padded rows
        b = torch.randn(N, K).to(dt).t()
        a = torch.randn(M, K + 8).to(dt)[:, :K]
    c = torch.full((M, N), float("nan"), dtype=dt)
    BM, BN, BK, W, S = cfg
    _STAGES[0] = S
    grid = (-(-M // BM) * -(-N // BN),)
    E.emulate(k, grid, a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
              c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK,
              GROUP_SIZE_M=8, ACTIVATION=act, num_warps=W, num_stages=S)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = _ref(a, b, act)
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < {torch.float16: 2e-3, torch.bfloat16: 8e-3, torch.float32: 2e-3}[dt], err


@pytest.mark.parametrize("dt,M,N,K,cfg,act,strides", [
    # one warpgroup; 64-byte A rows (swizzle 64), 128-byte B panel; K tail; wrapped rows
    (torch.float16, 100, 90, 250, (64, 64, 32, 4, 3), "leaky_relu", None),
    # two warpgroups, B two 128-byte panels (MN-major LBO), 4 stages (D = 3, wait_group 1)
    (torch.bfloat16, 130, 150, 333, (128, 128, 64, 8, 4), "", None),
    # tf32: B K-major (4-byte transposed copies), 32-byte swizzle of A rows... of B rows
    (torch.float32, 70, 72, 100, (64, 64, 16, 4, 3), "", None),
    # strided / transposed operands take the gather copies
    (torch.float16, 65, 64, 48, (64, 64, 16, 4, 3), "", "bT"),
    # the benchmark's winning config itself (2 warpgroups x 2 m64 sub-tiles, 4 stages)
    (torch.float16, 257, 130, 200, (256, 128, 64, 8, 4), "leaky_relu", None),
    # ring depths: 2 stages (D = 1) and 5 (D = 4); every depth consumes early, leaves one wgmma
    # in flight (wait_group 1) and copies into the stage the one before it read
    (torch.bfloat16, 100, 70, 300, (64, 64, 32, 4, 2), "", None),
    (torch.bfloat16, 100, 70, 300, (64, 64, 32, 4, 5), "", None),
], ids=["f16-w4", "bf16-w8-s4", "tf32", "f16-transposed", "bench-256x128x64-w8-s4", "s2", "s5"])
def test_tutorial_matmul_wgmma_emulated(emu90, dt, M, N, K, cfg, act, strides):
    """The sm_90a code (cp.async ring + wgmma.mma_async from swizzled descriptors) on the CPU."""
    _run_tutorial(emu90, dt, M, N, K, cfg, act, strides)


def _k_dot():
    import newt
    import newt.language as nl

    @newt.jit
    def k_dot(a_ptr, b_ptr, c_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
        c = nl.load(c_ptr + rm[:, None] * N + rn[None, :])
        nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.dot(a, b, c))
    return k_dot


@pytest.mark.parametrize("dt,M,N,K,W", [
    (torch.float16, 64, 32, 64, 4),      # B rows of 64 bytes: 64-byte swizzle, one panel
    (torch.bfloat16, 128, 128, 32, 8),   # B two 128-byte panels; two warpgroups
    (torch.float32, 64, 16, 32, 4),      # tf32: K-major B tile (16 rows of 128 bytes)
    (torch.float16, 128, 16, 16, 4),     # two m64 sub-tiles per warpgroup, n16, 32-byte rows
], ids=["f16", "bf16-w8", "tf32", "f16-n16"])
def test_single_dot_wgmma_emulated(emu90, dt, M, N, K, W):
    """A dot outside a loop (operands staged from registers, acc read from memory)."""
    torch.manual_seed(1)
    a = torch.randn(M, K).to(dt)
    b = torch.randn(K, N).to(dt)
    c = torch.randn(M, N)
    out = torch.full((M, N), float("nan"))
    emu90.emulate(_k_dot(), (1,), a, b, c, out, M=M, N=N, K=K, num_warps=W)
    ref = a.double() @ b.double() + c.double()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < (2e-3 if dt != torch.bfloat16 else 8e-3), err


def _k_two_orders():
    import newt
    import newt.language as nl

    @newt.jit
    def k_two_orders(A, B, C, Out, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(A + rm[:, None] * K + rk[None, :])
        acc = nl.zeros([M, N], dtype=nl.float32)
        for i in range(0, 2):
            b_t = nl.load(B + i * N * K + rk[:, None] + rn[None, :] * K)   # B^T as stored
            c = nl.load(C + i * N * K + rk[:, None] * N + rn[None, :])
            acc = nl.dot(a, b_t, acc)
            acc = nl.dot(a, c, acc)
        nl.store(Out + rm[:, None] * N + rn[None, :], acc)
    return k_two_orders


def test_two_b_orders_of_one_shape_wgmma_emulated(emu90):
    """Two dots of one shape, one with a K-major B tile (read transposed from [N, K] storage)
    and one MN-major: the wgmma helpers differ in the trans-b operand, so they need two
    names (one name for both ran the first one's order for the second dot)."""
    torch.manual_seed(2)
    M, N, K = 64, 16, 32
    a = torch.randn(M, K).half()
    b = torch.randn(2, N, K).half()
    c = torch.randn(2, K, N).half()
    out = torch.full((M, N), float("nan"))
    emu90.emulate(_k_two_orders(), (1,), a, b, c, out, M=M, N=N, K=K, num_warps=4)
    ref = sum(a.double() @ b[i].double().T + a.double() @ c[i].double() for i in range(2))
    torch.testing.assert_close(out.double(), ref, atol=2e-3, rtol=2e-3)


def _k_tile_and_transpose():
    import newt
    import newt.language as nl

    @newt.jit
    def k_tile_and_transpose(A, B, X, Out1, Out2, M: nl.constexpr, N: nl.constexpr,
                             K: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(A + rm[:, None] * K + rk[None, :])
        b = nl.load(B + rm[:, None] * N + rn[None, :])
        acc1 = nl.zeros([M, N], dtype=nl.float32)
        acc2 = nl.zeros([M, K], dtype=nl.float32)
        for i in range(0, 2):
            x = nl.load(X + i * K * N + rk[:, None] * N + rn[None, :])
            acc1 = nl.dot(a, x, acc1)
            acc2 = nl.dot(b, nl.trans(x), acc2)
        nl.store(Out1 + rm[:, None] * N + rn[None, :], acc1)
        nl.store(Out2 + rm[:, None] * K + rk[None, :], acc2)
    return k_tile_and_transpose


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tile_and_its_transpose_as_operands_emulated(monkeypatch, arch):
    """One loaded tile read by a dot and, transposed, by another (attention's backward: Q and
    dO): passes/tc/trans_loads.py adds a load of the transposed block beside the first one,
    so no register transpose through shared memory remains."""
    import newt
    kern = _k_tile_and_transpose()
    sig = dict(A="*fp16", B="*fp16", X="*fp16", Out1="*fp32", Out2="*fp32")
    k = newt.compile(kern, sig, dict(M=64, N=16, K=32), arch=arch, num_warps=4)
    assert "permute" not in k.ir and k.n_spills == 0
    E = _emulator(monkeypatch, arch)
    torch.manual_seed(3)
    M, N, K = 64, 16, 32
    a, b, x = torch.randn(M, K).half(), torch.randn(M, N).half(), torch.randn(2, K, N).half()
    out1, out2 = torch.full((M, N), float("nan")), torch.full((M, K), float("nan"))
    E.emulate(kern, (1,), a, b, x, out1, out2, M=M, N=N, K=K, num_warps=4)
    xd = x.double()
    torch.testing.assert_close(out1.double(), a.double() @ (xd[0] + xd[1]), atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(out2.double(), b.double() @ (xd[0] + xd[1]).T, atol=2e-3,
                               rtol=2e-3)


@pytest.mark.parametrize("dt,M,N,K,cfg,act", [
    # wrapped rows and columns (M, N past the last tile), K tail, activation epilogue
    (torch.float16, 130, 160, 336, (128, 128, 64, 8, 4), "leaky_relu"),
    # one warpgroup, 64-byte A rows (a 64-byte swizzled box), 3 stages (D = 2)
    (torch.bfloat16, 100, 96, 272, (64, 64, 32, 4, 3), ""),
    # 2 stages: D = 1, thread 0 refills the stage its own iteration released
    (torch.float16, 70, 80, 48, (64, 64, 16, 4, 2), ""),
    # 5 stages (D = 4), B two 128-byte panels (two boxes per B tile)
    (torch.bfloat16, 64, 128, 400, (64, 128, 64, 4, 5), ""),
    # tf32, computed swapped (C^T = B^T A^T, codegen/tc/dot_swap.py): one warpgroup; two
    # warpgroups with two 64-row sub-tiles of C^T each (BN = 256); M' = 256 columns of C^T
    (torch.float32, 70, 144, 112, (64, 64, 32, 4, 3), "leaky_relu"),
    (torch.float32, 100, 304, 80, (128, 256, 32, 8, 4), ""),
    (torch.float32, 260, 128, 48, (256, 128, 16, 8, 2), ""),
    # the benchmark's tiles: 256-row boxes (the TMA limit) and four 64-column panels of C
    (torch.float16, 300, 144, 80, (256, 128, 32, 8, 3), "leaky_relu"),
    (torch.bfloat16, 140, 272, 64, (128, 256, 32, 8, 3), ""),
], ids=["f16-wrap-w8-s4", "bf16-s3", "f16-s2", "bf16-s5", "tf32-swapped", "tf32-swapped-n256",
        "tf32-swapped-m256", "f16-256x128", "bf16-128x256"])
def test_tutorial_matmul_tma_emulated(emu90, dt, M, N, K, cfg, act):
    """Operand rows 16-byte aligned: the ring's tiles arrive as TMA boxes on mbarriers
    (passes/tc/dot_tma.py, codegen/tc/dot_tma.py), with the maps the launcher would encode."""
    _run_tutorial(emu90, dt, M, N, K, cfg, act)
    assert _load_maps(emu90.build.last_maps) == 2, "the ring did not take TMA"
    # 16-bit tiles leave by TMA boxes (the activation computed in the fragment); fp32 ones
    # (the swapped tf32 dot) by per-thread stores
    assert _store_maps(emu90.build.last_maps) == (dt != torch.float32)


@pytest.mark.parametrize("dt,M,N,K,S", [(torch.float16, 100, 112, 80, 3),
                                        (torch.bfloat16, 64, 208, 160, 4)])
def test_masked_matmul_tma_emulated(emu90, dt, M, N, K, S):
    """The masked form of the tutorial (`rm < M` / `rn < N` masks instead of `% M` wraps,
    test_ops_dot.py's kernel): its tiles arrive by TMA too, the masks becoming the maps'
    extents."""
    from test_ops_dot import matmul_kernel
    torch.manual_seed(2)
    a = torch.randn(M, K).to(dt)
    b = torch.randn(K, N).to(dt)
    c = torch.full((M, N), float("nan"), dtype=dt)
    _STAGES[0] = S
    grid = (-(-M // 64) * -(-N // 64),)
    emu90.emulate(matmul_kernel, grid, a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                  b.stride(1), c.stride(0), c.stride(1), BM=64, BN=64, BK=32, GROUP_M=2,
                  num_warps=4, num_stages=S)
    assert _load_maps(emu90.build.last_maps) == 2, "the ring did not take TMA"
    assert _store_maps(emu90.build.last_maps) == 1, "the store did not take TMA"
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (2e-3 if dt == torch.float16 else 8e-3), err


import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def clamped_rows_mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                    BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    # rows and columns past the tensor clamped to 0 with `where` (not wrapped with `%`)
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    ra = nl.max_contiguous(nl.multiple_of(nl.where(rm < M, rm, 0), BM), BM)
    rb = nl.max_contiguous(nl.multiple_of(nl.where(rn < N, rn, 0), BN), BN)
    rk = nl.arange(0, BK)
    a_ptrs = a_ptr + ra[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rb[None, :] * sbn
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        acc = nl.dot(nl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0),
                     nl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0), acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    nl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_clamped_matmul_tma_emulated(emu90):
    """`where(rm < M, rm, 0)` keeps rows inside as `% M` does: the tiles arrive by TMA all the
    same (rows past M read zeros instead of row 0; the store never writes them)."""
    torch.manual_seed(3)
    M, N, K = 100, 144, 80
    a, b = torch.randn(M, K).to(torch.float16), torch.randn(K, N).to(torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    emu90.emulate(clamped_rows_mm, (2, 3), a, b, c, M, N, K, a.stride(0), a.stride(1),
                  b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM=64, BN=64, BK=32,
                  num_warps=4)
    assert _load_maps(emu90.build.last_maps) == 2, "the ring did not take TMA"
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    assert float((c.double() - ref).norm() / ref.norm()) < 2e-3
