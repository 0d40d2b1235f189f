"""A Python float that becomes an integer constant (`nl.full(.., 3e9, nl.int32)`, a stored
number, a load's `other`) has the value the same number cast at runtime has: truncated,
saturated to 32 or 64 bits, 8- and 16-bit results the low bits of the 32-bit one, to bool
`!= 0` (Triton's cast). The frontend folded it with Python's int() and a wrap (3e9 as int32 was
-1294967296, -2.5 as uint8 254, -0.7 as bool False) while the interpreter saturated.

Each kernel runs on the interpreter, through the CPU emulation of its generated CUDA C++ and on
the GPU when there is one (tests/test_semantics_agree.py `run`)."""
from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
from test_semantics_agree import PATHS, run

VALUES = (3e9, -2.5, 300.75, -129.5, 1e20, -0.75, 70000.5, -1e20)


@newt.jit
def _forms(o_ptr, x_ptr, f_ptr, n, V: nl.constexpr, DT: nl.constexpr, BLOCK: nl.constexpr):
    """Row 0: nl.full; 1: a stored number; 2: a masked load's `other`; 3: the runtime cast."""
    offs = nl.arange(0, BLOCK)
    nl.store(o_ptr + offs, nl.full((BLOCK,), V, DT))
    nl.store(o_ptr + BLOCK + offs, V)
    nl.store(o_ptr + 2 * BLOCK + offs, nl.load(x_ptr + offs, mask=offs < n, other=V))
    nl.store(o_ptr + 3 * BLOCK + offs, nl.load(f_ptr + offs * 0).to(DT))


@newt.jit
def _constants(o_ptr, x_ptr, f_ptr, n, V0: nl.constexpr, V1: nl.constexpr, V2: nl.constexpr,
               V3: nl.constexpr, V4: nl.constexpr, V5: nl.constexpr, V6: nl.constexpr,
               V7: nl.constexpr, DT: nl.constexpr, BLOCK: nl.constexpr):
    _forms(o_ptr, x_ptr, f_ptr, n, V0, DT, BLOCK)
    _forms(o_ptr + 4 * BLOCK, x_ptr, f_ptr + 1, n, V1, DT, BLOCK)
    _forms(o_ptr + 8 * BLOCK, x_ptr, f_ptr + 2, n, V2, DT, BLOCK)
    _forms(o_ptr + 12 * BLOCK, x_ptr, f_ptr + 3, n, V3, DT, BLOCK)
    _forms(o_ptr + 16 * BLOCK, x_ptr, f_ptr + 4, n, V4, DT, BLOCK)
    _forms(o_ptr + 20 * BLOCK, x_ptr, f_ptr + 5, n, V5, DT, BLOCK)
    _forms(o_ptr + 24 * BLOCK, x_ptr, f_ptr + 6, n, V6, DT, BLOCK)
    _forms(o_ptr + 28 * BLOCK, x_ptr, f_ptr + 7, n, V7, DT, BLOCK)


NL = {torch.int8: nl.int8, torch.uint8: nl.uint8, torch.int16: nl.int16, torch.int32: nl.int32,
      torch.uint32: nl.uint32, torch.int64: nl.int64, torch.bool: nl.int1}


def _runtime_cast(v: float, dt: torch.dtype):
    """The runtime cast's value, from torch: truncated, clamped to the 32/64-bit range,
    wrapped to the width."""
    if dt is torch.bool:
        return torch.tensor(v != 0)
    info = torch.iinfo(dt)
    lo, hi = ((-2**63, 2**63 - 1) if info.bits == 64 else
              (0, 2**32 - 1) if info.min == 0 else (-2**31, 2**31 - 1))
    t = torch.tensor(v, dtype=torch.float64).trunc()
    return torch.tensor(lo if t <= lo else hi if t >= hi else int(t)).to(dt)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt", list(NL))
def test_float_constants_convert_as_runtime_casts(path, dt):
    BLOCK, n = 32, int(torch.randint(1, 31, ()))
    if dt is torch.bool:
        x = torch.rand(BLOCK) < 0.5
    else:
        info = torch.iinfo(dt)
        x = torch.randint(max(info.min, -2**40), min(info.max, 2**40), (BLOCK,)).to(dt)
    vals = [v * float(torch.empty(()).uniform_(0.9, 1.1)) if abs(v) > 1e4 else v for v in VALUES]
    f = torch.tensor(vals, dtype=torch.float64)
    out = torch.full((len(vals), 4, BLOCK), 7 if dt is not torch.bool else 1).to(dt)
    run(path, _constants, (1,), out, x, f, n, *vals, DT=NL[dt], BLOCK=BLOCK)
    for i, v in enumerate(vals):
        want = _runtime_cast(v, dt).expand(BLOCK)
        for form in range(4):
            got = out[i, form, n:] if form == 2 else out[i, form]
            assert torch.equal(got, want[:got.shape[0]]), (v, form, got, want)
        assert torch.equal(out[i, 2, :n], x[:n])
