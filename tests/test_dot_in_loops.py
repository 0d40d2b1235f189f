"""Dot loops in the shapes ported Triton programs write them: a grouped GEMM (a `while` loop
over the tiles of each problem inside a `for` over problems, the problems' pointers loaded from
a table of addresses, the dot's result stored inside the `while`), and a K loop counting down.
Interpreter, the generated code for sm_80 and sm_90a on the CPU emulator (tests/emu_dot.py), and
the GPU; against torch on odd sizes, with NaN-poisoned outputs."""
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(__file__))
from test_dot_emulated import _emulator  # noqa: E402
from test_semantics_agree import run  # noqa: E402

PATHS = ["interp",
         pytest.param("sm_80", marks=pytest.mark.skipif(shutil.which("g++") is None,
                                                         reason="no host C++ compiler")),
         pytest.param("sm_90a", marks=pytest.mark.skipif(shutil.which("g++") is None,
                                                          reason="no host C++ compiler")),
         pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                        reason="no CUDA device"))]


@newt.jit
def grouped_gemm(addrs_ptr, sizes_ptr, n_groups, n_progs, BM: nl.constexpr, BN: nl.constexpr,
                 BK: nl.constexpr):
    tile = nl.program_id(0)
    first = 0                      # the first tile of problem g
    for g in range(n_groups):
        M = nl.load(sizes_ptr + 3 * g)
        N = nl.load(sizes_ptr + 3 * g + 1)
        K = nl.load(sizes_ptr + 3 * g + 2)
        a_ptr = nl.load(addrs_ptr + 3 * g).to(nl.pointer_type(nl.float16))
        b_ptr = nl.load(addrs_ptr + 3 * g + 1).to(nl.pointer_type(nl.float16))
        c_ptr = nl.load(addrs_ptr + 3 * g + 2).to(nl.pointer_type(nl.float16))
        tiles_n = nl.cdiv(N, BN)
        count = nl.cdiv(M, BM) * tiles_n
        while tile >= first and tile < first + count:
            rm = (tile - first) // tiles_n * BM + nl.arange(0, BM)
            rn = (tile - first) % tiles_n * BN + nl.arange(0, BN)
            rk = nl.arange(0, BK)
            acc = nl.zeros((BM, BN), dtype=nl.float32)
            for k in range(0, nl.cdiv(K, BK)):
                ks = k * BK + rk
                a = nl.load(a_ptr + rm[:, None] * K + ks[None, :],
                            mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
                b = nl.load(b_ptr + ks[:, None] * N + rn[None, :],
                            mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
                acc += nl.dot(a, b)
            nl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(nl.float16),
                     mask=(rm[:, None] < M) & (rn[None, :] < N))
            tile += n_progs
        first += count


@newt.jit
def countdown_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                     BK: nl.constexpr):
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k0 in range(nl.cdiv(K, BK) * BK - BK, -1, -BK):      # the last K tile first
        ks = k0 + rk
        a = nl.load(a_ptr + rm[:, None] * K + ks[None, :],
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = nl.load(b_ptr + ks[:, None] * N + rn[None, :],
                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += nl.dot(a, b)
    nl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(nl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _launch(path, monkeypatch, kernel, grid, *args, **meta):
    if path in ("sm_80", "sm_90a"):
        _emulator(monkeypatch, path).emulate(kernel, grid, *args, num_warps=4, **meta)
    else:
        run(path, kernel, grid, *args, **meta)


def _check(c, a, b):
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all(), "an output element was not written"
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < 2e-3, err


@pytest.mark.parametrize("path", PATHS)
def test_grouped_gemm_stores_inside_a_while_loop(path, monkeypatch):
    dev = "cuda" if path == "cuda" else "cpu"
    sizes = [(37, 70, 50), (20, 33, 90), (64, 17, 16)]
    mats = [(torch.randn(m, k, device=dev).half(), torch.randn(k, n, device=dev).half(),
             torch.full((m, n), float("nan"), device=dev).half()) for m, n, k in sizes]
    addrs = torch.tensor([t.data_ptr() for abc in mats for t in abc], dtype=torch.int64,
                         device=dev)
    table = torch.tensor(sizes, dtype=torch.int32, device=dev).flatten()
    n_progs = 3                    # fewer programs than tiles: each walks several
    meta = dict(BM=32, BN=32, BK=32) if path == "interp" else dict(BM=64, BN=64, BK=32)
    _launch(path, monkeypatch, grouped_gemm, (n_progs,), addrs, table, len(sizes), n_progs,
            **meta)
    for a, b, c in mats:
        _check(c.cpu(), a.cpu(), b.cpu())


@pytest.mark.parametrize("path", PATHS)
def test_k_loop_counting_down(path, monkeypatch):
    M, N, K = 70, 50, 90
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan")).half()
    _launch(path, monkeypatch, countdown_matmul, (2, 1), a, b, c, M, N, K, BM=64, BN=64, BK=32)
    _check(c, a, b)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_grouped_gemm_compiles_without_spills(arch):
    ck = newt.compile(grouped_gemm, {"addrs_ptr": "*i64", "sizes_ptr": "*i32", "n_groups": "i32",
                                     "n_progs": "i32"}, dict(BM=64, BN=64, BK=32), arch=arch)
    assert ck.n_spills == 0, ck.n_spills
