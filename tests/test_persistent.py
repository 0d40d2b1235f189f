"""The persistent form of a TMA-ring matmul (newt/passes/tc/persistent.py,
newt/codegen/tc/persistent.py) on the CPU: which kernels take it and why the others do not
(printed IR), the generated code run by the emulator with three SMs (so CTAs loop over several
programs, their rings running across them), and the launcher's clamped grid and hidden grid
parameter. GPU correctness: test_ops_dot.py / test_store_tma.py and benchmarks/bench_matmul.py
on the H200."""
import ctypes
import os
import re
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

from test_dot_tma_plan import _compile, _tutorial  # noqa: E402


def test_the_benchmark_tile_runs_persistent():
    k = _compile(_tutorial(), BLOCK_SIZE_N=256, ACTIVATION="")
    assert k.persistent
    assert "persistent(S=4, C panels 3 in the freed stage + 1)" in k.ir
    assert "nt_grid" in k.source and "nt_pid" in k.source
    assert k.n_spills == 0 and k.local_bytes == 0
    assert not re.search(r"\(C75\d\d\)", k.log), k.log     # no wgmma serialized by ptxas
    # the ring (4 x 48 KB), its barriers, one 16 KB panel of C and alignment slack
    assert 4 * 49152 + 16384 < k.shared_bytes <= 232448


@newt.jit
def _pid_bounded(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn, BLOCK_SIZE_M: nl.constexpr, BLOCK_SIZE_N: nl.constexpr,
                 BLOCK_SIZE_K: nl.constexpr, GROUP_SIZE_M: nl.constexpr):
    """Even programs skip the last k-step: the loop's trip count depends on the program."""
    pid = nl.program_id(axis=0)
    num_pid_n = nl.cdiv(N, BLOCK_SIZE_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_am = (pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = nl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_SIZE_K) - (pid + 1) % 2):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    nl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@pytest.mark.parametrize("kernel,kw,why", [
    (_tutorial, dict(BLOCK_SIZE_K=32, ACTIVATION=""),
     "leaves room for a second CTA per SM"),
    (lambda: _pid_bounded, dict(BLOCK_SIZE_N=256), "bounds depend on the program id"),
])
def test_what_stays_non_persistent_says_why(kernel, kw, why):
    k = _compile(kernel(), **kw)
    assert k.tma_maps, "the ring did not take TMA"
    assert not k.persistent and "nt_grid" not in k.source
    assert "persistent_why=" in k.ir and why in k.ir, k.ir


def test_sm80_is_never_persistent():
    k = _compile(_tutorial(), arch="sm_80", ACTIVATION="")     # 128x128x64, 4 stages
    assert not k.persistent and "persistent" not in k.ir


@pytest.fixture
def emu90(monkeypatch):
    from test_dot_emulated import _emulator
    return _emulator(monkeypatch, "sm_90a")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dt,M,N,K,cfg,act", [
    # (sizes: rows 16-byte aligned, so the rings take TMA) 9 programs on 3 CTAs, 4 k-steps
    # each: copies cross programs mid-ring; C's two panels both in the freed stage
    (torch.float16, 300, 288, 208, (128, 128, 64, 8, 4), "leaky_relu"),
    # the benchmark's tile: 6 programs (two per CTA), one k-step each:
    # the first S - 1 copies already span programs; C's fourth panel in the region of its own
    (torch.bfloat16, 140, 528, 48, (128, 256, 64, 8, 4), ""),
    # 256-row tiles: one 32 KB panel in the freed stage, the other after the barriers; the
    # last program's tile clipped at M and N
    (torch.float16, 300, 208, 144, (256, 128, 64, 8, 4), ""),
], ids=["f16-128x128-9-programs", "bf16-128x256-one-k-step", "f16-256x128"])
def test_persistent_matmul_emulated(emu90, dt, M, N, K, cfg, act):
    from test_dot_emulated import _run_tutorial
    _run_tutorial(emu90, dt, M, N, K, cfg, act)
    assert emu90.build.last_persistent, "the kernel did not run persistent"


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_persistent_matmul_with_no_k_step_stores_zeros(emu90):
    """K = 0: no copy at all; every program stores its zero accumulator. (The operands have
    storage: the kernel reads their first K = 0 columns / rows.)"""
    import bench_matmul as bm
    M, N = 260, 304
    a, b = torch.randn(M, 16).half(), torch.randn(16, N).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    emu90.emulate(bm.example().matmul_kernel, (3 * 2,), a, b, c, M, N, 0, a.stride(0), 1,
                  b.stride(0), 1, c.stride(0), c.stride(1), BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="", num_warps=8, num_stages=4)
    assert emu90.build.last_persistent
    assert (c == 0).all()


def test_the_launcher_clamps_the_grid_and_passes_it(tmp_path_factory, monkeypatch, tmp_cache):
    """One CTA per SM (the stand-in driver has 132), the grid in the hidden last parameter."""
    from runtime_fakes import build_fake_libcuda, fake_state, install_fake_gpu

    from newt.runtime import driver
    cu = driver.load_library(build_fake_libcuda(tmp_path_factory.mktemp("fakecuda")))
    install_fake_gpu(cu, monkeypatch)
    ctypes.c_int.in_dll(cu, "fake_nparams").value = 13      # 9 arguments, 3 maps, the grid
    import bench_matmul as bm
    M = N = K = 2048
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.empty(M, N).half()
    k = bm.example().matmul_kernel
    for grid, launched in ((128, 128), (300, 132)):
        k[(grid,)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                   c.stride(0), c.stride(1), BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                   BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="", num_warps=8, num_stages=4)
        st = fake_state(cu)
        assert st.grid == (launched, 1, 1)
        assert st.params[12] & 0xFFFFFFFF == grid


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dt,M,N,K,cfg", [
    (torch.float16, 4224, 2560, 512, (128, 256, 64, 8, 4)),    # 330 programs on 132 SMs
    (torch.bfloat16, 4100, 4000, 48, (128, 256, 64, 8, 4)),    # one k-step, tiles clipped
    (torch.float16, 3000, 2064, 1008, (256, 128, 64, 8, 4)),   # K tail, 256-row tiles
    (torch.bfloat16, 2176, 4096, 320, (128, 256, 64, 8, 3)),   # 3 stages
])
def test_persistent_matmul_gpu(dt, M, N, K, cfg):
    import bench_matmul as bm
    torch.manual_seed(5)
    k = bm.example().matmul_kernel
    a, b = torch.randn(M, K, device="cuda").to(dt), torch.randn(K, N, device="cuda").to(dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    bm.launch(k, a, b, c, cfg)
    assert k._hot[0][-1].binary.meta["persistent"], "the kernel did not run persistent"
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (2e-3 if dt == torch.float16 else 8e-3), err


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_persistent_epilogue_mixes_box_and_per_element_stores(emu90):
    """A 2-D grid (the loop runs over axis 0) whose first row of tiles starts at row -16: those
    programs store element by element (store_tma.py's fallback), the others by boxes, and a CTA
    runs both kinds one after the other."""
    from test_dot_emulated import _STAGES, _store_maps
    from test_store_tma import _check, shifted_matmul
    torch.manual_seed(4)
    M, N, K, shift = 600, 304, 48, 16
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    full = torch.full((M + shift, N), float("nan"), dtype=torch.float16)
    c = full[shift:]
    _STAGES[0] = 4
    grid = (-(-(M + shift) // 128), -(-N // 256))      # 5 x 2 programs, CTAs 0 and 1 run two
    emu90.emulate(shifted_matmul, grid, a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                  SHIFT=shift, WRAP=False, BM=128, BN=256, BK=64, num_warps=8, num_stages=4)
    assert emu90.build.last_persistent and _store_maps(emu90.build.last_maps) == 1
    _check(full, a, b, M, shift, grid[0] * 128, torch.float16)
