"""Op suite, casts and dtypes: `x.to(dtype)` / `nl.cast` between every pair of the 13 dtypes
(float->int truncates toward zero, ->bool is != 0, int->int wraps), bitcasts of equal widths,
and int64 / uint64 scalar arguments. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import ALL, check, from_i64, is_unsigned, name, nl_dtype, poison, rand, to_i64


@newt.jit
def cast_kernel(x_ptr, out_ptr, n, DST: nl.constexpr, USE_FN: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    if USE_FN:
        y = nl.cast(x, DST)
    else:
        y = x.to(DST)
    nl.static_assert(y.dtype == DST)
    nl.store(out_ptr + offs, y, mask=mask)


def _source(src, dst, n, device):
    """Inputs whose conversion is defined: floats in the target integer's range."""
    if src.is_floating_point and dst not in (torch.bool,) and not dst.is_floating_point:
        lo, hi = (0.0, 250.0) if is_unsigned(dst) else (-120.0, 120.0)
        x = torch.rand(n) * (hi - lo) + lo
        x[0] = 0.0 if n > 0 else x[0]
        return x.to(src).to(device)
    return rand(n, src, device)


def _reference(x, src, dst):
    x = x.cpu()
    if dst == torch.bool:
        return (to_i64(x) != 0) if not (src.is_floating_point or src == torch.bool) else x != 0
    if src == torch.bool:
        v = x.to(torch.int64)
        return v.to(dst) if dst.is_floating_point else from_i64(v, dst)
    if src.is_floating_point:
        if dst.is_floating_point:
            return x.to(dst)
        return from_i64(x.double().trunc().to(torch.int64), dst)
    v = to_i64(x)
    if dst.is_floating_point:
        f = v.double()
        if src == torch.uint64:
            f = torch.where(v < 0, f + 2.0 ** 64, f)
        return f.to(dst)
    return from_i64(v, dst)


@pytest.mark.parametrize("dst", ALL, ids=name)
@pytest.mark.parametrize("src", ALL, ids=name)
def test_cast_pairs(target, device, src, dst):
    n = 333
    x = _source(src, dst, n, device)
    out = poison(n, dst, device)
    cast_kernel[(newt.cdiv(n, 128),)](x, out, n, DST=nl_dtype(dst), USE_FN=(src == dst),
                                      BLOCK=128)
    ref = _reference(x, src, dst)
    if not src.is_floating_point and dst.is_floating_point:
        check(out, ref)  # wide ints may round twice on the way (via fp32/fp64): tolerances apply
    else:
        check(out, ref, **({"rtol": 0, "atol": 0} if dst.is_floating_point else {}))


def test_float_to_int_truncates_toward_zero(target, device):
    x = torch.tensor([2.7, -2.7, 0.5, -0.5, 126.99, -127.9, 3.0, -3.0], device=device)
    out = poison(8, torch.int32, device)
    cast_kernel[(1,)](x, out, 8, DST=nl.int32, USE_FN=False, BLOCK=8)
    check(out, torch.tensor([2, -2, 0, 0, 126, -127, 3, -3], dtype=torch.int32))


@newt.jit
def bitcast_kernel(x_ptr, out_ptr, n, DST: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x.to(DST, bitcast=True), mask=mask)


BITCASTS = [(torch.float32, torch.int32), (torch.int32, torch.float32), (torch.float16, torch.int16),
            (torch.bfloat16, torch.uint16), (torch.float64, torch.int64), (torch.uint32, torch.int32),
            (torch.int8, torch.uint8), (torch.uint64, torch.float64)]


@pytest.mark.parametrize("src,dst", BITCASTS, ids=lambda d: name(d))
def test_bitcast(target, device, src, dst):
    n = 257
    x = rand(n, src, device)
    if src == torch.uint64:  # keep the float64 bit patterns finite, not NaN
        x = torch.randn(n, dtype=torch.float64).view(torch.uint64).to(device)
    out = poison(n, dst, device)
    bitcast_kernel[(newt.cdiv(n, 128),)](x, out, n, DST=nl_dtype(dst), BLOCK=128)
    ref = x.cpu().view(dst)
    if dst.is_floating_point:  # compare bit patterns: NaNs must match exactly too
        check(out.view(x.dtype), x, **({"rtol": 0, "atol": 0} if x.dtype.is_floating_point else {}))
    else:
        check(out, ref)


@newt.jit
def scalar_args_kernel(out_ptr, a, b, c, d):
    nl.store(out_ptr + 0, a + 1)      # int64 scalar (too big for int32)
    nl.store(out_ptr + 1, b * 2)      # int32 scalar, widened on store
    nl.store(out_ptr + 2, c.to(nl.int64))   # bool scalar
    nl.store(out_ptr + 3, (d * 4).to(nl.int64))  # fp32 scalar


def test_scalar_argument_types(target, device):
    out = poison(4, torch.int64, device)
    scalar_args_kernel[(1,)](out, 2 ** 40, -123456, True, 2.5)
    check(out, torch.tensor([2 ** 40 + 1, -246912, 1, 10]))
