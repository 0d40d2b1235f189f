"""Dots whose M rows do not give every warp a 16-row strip (BM = 64 on 8 warps, 32 on 4, 16 on
2) split the warps along N as well (AccLayout's column groups, newt/ir/layouts.py; decided by
plan_dot, newt/ir/schedule.py) and stay on tensor cores instead of the FMA engine.

Checked on the CPU: the layout's Python model and C form agree and cover every element once;
the plan (printed IR) says mma with the split, wgmma on sm_90a where each column group is whole
warpgroups; the generated code compiles for sm_80 and sm_90a without spills; it runs on the CPU
emulator of generated code (tests/test_dot_emulated.py's, with the mma.sync / wgmma models of
tests/emu_dot.py) against torch on odd shapes with masks and NaN-poisoned outputs: fp16 and bf16,
a fused bias add and cast, an output stored by TMA boxes, a row reduction of a split fragment.
On a GPU, the same kernels against torch (skipped without one)."""
import os
import re
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.ir.layouts import AccLayout

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from conftest import HAS_CUDA  # noqa: E402
from lab.matmul_col_groups import mm_bias  # noqa: E402  (the lab benchmark's kernel)

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")


@newt.jit
def dot_minus_rowmax(a_ptr, b_ptr, c_ptr, BM: nl.constexpr, BN: nl.constexpr,
                     BK: nl.constexpr):
    """s - max(s, axis=1): a row reduction of a fragment whose rows span column groups."""
    rm, rn, rk = nl.arange(0, BM), nl.arange(0, BN), nl.arange(0, BK)
    s = nl.dot(nl.load(a_ptr + rm[:, None] * BK + rk[None, :]),
               nl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    nl.store(c_ptr + rm[:, None] * BN + rn[None, :], s - nl.max(s, axis=1)[:, None])


# (BM, BN, BK, num_warps): the split's three shapes, at tiles that keep 2 warps spill-free
CONFIGS = [(64, 64, 32, 8), (32, 64, 32, 4), (16, 64, 32, 2), (64, 128, 32, 8)]


@pytest.mark.parametrize("M,N,T", [(64, 128, 256), (64, 64, 256), (32, 64, 128), (16, 32, 64),
                                   (32, 64, 256), (16, 64, 128)])
def test_split_layout_covers_every_element_once(M, N, T):
    """The fragment split in column groups (the fewest that fit) on its Python model: a
    bijection onto the M x N elements; its C form (int and symbolic slots) gives the same
    (row, column); each warp holds 16-row strips of one column slice."""
    C = AccLayout.col_groups(M, N, T)
    assert C > 1 and not AccLayout.fits(M, N, T)
    lay = AccLayout(M, N, T, C)
    seen = set()
    for t in range(T):
        for s in range(lay.nslots):
            f = lay.py_flat(t, s)
            seen.add(f)
            assert (f % N) // lay.Nw == (t // 32) // lay.Wr     # the warp's column slice
            for slot in (s, "s"):
                r, c = (eval(x.replace("/", "//"), {"t": t, "s": s})
                        for x in lay.row_col("t", slot))
                assert r * N + c == f
    assert seen == set(range(M * N)) and len(seen) == T * lay.nslots
    assert lay != AccLayout(M, N, T) and "column groups" in str(lay)


def _sig(dt="fp16", out=None):
    sig = dict(a_ptr=f"*{dt}", b_ptr=f"*{dt}", bias_ptr=f"*{dt}", c_ptr=f"*{out or dt}")
    sig.update({p: "i32" for p in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")})
    return sig


def _compile(arch, cfg, dt="fp16", bias=1):
    BM, BN, BK, W = cfg
    return newt.compile(mm_bias, _sig(dt), dict(BM=BM, BN=BN, BK=BK, BIAS=bias), arch=arch,
                        num_warps=W, num_stages=3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
def test_split_configs_take_tensor_cores_without_spills(arch, cfg):
    """The printed plan is mma with an n-split (wgmma on sm_90a where each column group is
    whole warpgroups: BM = 64 on 8 warps), and ptxas reports no spills."""
    ck = _compile(arch, cfg)
    plan = re.search(r"dot_plan=(\w+:[^ ,]+)([^,]*)", ck.ir)
    assert plan and plan.group(1).startswith("mma:f16"), plan and plan.group(0)
    assert f"n-split={cfg[3] * 16 // cfg[0]}" in plan.group(2), plan.group(0)
    assert ("wgmma" in plan.group(2)) == (arch == "sm_90a" and cfg[0] == 64)
    assert "column slices" in plan.group(2)
    assert ck.n_spills == 0 and ck.local_bytes == 0, (ck.n_spills, ck.local_bytes)


def test_no_split_without_whole_slices():
    """N that does not cut into 16-column slices per group keeps the FMA engine and says
    why."""
    ck = newt.compile(dot_minus_rowmax, dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32"),
                      dict(BM=16, BN=16, BK=32), arch="sm_80", num_warps=4)
    assert "fma:fma[16x16x32]" in ck.ir and "column slices of 16" in ck.ir


# ----------------------------------------------------------------------------- the emulator

def _emu(monkeypatch, arch):
    from test_dot_emulated import _STAGES, _emulator
    E = _emulator(monkeypatch, arch)
    _STAGES[0] = 3
    return E


def _run(E, cfg, M, N, K, dt, bias, seed):
    BM, BN, BK, W = cfg
    torch.manual_seed(seed)
    a, b = torch.randn(M, K).to(dt), torch.randn(K, N).to(dt)
    bv = torch.randn(N).to(dt)
    c = torch.full((M, N), float("nan"), dtype=dt)
    E.emulate(mm_bias, (-(-M // BM), -(-N // BN)), a, b, bv, c, M, N, K, a.stride(0),
              a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM=BM, BN=BN,
              BK=BK, BIAS=bias, num_warps=W, num_stages=3)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    ref = a.double() @ b.double() + (bv.double()[None, :] if bias else 0)
    tol = 1e-2 if dt == torch.float16 else 4e-2
    torch.testing.assert_close(c.double(), ref, atol=tol, rtol=tol)


@needs_cxx
@pytest.mark.parametrize("arch,cfg,dt,bias", [
    ("sm_80", (16, 64, 32, 2), torch.float16, 0),
    ("sm_80", (32, 64, 32, 4), torch.bfloat16, 1),
    ("sm_80", (64, 64, 32, 8), torch.float16, 1),
    ("sm_90a", (64, 128, 32, 8), torch.float16, 1),    # two warpgroups, n64 each
    ("sm_90a", (64, 64, 32, 8), torch.bfloat16, 0),    # n32 slices: inside a swizzle panel
    ("sm_90a", (32, 64, 32, 4), torch.float16, 1),     # mma.sync on sm_90a
    ("sm_90a", (64, 64, 32, 8), torch.float32, 1),     # tf32: K-major B slices, not swapped
], ids=["sm80-16x2-f16", "sm80-32x4-bf16-bias", "sm80-64x8-f16-bias", "sm90-64x8-n128-bias",
        "sm90-64x8-n64-bf16", "sm90-32x4-f16-bias", "sm90-64x8-tf32-bias"])
def test_split_matmul_emulated(monkeypatch, arch, cfg, dt, bias):
    """Odd M, N, K under masks: every output element written (NaN-poisoned) and right."""
    _run(_emu(monkeypatch, arch), cfg, 77, 100, 70, dt, bias, seed=hash(cfg) % 1000)


@needs_cxx
@pytest.mark.parametrize("arch,M,N,K,W", [("sm_90a", 64, 32, 64, 8), ("sm_80", 16, 64, 32, 4),
                                          ("sm_90a", 64, 64, 32, 16)],
                         ids=["sm90-n16-slices", "sm80-4-groups", "sm90-16-warps"])
def test_split_single_dot_emulated(monkeypatch, arch, M, N, K, W):
    """A dot outside a loop, its accumulator read from memory: wgmma n16 on 16-column slices
    inside a swizzle panel (2 and 4 warpgroups), mma.sync on 4 column groups of one warp."""
    from test_dot_emulated import _k_dot
    E = _emu(monkeypatch, arch)
    torch.manual_seed(10)
    a, b, c = torch.randn(M, K).half(), torch.randn(K, N).half(), torch.randn(M, N)
    out = torch.full((M, N), float("nan"))
    E.emulate(_k_dot(), (1,), a, b, c, out, M=M, N=N, K=K, num_warps=W)
    torch.testing.assert_close(out.double(), a.double() @ b.double() + c.double(), atol=2e-3,
                               rtol=2e-3)


@needs_cxx
def test_split_matmul_tma_store_emulated(monkeypatch):
    """The unmasked form at BM = 64 on 8 warps: TMA boxes in, wgmma per warpgroup on its
    column slice, the tile out by TMA boxes, on the emulator."""
    import matmul_forms as mf
    E = _emu(monkeypatch, "sm_90a")
    torch.manual_seed(5)
    M, N, K = 192, 256, 96
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    E.emulate(mf.mm_plain, (M // 64, N // 128), a, b, c, M, N, K, a.stride(0), a.stride(1),
              b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM=64, BN=128, BK=32,
              num_warps=8, num_stages=3)
    assert len(E.build.last_maps) == 3      # A and B loads, C's store
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=2e-3)


@needs_cxx
def test_split_matmul_persistent_emulated(monkeypatch):
    """64 x 256 tiles on 8 warps, 4 stages: the persistent kernel (one CTA per SM walking the
    tiles, C by TMA boxes from the freed stage) with each warpgroup on its 128 columns."""
    import matmul_forms as mf
    from test_dot_emulated import _STAGES
    E = _emu(monkeypatch, "sm_90a")
    _STAGES[0] = 4
    torch.manual_seed(9)
    M, N, K = 192, 256, 128
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    E.emulate(mf.mm_plain, (M // 64, N // 256), a, b, c, M, N, K, a.stride(0), a.stride(1),
              b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM=64, BN=256, BK=64,
              num_warps=8, num_stages=4)
    assert E.build.last_persistent and len(E.build.last_maps) == 3
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=2e-3)


@needs_cxx
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_row_reduction_of_a_split_fragment_emulated(monkeypatch, arch):
    """max over rows that span two column groups: the plan says its row reductions combine
    the warps through shared memory, and the result is right."""
    ck = newt.compile(dot_minus_rowmax, dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32"),
                      dict(BM=64, BN=64, BK=32), arch=arch, num_warps=8)
    assert "n-split=2" in ck.ir and "row reductions combine the warps" in ck.ir
    assert "dot_row_reduce" not in ck.ir and ck.n_spills == 0
    E = _emu(monkeypatch, arch)
    torch.manual_seed(6)
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    c = torch.full((64, 64), float("nan"))
    E.emulate(dot_minus_rowmax, (1,), a, b, c, BM=64, BN=64, BK=32, num_warps=8)
    s = a.double() @ b.double()
    torch.testing.assert_close(c.double(), s - s.max(1, keepdim=True).values, atol=2e-3,
                               rtol=2e-3)


@needs_cxx
@pytest.mark.parametrize("arch,causal", [("sm_80", True), ("sm_90a", False)])
def test_attention_with_split_fragments_emulated(monkeypatch, arch, causal):
    """Fused attention (examples/06_fused_attention.py) at BLOCK_M = 64 on 8 warps: both dots
    split N; the row max / sum combine the warps through shared memory; P is staged for the
    second dot, which then needs a barrier of its own (passes/tc/dot_loads.py: a_sync)."""
    import test_attention_emulated as A
    E = _emu(monkeypatch, arch)
    cfg = dict(BLOCK_M=64, BLOCK_N=32, num_warps=8, num_stages=2)
    A._run(E, 1, 1, 75, 32, causal, cfg, seed=8)


# ----------------------------------------------------------------------------- the GPU

@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_split_matmul_gpu(cfg, dt):
    BM, BN, BK, W = cfg
    torch.manual_seed(7)
    M, N, K = 1000, 1500, 777
    a = torch.randn(M, K, device="cuda").to(dt)
    b = torch.randn(K, N, device="cuda").to(dt)
    bv = torch.randn(N, device="cuda").to(dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    mm_bias[(-(-M // BM), -(-N // BN))](a, b, bv, c, M, N, K, a.stride(0), a.stride(1),
                                        b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                        BM=BM, BN=BN, BK=BK, BIAS=1, num_warps=W, num_stages=3)
    ref = a.float() @ b.float() + bv.float()[None, :]
    assert torch.isfinite(c).all()
    torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=2e-2)
