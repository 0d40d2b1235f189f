"""The epilogue's tile stored by TMA boxes (passes/tc/store_tma.py, codegen/tc/store_tma.py): what the
pass proves and refuses, the map the launcher builds for it (a placeholder where no map can
describe the arguments), and the generated code on the sm_90a emulator, both the boxes and the
element-by-element store the kernel falls back to for a tile starting at a negative row. The
tutorial matmul's TMA-stored epilogues (with and without the activation) are also checked on
the emulator by tests/test_dot_emulated.py."""
import ctypes
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime.tensormap import TensorMaps, recipe_builder

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


@newt.jit
def shifted_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                   SHIFT: nl.constexpr, WRAP: nl.constexpr, BM: nl.constexpr,
                   BN: nl.constexpr, BK: nl.constexpr):
    # C's rows start SHIFT rows before A's: the first row of tiles begins at a negative row
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    rm = pid_m * BM + nl.arange(0, BM)
    rn = pid_n * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = nl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    cm = pid_m * BM - SHIFT + nl.arange(0, BM)
    if WRAP:
        cm = cm % M
    c = nl.maximum(acc, 0.0).to(c_ptr.dtype.element_ty)
    nl.store(c_ptr + cm[:, None] * stride_cm + rn[None, :], c,
             mask=(cm[:, None] < M) & (rn[None, :] < N))


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
       "K": "i32", "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}


def _compile(arch="sm_90a", dtype="fp16", aligned=True, **cx):
    sig = {k: (v.replace("fp16", dtype) if v.startswith("*") else v) for k, v in SIG.items()}
    spec = {n: {"divisible_by_16": aligned or not n.endswith("ptr")} for n in sig}
    c = dict(SHIFT=0, WRAP=False, BM=64, BN=64, BK=32)
    c.update(cx)
    return newt.compile(shifted_matmul, signature=sig, constexprs=c, arch=arch, num_warps=4,
                        num_stages=3, specialization=spec)


def test_the_store_takes_tma_boxes():
    k = _compile()
    store = [r for r in k.tma_maps if r.get("optional")]
    assert len(store) == 1 and len(k.tma_maps) == 3
    r = store[0]
    assert (r["ptr_name"], r["rows"], r["cols"], r["row_stride"]) == \
        ("c_ptr", ("param", 3, "M"), ("param", 4, "N"), ("param", 8, "stride_cm"))
    assert (r["box_inner"], r["box_outer"], r["swizzle"]) == (64, 64, 128)
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in k.ptx
    assert "cp.async.bulk.wait_group.read" in k.ptx
    assert "tma_store" in k.ir and "tma_store_why" not in k.ir
    assert k.n_spills == 0 and k.local_bytes == 0


@pytest.mark.parametrize("kw,why", [
    (dict(WRAP=True), "a wrap cannot be a box"),
    (dict(BN=32), "whole 128-byte panels"),
    (dict(BM=128, BN=128, BK=16), "the ring is smaller than the tile"),   # 24 KB < 32 KB
    (dict(dtype="fp32"), None),                 # tf32: the swapped dot, per-thread stores
    (dict(aligned=False), None),                # the ring itself stays on cp.async
    (dict(arch="sm_80"), None),
])
def test_what_the_store_pass_refuses(kw, why):
    k = _compile(**kw)
    assert not any(r.get("optional") for r in k.tma_maps)
    assert "cp.async.bulk.tensor.2d.global" not in k.ptx
    if why:
        assert why in k.ir, k.ir
    assert k.n_spills == 0


def test_the_launcher_builds_a_placeholder_for_arguments_no_map_describes():
    recipe = dict(ptr=0, ptr_name="c", kind="f16", rows=("param", 1, "M"),
                  cols=("param", 2, "N"), row_stride=("param", 3, "s"), box_inner=64,
                  box_outer=64, swizzle=128, esize=2)
    calls = []

    def enc(*args):
        calls.append(args)
        return ctypes.create_string_buffer(128)
    maps = TensorMaps(enc)
    build = recipe_builder([dict(recipe, optional=True)], {0: 0, 1: 1, 2: 2, 3: 3}, maps)
    build([4096, 100, 128, 128])
    assert calls[-1][3:5] == ([128, 100], [256])          # dims (N, M), the row stride in bytes
    build([4096, 100, 128, -128])      # a negative row stride: the kernel stores per element
    assert calls[-1][3:5] == ([64, 1], [128])
    strict = recipe_builder([recipe], {0: 0, 1: 1, 2: 2, 3: 3}, maps)
    with pytest.raises(newt.LaunchError, match="argument 'c'"):
        strict([4096, 100, 128, -128])


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dt,M,N,K,shift", [
    (torch.float16, 100, 112, 80, 16),     # tiles of row 0 start at -16: the per-element path
    (torch.bfloat16, 130, 64, 48, 0),      # every tile by boxes; the last one clipped at M
])
def test_store_tma_emulated(monkeypatch, dt, M, N, K, shift):
    from test_dot_emulated import _emulator, _store_maps
    E = _emulator(monkeypatch, "sm_90a")
    torch.manual_seed(3)
    a = torch.randn(M, K).to(dt)
    b = torch.randn(K, N).to(dt)
    full = torch.full((M + shift, N), float("nan"), dtype=dt)
    c = full[shift:]
    BM = BN = 64
    grid = (-(-(M + shift) // BM), -(-N // BN))
    E.emulate(shifted_matmul, grid, a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
              SHIFT=shift, WRAP=False, BM=BM, BN=BN, BK=32, num_warps=4)
    assert _store_maps(E.build.last_maps) == 1
    _check(full, a, b, M, shift, grid[0] * BM, dt)

def _check(full, a, b, M, shift, covered, dt):
    prod = torch.relu(a.double() @ b.double()).cpu()
    want = torch.zeros(M + shift, prod.shape[1], dtype=torch.float64)
    want[:M] = prod
    n = min(covered, M + shift)
    got = full[:n].double().cpu()
    assert torch.isfinite(got).all(), int((~torch.isfinite(got)).sum())
    err = float((got - want[:n]).norm() / want.norm())
    assert err < (2e-3 if dt == torch.float16 else 8e-3), err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dt,M,N,K,shift,BM,BN", [
    (torch.float16, 100, 112, 80, 16, 64, 64),
    (torch.bfloat16, 1000, 1520, 784, 0, 128, 128),
    (torch.float16, 1000, 1520, 784, 40, 128, 256),
    (torch.bfloat16, 257, 136, 64, 8, 64, 128),
])
def test_store_tma_gpu(dt, M, N, K, shift, BM, BN):
    """On the GPU: tiles stored by boxes clipped at M and N, and (shift > 0) the first row of
    tiles stored element by element from the staged tile."""
    torch.manual_seed(4)
    a = torch.randn(M, K, device="cuda").to(dt)
    b = torch.randn(K, N, device="cuda").to(dt)
    full = torch.full((M + shift, N), float("nan"), device="cuda", dtype=dt)
    c = full[shift:]
    grid = (-(-(M + shift) // BM), -(-N // BN))
    shifted_matmul[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), SHIFT=shift,
                         WRAP=False, BM=BM, BN=BN, BK=64, num_warps=8 if BM > 64 else 4,
                         num_stages=3)
    torch.cuda.synchronize()
    _check(full, a, b, M, shift, grid[0] * BM, dt)
