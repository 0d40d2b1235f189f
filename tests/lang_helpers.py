"""Shared pieces of the language tests (tests/test_lang_*.py): the `where` fixture runs a kernel
on the interpreter, on the CPU emulation of its generated CUDA C++ (test_codegen_emulator.py)
and on the GPU (skipped without one), and `nvrtc_archs` compiles with NVRTC for sm_80 and
sm_90a. Every test compares with torch."""
from __future__ import annotations

import pytest
import torch

import newt
from conftest import HAS_CUDA


class Where:
    def __init__(self, name):
        self.name = name
        self.device = "cuda" if name == "cuda" else "cpu"

    def __call__(self, kernel, grid, *args, **kwargs):
        if self.name == "emu":
            from test_codegen_emulator import emulate
            return emulate(kernel, grid, *args, **kwargs)
        old = newt.options.flags.interpret
        newt.options.flags.interpret = self.name == "interp"
        try:
            kernel[grid](*args, **kwargs)
        finally:
            newt.options.flags.interpret = old

    def t(self, x):
        return x.to(self.device)


@pytest.fixture(params=["interp", "emu", "cuda"])
def where(request):
    if request.param == "cuda" and not HAS_CUDA:
        pytest.skip("no CUDA device")
    return Where(request.param)


NVRTC_ARCHS = ["sm_80", "sm_90a"]


def nvrtc(kernel, signature, constexprs, arch, num_warps=4):
    """Compile with NVRTC (no GPU needed); returns the CompiledKernel."""
    k = newt.compile(kernel, signature, constexprs, arch=arch, num_warps=num_warps)
    assert k.cubin and k.n_spills == 0, (k.n_spills, k.log)
    return k


def nan_like(shape, dtype=torch.float32, device="cpu"):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)
