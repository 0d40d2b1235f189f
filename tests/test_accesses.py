"""passes/accesses.py: each block load's and store's form (its groups tested at run time or
proven static, addressed by immediate offsets or by index math) follows the pass's rule, shows
in the printed IR and in the CUDA C++; and every form computes the same results: the generated
code run by the CPU emulator against torch, on NaN-poisoned outputs, with sizes that take the
vector path, the scalar path and the masked-off tail."""
import re

import pytest
import torch

import newt
import newt.language as nl
from newt import compiler

from test_codegen_emulator import HAS_CXX, emulate

SPEC = {"divisible_by_16": True}


@newt.jit
def _scale_rows(out_ptr, in_ptr, row_stride, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK)
    mask = cols < n_cols
    x = nl.load(in_ptr + row * row_stride + cols, mask=mask, other=0.0)
    nl.store(out_ptr + row * row_stride + cols, x * 2.0 + 1.0, mask=mask)


@newt.jit
def _copy_unmasked(out_ptr, in_ptr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(in_ptr + offs))


BYTES = {"fp64": 8, "fp32": 4, "i32": 4, "fp16": 2, "bf16": 2, "u8": 1}


def _compiled(dt, spec=True, fn=_scale_rows):
    """4 warps, BLOCK sized so that each thread holds one 16-byte group."""
    sig = {"out_ptr": "*" + dt, "in_ptr": "*" + dt}
    if fn is _scale_rows:
        sig.update(row_stride="i32", n_cols="i32")
    block = 128 * 16 // BYTES[dt]
    return compiler.compile(fn, sig, {"BLOCK": block}, arch="sm_90a", num_warps=4,
                            specialization={p: SPEC for p in sig} if spec else None)


def _forms(k):
    return re.findall(r"access=(v\d+x\d+B \w+ \w+)", k.ir)


@pytest.mark.parametrize("dt,want", [
    ("fp32", "v4x16B tested index"), ("i32", "v4x16B tested index"),
    ("fp64", "v2x16B tested index"), ("fp16", "v8x16B static offsets"),
    ("bf16", "v8x16B static offsets"), ("u8", "v16x16B static offsets")])
def test_the_rule_by_element_width(dt, want):
    """Proven groups (everything specialized divisible by 16): masked 32- and 64-bit elements
    keep the run-time test and index their groups; narrower ones are static, with offsets."""
    k = _compiled(dt)
    assert _forms(k) == [want, want], k.ir          # the load and the store
    tested = "tested" in want
    assert ("& 15) == 0" in k.source) == tested
    assert bool(re.search(r"\* const pb\d+ = ", k.source)) == (not tested)
    assert k.n_spills == 0


@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_unproven_groups_are_tested_whatever_the_width(dt):
    """Without the specialization nothing is proven: every group keeps its test; narrow
    elements still address by immediate offsets, wide ones by index math."""
    want = "v4x16B tested index" if dt == "fp32" else "v8x16B tested offsets"
    assert _forms(_compiled(dt, spec=False)) == [want, want]


def test_unmasked_proven_groups_stay_one_plain_vector_access():
    k = _compiled("fp32", fn=_copy_unmasked)
    assert _forms(k) == ["v4x16B static offsets"] * 2, k.ir
    assert "& 15) == 0" not in k.source


@pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n_rows,n_cols,stride", [(3, 512, 512), (2, 400, 416), (3, 37, 37)])
def test_every_form_computes_the_same(dtype, n_rows, n_cols, stride):
    """Each access form the rule picks, run by the emulator: the specialized launch (sizes
    divisible by 16) takes the proven path, 37 columns the unproven one with a masked tail and
    unaligned rows; fp32 groups are tested and indexed, fp16 ones static with offsets."""
    x = torch.randn(n_rows, stride).to(dtype)
    out = torch.full_like(x, float("nan"))
    emulate(_scale_rows, (n_rows,), out, x, stride, n_cols, BLOCK=512)
    want = (x[:, :n_cols].float() * 2 + 1).to(dtype)
    torch.testing.assert_close(out[:, :n_cols], want)
    assert out[:, n_cols:].isnan().all()          # nothing written past the mask
