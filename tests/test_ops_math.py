"""Op suite, math: exp/log/sqrt/... over the float dtypes (fp16/bf16 computed in fp32 and rounded
back), integer inputs computed in fp32, where/maximum/minimum/clamp/fma/cdiv/umulhi/div_rn.
Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import (FLOATS, INTS, bits, check, from_i64, name, poison, rand, to_i64)


@newt.jit
def unary_math_kernel(x_ptr, out_ptr, n, FN: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=1.0)
    if FN == "exp":
        y = nl.exp(x)
    elif FN == "exp2":
        y = nl.exp2(x)
    elif FN == "log":
        y = nl.log(x)
    elif FN == "log2":
        y = nl.log2(x)
    elif FN == "sqrt":
        y = nl.sqrt(x)
    elif FN == "rsqrt":
        y = nl.rsqrt(x)
    elif FN == "sin":
        y = nl.sin(x)
    elif FN == "cos":
        y = nl.cos(x)
    elif FN == "tanh":
        y = nl.tanh(x)
    elif FN == "erf":
        y = nl.erf(x)
    elif FN == "sigmoid":
        y = nl.sigmoid(x)
    elif FN == "floor":
        y = nl.floor(x)
    elif FN == "ceil":
        y = nl.ceil(x)
    else:
        nl.static_assert(FN == "abs")
        y = nl.abs(x)
    nl.store(out_ptr + offs, y, mask=mask)


TORCH_FN = {"exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2,
            "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
            "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "floor": torch.floor,
            "ceil": torch.ceil, "abs": torch.abs}
POSITIVE = ("log", "log2", "sqrt", "rsqrt")


@pytest.mark.parametrize("n", [7, 1025])
@pytest.mark.parametrize("fn", list(TORCH_FN))
@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_unary_math(target, device, dt, fn, n):
    x = rand(n, dt, device) * 3
    if fn in POSITIVE:
        x = x.abs() + 0.125
    out = poison(n, dt, device)
    unary_math_kernel[(newt.cdiv(n, 256),)](x, out, n, FN=fn, BLOCK=256)
    wide = torch.float64 if dt == torch.float64 else torch.float32
    ref = TORCH_FN[fn](x.cpu().to(wide)).to(dt)
    if dt == torch.float32:  # GPU libm is within a few ulp
        check(out, ref, rtol=2e-6, atol=1e-6)
    else:
        check(out, ref)


@pytest.mark.parametrize("dt", [torch.int32, torch.int8, torch.uint16], ids=name)
def test_math_on_ints_is_fp32(target, device, dt):
    n = 100
    x = rand(n, dt, device, 1, 60)
    out = poison(n, torch.float32, device)
    unary_math_kernel[(1,)](x, out, n, FN="sqrt", BLOCK=128)
    check(out, torch.sqrt(x.cpu().float()))


@newt.jit
def ternary_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, FN: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    z = nl.load(z_ptr + offs, mask=mask)
    if FN == "where":
        r = nl.where(x > y, x, z)
    elif FN == "where_scalar":
        r = nl.where(x > y, x, 0)
    elif FN == "maximum":
        r = nl.maximum(x, y)
    elif FN == "minimum":
        r = nl.minimum(x, y)
    elif FN == "clamp":
        r = nl.clamp(x, nl.minimum(y, z), nl.maximum(y, z))
    elif FN == "fma":
        r = nl.fma(x, y, z)
    else:
        nl.static_assert(FN == "max_min_chain")
        r = nl.maximum(nl.minimum(x, 3), -3)
    nl.store(out_ptr + offs, r, mask=mask)


def _ternary(fn, x, y, z, out):
    n = x.numel()
    ternary_kernel[(newt.cdiv(n, 128),)](x, y, z, out, n, FN=fn, BLOCK=128)
    return out


@pytest.mark.parametrize("fn", ["where", "where_scalar", "maximum", "minimum", "max_min_chain"])
@pytest.mark.parametrize("dt", FLOATS + INTS, ids=name)
def test_select_ops(target, device, dt, fn):
    n = 300
    x, y, z = (rand(n, dt, device) for _ in range(3))
    out = _ternary(fn, x, y, z, poison(n, dt, device))
    if dt.is_floating_point:
        a, b, c = x.cpu(), y.cpu(), z.cpu()
        ref = {"where": torch.where(a > b, a, c), "where_scalar": torch.where(a > b, a, 0),
               "maximum": torch.maximum(a, b), "minimum": torch.minimum(a, b),
               "max_min_chain": a.clamp(-3, 3)}[fn]
        check(out, ref)
        return
    a, b, c = to_i64(x), to_i64(y), to_i64(z)
    ka, kb = (a ^ (-2 ** 63), b ^ (-2 ** 63)) if dt == torch.uint64 else (a, b)
    ref = {"where": torch.where(ka > kb, a, c), "where_scalar": torch.where(ka > kb, a, 0),
           "maximum": torch.where(ka >= kb, a, b), "minimum": torch.where(ka <= kb, a, b),
           "max_min_chain": None}[fn]
    if fn == "max_min_chain":
        if dt in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
            pytest.skip("-3 is not an unsigned value")
        ref = a.clamp(-3, 3)
    check(out, from_i64(ref, dt))


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_clamp_fma(target, device, dt):
    n = 1000
    x, y, z = (rand(n, dt, device) for _ in range(3))
    out = _ternary("clamp", x, y, z, poison(n, dt, device))
    a, b, c = x.cpu().double(), y.cpu().double(), z.cpu().double()
    check(out, torch.minimum(torch.maximum(a, torch.minimum(b, c)), torch.maximum(b, c)).to(dt))
    out = _ternary("fma", x, y, z, poison(n, dt, device))
    check(out, (a * b + c).to(dt))


@newt.jit
def int_helpers_kernel(x_ptr, y_ptr, cdiv_ptr, hi_ptr, div_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=1)
    y = nl.load(y_ptr + offs, mask=mask, other=1)
    nl.store(cdiv_ptr + offs, nl.cdiv(x.to(nl.int64), 16), mask=mask)  # uint // int: signedness error
    nl.store(hi_ptr + offs, nl.umulhi(x, y), mask=mask)
    nl.store(div_ptr + offs, nl.div_rn(x.to(nl.float32), y.to(nl.float32)), mask=mask)


@pytest.mark.parametrize("dt", [torch.int32, torch.uint32, torch.int64, torch.uint64], ids=name)
def test_cdiv_umulhi_div_rn(target, device, dt):
    n = 777
    x = rand(n, dt, device, 1, 2 ** 31 - 1)
    y = rand(n, dt, device)
    y = (to_i64(y) + (to_i64(y) == 0)).to(dt).to(device)   # no zero divisors (computed in int64:
                                                            # some torch builds lack uint32 ops)
    c, h, d = poison(n, torch.int64, device), poison(n, dt, device), poison(n, torch.float32, device)
    int_helpers_kernel[(newt.cdiv(n, 128),)](x, y, c, h, d, n, BLOCK=128)
    xs, ys = to_i64(x).tolist(), to_i64(y).tolist()
    check(c, torch.tensor([(v + 15) // 16 for v in xs]))
    b = bits(dt)               # the high half of the unsigned product, signed too (as Triton)
    hi = [((u % 2 ** b) * (v % 2 ** b)) >> b for u, v in zip(xs, ys)]
    check(h, from_i64(torch.tensor([v - 2 ** 64 if v >= 2 ** 63 else v for v in hi]), dt))
    check(d, x.cpu().float() / y.cpu().float())
