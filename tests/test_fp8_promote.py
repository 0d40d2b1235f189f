"""fp8 dots written `acc += nl.dot(a, b)`: each k-step's 8-bit products are summed apart and
added to the fp32 accumulator in fp32 (passes/tc/canonical.py's attrs["fp8_promote"],
codegen/tc/mma.py), while `nl.dot(a, b, acc)` keeps the tensor cores' own fp8 accumulation.
On the emulator of generated code (tests/test_dot_emulated.py; its wgmma products are exact,
so the numbers check the data flow and the source checks the form), and on the GPU at 4096^3,
where the tensor cores' accumulation alone misses an fp32 reference. Odd sizes, NaN-poisoned
outputs, results against torch."""
import os
import re
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(__file__))

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


@newt.jit
def fp8_acc_add(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
                FUSED: nl.constexpr):
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    acc = nl.zeros([BM, BN], dtype=nl.float32)
    for k0 in range(0, K, BK):
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k0 + offs_k)[None, :] < K), other=0.0)
        b = nl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k0 + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        if FUSED:
            acc = nl.dot(a, b, acc)
        else:
            acc += nl.dot(a, b)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(nl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _run(launch, M, N, K, da, db, device, fused, cfg):
    a = torch.randn(M, K, device=device).to(da)
    b = torch.randn(N, K, device=device).to(db).t()      # contiguous along K: 8-bit wgmma
    c = torch.full((M, N), float("nan"), device=device, dtype=torch.bfloat16)
    BM, BN, BK, W = cfg
    launch((-(-M // BM), -(-N // BN)), a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
           BM=BM, BN=BN, BK=BK, FUSED=fused, num_warps=W)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    return c, (a.double() @ b.double())


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("da,db,M,N,K,cfg,stages", [
    (E4, E4, 130, 150, 208, (128, 128, 64, 8), 3),   # 16-byte rows: the TMA ring
    (E4, E5, 70, 45, 100, (64, 64, 32, 4), 3),       # odd rows: the cp.async ring
    (E5, E5, 100, 90, 160, (64, 64, 32, 4), 2),
    (E4, E4, 70, 300, 144, (64, 256, 64, 4), 2),     # two pieces of 128 columns
], ids=["tma", "cp-async", "e5m2-s2", "n256"])
def test_fp8_acc_add_promotes_each_k_step_emulated(monkeypatch, da, db, M, N, K, cfg, stages):
    import test_dot_emulated as T
    E = T._emulator(monkeypatch, "sm_90a")
    torch.manual_seed(4)
    for fused in (False, True):
        T._STAGES[0] = stages
        c, ref = _run(lambda g, *a, **k: E.emulate(fp8_acc_add, g, *a, **k), M, N, K, da, db,
                      "cpu", fused, cfg)
        src = E.build.last_source
        assert re.search(r"newt_wgmma_e\w+\(", src), "not on 8-bit wgmma"
        # promoted: the wgmmas write a fresh block (scale-d 0 at the first k-step), added after
        promoted = re.search(r"newt_wgmma_e\w+\(&fp8_part\d+\[0\].*kk != 0\);", src)
        assert bool(promoted) == (not fused)
        assert bool(re.search(r"\w+\[\d+ \+ s\] \+= fp8_part\d+\[s\];", src)) == (not fused)
        if not fused and cfg[1] > 128:    # columns 128..255 of the fragment: slots 64..
            assert re.search(r"\w+\[64 \+ s\] \+= fp8_part\d+\[s\];", src)
        torch.testing.assert_close(c.double(), ref, atol=6e-2, rtol=1e-2)


@pytest.mark.parametrize("BN", [128, 256])
def test_promoted_fp8_tiles_compile_without_spills(BN):
    """The forms benchmark's fp8 rows (`acc += nl.dot(a, b)`, B column-major, 128 x BN x 128,
    8 warps, 4 stages) for sm_90a: promoted in pieces of 128 columns, no spills beside a
    128x256 accumulator."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import matmul_forms as mf
    from test_matmul_forms import _compile
    ck = _compile(mf.mm_plain, "sm_90a", "fp8e4nv", True, dict(BM=128, BN=BN, BK=128))
    assert "fp8_promote" in ck.ir and ck.source.count("+= fp8_part") == BN // 128
    assert ck.n_spills == 0 and ck.local_bytes == 0, (ck.n_spills, ck.local_bytes)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_fp8_acc_add_matches_fp32_at_4096_on_the_gpu():
    """deuteron's fp8_gemm shape (examples/dt_ops_matmul.py) and tolerance: with the tensor
    cores' fp8 accumulation over all of K, elements near zero missed by ~0.5 (H100)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("8-bit wgmma needs sm_90")
    torch.manual_seed(5)
    c, ref = _run(lambda g, *a, **k: fp8_acc_add[g](*a, **k, num_stages=3), 4096, 4096, 4096,
                  E4, E4, "cuda", False, (128, 128, 64, 8))
    torch.testing.assert_close(c.float(), ref.float().bfloat16().float(), atol=6e-2, rtol=6e-2)
