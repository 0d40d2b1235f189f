"""A dot's B contiguous along K (B given column-major, x @ W.T) through the cp.async ring: the
ring copies it into its K-major tile by 16-byte runs of k (codegen/tc/ring_kmajor.py) instead
of element by element with synchronous loads (passes/tc/ring_copies.py decides, the printed IR
says ring_copy='k_runs'). On the emulator of generated code (tests/test_dot_emulated.py) for
sm_80 (ldmatrix + mma.sync) and sm_90a (wgmma), masked and unmasked loops, rows 16-byte aligned
or not (the gathered fallback), fp16 and fp8: odd sizes, NaN-poisoned outputs, results against
torch. On sm_90a, 16-bit rows whose stride is not a multiple of 16 elements (padded, 16-byte
aligned) rule TMA out, as benchmarks/matmul_forms.py --no-tma does; the benchmark's tiles
compile for sm_80 and sm_90a without spills."""
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.ir.printer import format_function

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")


@newt.jit
def mm_colmajor_b(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                  BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr, MASKED: nl.constexpr):
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :]
        b_ptrs = b_ptr + (k + offs_k)[:, None] + offs_n[None, :] * stride_bn
        if MASKED:
            a = nl.load(a_ptrs, mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K),
                        other=0.0)
            b = nl.load(b_ptrs, mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N),
                        other=0.0)
        else:
            a = nl.load(a_ptrs)
            b = nl.load(b_ptrs)
        acc += nl.dot(a, b)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@pytest.mark.parametrize("arch,dt,M,N,K,pad,masked,cfg", [
    # the benchmark's tile; rows of K + 8 elements: 16-byte aligned, no TMA
    ("sm_90a", torch.float16, 128, 128, 192, 8, False, (128, 128, 64, 8)),
    ("sm_90a", torch.float16, 70, 45, 100, 0, True, (64, 64, 32, 4)),     # 200-byte rows: gathers
    ("sm_80", torch.float16, 100, 90, 136, 0, True, (64, 64, 32, 4)),     # aligned, tails
    ("sm_90a", torch.float8_e4m3fn, 70, 80, 200, 0, True, (64, 64, 64, 4)),   # 8-bit wgmma
], ids=["sm90-padded", "sm90-unaligned", "sm80-masked", "sm90-fp8"])
def test_column_major_b_copies_runs_of_k_emulated(monkeypatch, arch, dt, M, N, K, pad, masked,
                                                  cfg):
    import test_dot_emulated as T
    E = T._emulator(monkeypatch, arch)
    torch.manual_seed(6)
    a = torch.randn(M, K + pad).to(dt)[:, :K]
    b = torch.randn(N, K + pad).to(dt)[:, :K].t()     # [K, N], contiguous along K
    c = torch.full((M, N), float("nan"))
    BM, BN, BK, W = cfg
    E.emulate(mm_colmajor_b, (-(-M // BM), -(-N // BN)), a, b, c, M, N, K, a.stride(0),
              b.stride(1), c.stride(0), BM=BM, BN=BN, BK=BK, MASKED=masked, num_warps=W)
    src = E.build.last_source
    ir = format_function(E.build.last_fn)
    assert "tma)" not in ir and ir.count("ring_copy='k_runs'") == 1
    assert "kq = (ch %" in src, "B not copied by runs of k"
    assert "nt_sts<" not in src and "st.shared.b16" not in src and "st.shared.u8" not in src
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dt", ["fp16", "fp8e4nv"])
def test_column_major_b_runs_compile_without_spills(arch, dt):
    """The forms benchmark's unmasked B column-major form at its first tile (128x128x64 fp16,
    128x128x128 fp8; 8 warps, 4 stages), row strides not divisible by 16 (no TMA): NVRTC
    compiles the runs of k without spills. (sm_80 has no 8-bit tensor cores: its fp8 tiles are
    widened to fp16 between load and dot, without a ring.)"""
    import matmul_forms as mf
    from test_matmul_forms import _compile
    cfg = dict(BM=128, BN=128, BK=128 if dt.startswith("fp8") else 64)
    ck = _compile(mf.mm_plain, arch, dt, True, cfg, loose=("stride_am", "stride_bn"))
    assert ck.n_spills == 0 and ck.local_bytes == 0, (ck.n_spills, ck.local_bytes)
    ring = arch == "sm_90a" or dt == "fp16"
    assert ck.ir.count("ring_copy='k_runs'") == ring and "tma)" not in ck.ir
    assert ("kq = (ch %" in ck.source) == ring
