"""The mask pass (newt/passes/masks.py): masks that value ranges prove all-true are dropped, the
others kept. Each kernel is checked twice: in its compiled IR (which loads and stores still have
a mask, which selects are gone) and, through the CPU emulation of its generated CUDA C++
(tests/test_codegen_emulator.py), against torch on fresh data with a NaN-poisoned output."""
from __future__ import annotations

import re

import pytest
import torch

import newt
import newt.language as nl
from test_codegen_emulator import HAS_CXX, emulate


def _ir(fn, signature, constexprs, num_warps=4):
    return newt.compile(fn, signature, constexprs, arch="sm_90a", num_warps=num_warps).ir


def _masked(ir: str, opcode: str) -> list[bool]:
    """For every `opcode` op of the printed IR, in order: does it still take a mask? (A load
    prints `load ptr[, mask[, other]]`, a store `store ptr, value[, mask]`.)"""
    n = {"load": 1, "store": 2}[opcode]
    return [len(ops.split(",")) > n for ops in re.findall(rf"\b{opcode} ([^:{{\n]*)", ir)]


@newt.jit
def _rows(out_ptr, x_ptr, stride, N: nl.constexpr, BLOCK: nl.constexpr, ROWS: nl.constexpr):
    # program_id % ROWS: rows 0..ROWS-1; the column loop runs over N in BLOCK steps
    row = nl.program_id(0) % ROWS
    for start in range(0, N, BLOCK):
        cols = start + nl.arange(0, BLOCK)
        m = (cols < N) & (row < ROWS)
        x = nl.load(x_ptr + row * stride + cols, mask=m, other=0.0)
        y = nl.where(cols < N, x * 2.0, float("nan"))
        nl.store(out_ptr + row * stride + cols, y, mask=m)


_SIG = {"out_ptr": "*fp32", "x_ptr": "*fp32", "stride": "i32"}


def test_masks_proven_true_are_dropped():
    """N a multiple of BLOCK: every column index of every iteration is below N."""
    ir = _ir(_rows, _SIG, dict(N=256, BLOCK=64, ROWS=3))
    assert _masked(ir, "load") == [False] and _masked(ir, "store") == [False], ir
    assert " select " not in ir and "= select" not in ir


def test_masks_of_a_partial_last_block_stay():
    """N = 250: the last iteration's columns run past N, so both masks stay."""
    ir = _ir(_rows, _SIG, dict(N=250, BLOCK=64, ROWS=3))
    assert _masked(ir, "load") == [True] and _masked(ir, "store") == [True], ir


@pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")
@pytest.mark.parametrize("N", [256, 250, 64, 37])
def test_rows_emulated_against_torch(N):
    rows, stride = 3, 263
    x = torch.randn(rows, stride)
    out = torch.full_like(x, float("nan"))
    emulate(_rows, (5,), out, x, stride, N=N, BLOCK=64, ROWS=rows)
    torch.testing.assert_close(out[:, :N], x[:, :N] * 2.0)
    assert torch.isnan(out[:, N:]).all()     # nothing written past N


@newt.jit
def _shifted(out_ptr, x_ptr, N: nl.constexpr, BLOCK: nl.constexpr):
    # a loop from BLOCK: each block reads the one before it (cols - BLOCK >= 0 in every lane)
    for start in range(BLOCK, N, BLOCK):
        cols = start + nl.arange(0, BLOCK)
        x = nl.load(x_ptr + cols - BLOCK, mask=(cols - BLOCK >= 0) & (cols < N), other=0.0)
        nl.store(out_ptr + cols, x + 1.0, mask=cols < N)


def test_masks_in_a_loop_from_a_nonzero_start():
    ir = _ir(_shifted, {"out_ptr": "*fp32", "x_ptr": "*fp32"}, dict(N=192, BLOCK=64))
    assert _masked(ir, "load") == [False] and _masked(ir, "store") == [False], ir


@pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")
def test_shifted_emulated_against_torch():
    x = torch.randn(192)
    out = torch.full_like(x, float("nan"))
    emulate(_shifted, (1,), out, x, N=192, BLOCK=64)
    torch.testing.assert_close(out[64:], x[:128] + 1.0)
    assert torch.isnan(out[:64]).all()


@newt.jit
def _runtime_bound(out_ptr, x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


def test_runtime_bounds_keep_their_masks():
    """n is only known at launch: nothing is decided."""
    ir = _ir(_runtime_bound, {"out_ptr": "*fp32", "x_ptr": "*fp32", "n": "i32"}, dict(BLOCK=64))
    assert _masked(ir, "load") == [True] and _masked(ir, "store") == [True], ir


@newt.jit
def _wrapping(out_ptr, x_ptr, BLOCK: nl.constexpr, SCALE: nl.constexpr):
    # offs * SCALE leaves the int32 range for SCALE = 2**30: its interval is dropped, so the
    # comparison (false in every lane of a wrapped 32-bit computation) is not decided
    offs = nl.arange(0, BLOCK)
    keep = offs * SCALE >= 0
    nl.store(out_ptr + offs, nl.load(x_ptr + offs), mask=keep)


def test_an_interval_past_int32_decides_nothing():
    ir = _ir(_wrapping, {"out_ptr": "*fp32", "x_ptr": "*fp32"}, dict(BLOCK=64, SCALE=2 ** 30))
    assert _masked(ir, "store") == [True], ir
    ir = _ir(_wrapping, {"out_ptr": "*fp32", "x_ptr": "*fp32"}, dict(BLOCK=64, SCALE=2 ** 20))
    assert _masked(ir, "store") == [False], ir


@newt.jit
def _never(out_ptr, x_ptr, BLOCK: nl.constexpr):
    # a mask false in every lane is decided too: the where takes its second branch
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    nl.store(out_ptr + offs, nl.where(offs >= BLOCK, x, -x))


@pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")
def test_a_mask_false_everywhere_selects_the_other_branch():
    assert "select" not in _ir(_never, {"out_ptr": "*fp32", "x_ptr": "*fp32"}, dict(BLOCK=32))
    x = torch.randn(32)
    out = torch.full_like(x, float("nan"))
    emulate(_never, (1,), out, x, BLOCK=32)
    torch.testing.assert_close(out, -x)


@newt.jit
def _triangle(out_ptr, x_ptr, N: nl.constexpr, BLOCK: nl.constexpr):
    # the inner loop's bound is the outer index: not a constant, so its index has no range and
    # its mask stays; the outer mask, on constant bounds, goes
    for i in range(0, N, BLOCK):
        rows = i + nl.arange(0, BLOCK)
        acc = nl.zeros([BLOCK], dtype=nl.float32)
        for j in range(0, i + BLOCK, BLOCK):
            cols = j + nl.arange(0, BLOCK)
            acc += nl.load(x_ptr + cols, mask=cols <= i, other=0.0)
        if i > 0:
            acc += nl.load(x_ptr + rows, mask=rows < N, other=0.0)
        nl.store(out_ptr + rows, acc, mask=rows < N)


def test_masks_under_a_loop_bound_that_varies():
    ir = _ir(_triangle, {"out_ptr": "*fp32", "x_ptr": "*fp32"}, dict(N=128, BLOCK=32))
    # inner load masked, the load in the `if` and the store not
    assert _masked(ir, "load") == [True, False] and _masked(ir, "store") == [False], ir


@pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")
def test_triangle_emulated_against_torch():
    N, B = 128, 32
    x = torch.randn(N)
    out = torch.full_like(x, float("nan"))
    emulate(_triangle, (1,), out, x, N=N, BLOCK=B)
    want = torch.empty(N)
    lanes = torch.arange(B)
    for i in range(0, N, B):
        acc = torch.zeros(B)
        for j in range(0, i + B, B):      # lane l adds x[j + l] where j + l <= i
            acc += torch.where(j + lanes <= i, x[j:j + B], 0.0)
        if i > 0:
            acc += x[i:i + B]
        want[i:i + B] = acc
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


@newt.jit
def _bool_ops(out_ptr, x_ptr, s, BLOCK: nl.constexpr):
    # a runtime int equal to 1 is compiled as the constant 1, so `c` is decided at compile time
    # only when s == 1: every boolean op on it must fold or stay, never crash the pass
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    c = s > 0
    p = x > 0
    y = nl.where(c ^ p, x, -x) + nl.where(c ^ c, 100.0, 0.0)
    y += nl.where(nl.maximum(c, p), 1.0, 2.0) + nl.where(nl.minimum(c, p), 10.0, 20.0)
    y += nl.where(nl.maximum(c, c) & nl.minimum(c, c), 1000.0, 0.0)
    nl.store(out_ptr + offs, y)


def _bool_ops_ref(x, s):
    c, p = torch.tensor(s > 0), x > 0
    y = torch.where(c ^ p, x, -x)
    y += torch.where(c | p, 1.0, 2.0) + torch.where(c & p, 10.0, 20.0)
    return y + (1000.0 if s > 0 else 0.0)


@pytest.mark.parametrize("s", [1, 2, -3])
def test_xor_max_min_of_booleans_decided_or_not(s):
    """`^`, nl.maximum and nl.minimum of booleans, with s specialized as the constant 1 or not:
    compiled IR, emulated generated code and interpreter all agree with torch."""
    spec = {"s": {"equal_to_1": s == 1}}
    newt.compile(_bool_ops, {"out_ptr": "*fp32", "x_ptr": "*fp32", "s": "i32"}, dict(BLOCK=64),
                 specialization=spec)
    x = torch.randn(64)
    want = _bool_ops_ref(x, s)
    if HAS_CXX:
        out = torch.full_like(x, float("nan"))
        emulate(_bool_ops, (1,), out, x, s, BLOCK=64)
        torch.testing.assert_close(out, want)
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        out = torch.full_like(x, float("nan"))
        _bool_ops[(1,)](out, x, s, BLOCK=64)
    finally:
        newt.options.flags.interpret = old
    torch.testing.assert_close(out, want)
