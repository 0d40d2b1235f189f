"""A descriptor matmul whose tile rows start below zero: `make_tensor_descriptor` loads and
stores test `index >= 0` where the offset may be negative, and those terms must not keep the
tiles off TMA on sm_90a (a box reads zeros at negative coordinates and writes nothing there,
as the masked accesses do). The plan, then the generated sm_90a code in the CPU emulator, the
interpreter and the GPU, against torch."""
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(__file__))
from conftest import HAS_CUDA  # noqa: E402


@newt.jit
def shifted_rows_mm(a_ptr, bt_ptr, c_ptr, M, N, K, shift, BM: nl.constexpr, BN: nl.constexpr,
                    BK: nl.constexpr):
    a_d = nl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    bt_d = nl.make_tensor_descriptor(bt_ptr, [N, K], [K, 1], [BN, BK])
    c_d = nl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    row = nl.program_id(0) * BM - shift        # tiles straddle row 0: not provably >= 0
    col = nl.program_id(1) * BN
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        acc = nl.dot(a_d.load([row, k]), bt_d.load([col, k]).T, acc)
    c_d.store([row, col], acc.to(nl.float16))


KW = dict(BM=64, BN=64, BK=32)
SIG = {"a_ptr": "*fp16", "bt_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
       "shift": "i32"}


def test_the_tiles_and_the_store_take_tma_boxes():
    spec = {n: {"divisible_by_16": True} for n in ("a_ptr", "bt_ptr", "c_ptr", "K", "N")}
    ck = newt.compile(shifted_rows_mm, SIG, KW, arch="sm_90a", specialization=spec)
    assert len(ck.tma_maps) == 3, ck.ir          # A, B and the epilogue's store
    assert "cp.async:" not in ck.ir


@pytest.mark.parametrize("where", ["emu", "interp", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAS_CUDA, reason="no CUDA device"))])
def test_shifted_tiles_match_torch(where, monkeypatch):
    dev = "cuda" if where == "cuda" else "cpu"
    M, N, K, shift = 100, 72, 96, 24        # rows -24..39 first; K a multiple of 16 elements
    a = torch.randn(M, K, device=dev).to(torch.float16)
    bt = torch.randn(N, K, device=dev).to(torch.float16)
    c = torch.full((M, N), float("nan"), device=dev).to(torch.float16)
    grid = (-(-(M + shift) // KW["BM"]), -(-N // KW["BN"]))
    if where == "emu":
        if shutil.which("g++") is None:
            pytest.skip("no host C++ compiler")
        from emu_dot import patch_emulator
        E = patch_emulator(monkeypatch, "sm_90a")
        E.emulate(shifted_rows_mm, grid, a, bt, c, M, N, K, shift, **KW)
    else:
        monkeypatch.setattr(newt.options.flags, "interpret", where == "interp")
        shifted_rows_mm[grid](a, bt, c, M, N, K, shift, **KW)
    want = a.float() @ bt.float().T
    torch.testing.assert_close(c.float().cpu(), want.cpu(), rtol=1e-2, atol=5e-2)
