"""The scaled-reduction pass (newt/passes/scaled_reduce.py): max / min of a block times a
positive constant become the reduction of the block, times the constant. Checked in the
compiled IR (what the reduction reads) and, through the CPU emulation of the generated CUDA
C++ (tests/test_codegen_emulator.py), bit for bit against torch on fresh data, infinities and
NaN included."""
from __future__ import annotations

import re

import pytest
import torch

import newt
import newt.language as nl
from test_codegen_emulator import HAS_CXX, emulate


@newt.jit
def _rowmax(out_ptr, sum_ptr, x_ptr, C: nl.constexpr, KIND: nl.constexpr, R: nl.constexpr,
            N: nl.constexpr):
    rows = nl.arange(0, R)[:, None]
    cols = nl.arange(0, N)[None, :]
    s = nl.load(x_ptr + rows * N + cols) * C
    if KIND == "max":
        m = nl.max(s, axis=1)
    else:
        m = nl.min(s, axis=1)
    nl.store(out_ptr + nl.arange(0, R), m)
    nl.store(sum_ptr + nl.arange(0, R), nl.sum(s, axis=1))   # s read again: the product stays


def _ir(C, KIND="max"):
    return newt.compile(_rowmax, {"out_ptr": "*fp32", "sum_ptr": "*fp32", "x_ptr": "*fp32"},
                        dict(C=C, KIND=KIND, R=8, N=32), arch="sm_90a").ir


def _reduced(ir, kind):
    """The name of what the `kind` reduction reads, and its producer's line."""
    src = re.search(rf"= reduce\.{kind} %([\w.]+)", ir).group(1)
    line = re.search(rf"%{re.escape(src)} = [^\n]*", ir).group(0)
    return line


@pytest.mark.parametrize("kind", ["max", "min"])
def test_positive_constant_moves_after_the_reduction(kind):
    assert "= load" in _reduced(_ir(0.125, kind), kind)       # reads the loaded block


@pytest.mark.parametrize("c", [-0.5, 0.0, float("inf")])
def test_other_constants_stay_before_it(c):
    assert "binary.mul" in _reduced(_ir(c), "max")


@pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("c", [0.125, 3.0, 1e-30])
def test_rowmax_emulated_bit_exact(kind, c):
    torch.manual_seed(3)
    x = torch.randn(8, 32) * 50
    x[1, 3], x[2, 5], x[3] = float("inf"), float("-inf"), 1e-39    # subnormal row
    x[4, 7] = 3e38                                                 # overflows when scaled by 3
    out, sums = torch.full((8,), float("nan")), torch.full((8,), float("nan"))
    emulate(_rowmax, (1,), out, sums, x, C=c, KIND=kind, R=8, N=32)
    s = x * c
    want = s.amax(1) if kind == "max" else s.amin(1)
    assert torch.equal(out, want), (out, want)
    torch.testing.assert_close(sums, s.sum(1), rtol=1e-5, atol=1e-30, equal_nan=True)
