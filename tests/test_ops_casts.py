"""Op suite, casts and dtypes: `x.to(dtype)` / `nl.cast` between every pair of the 13 dtypes
(float->int truncates toward zero, ->bool is != 0, int->int wraps), bitcasts of equal widths,
and int64 / uint64 scalar arguments. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from lang_helpers import where  # noqa: F401  (fixture: interp, emu, cuda)
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


def _narrow_of_float_ref(x: torch.Tensor, dst) -> torch.Tensor:
    """What the generated code does (cvt.rzi to 32 bits, saturating, NaN -> 0, then the low
    bits), written out in int64."""
    lo, hi = (0, 2 ** 32 - 1) if is_unsigned(dst) else (-2 ** 31, 2 ** 31 - 1)
    v = torch.nan_to_num(x.double().trunc(), nan=0.0).clamp(lo, hi).long()
    return from_i64(v, dst)


@pytest.mark.parametrize("dst", [torch.int8, torch.uint8, torch.int16, torch.uint16],
                         ids=lambda d: name(d))
@pytest.mark.parametrize("src", [torch.float32, torch.float64], ids=lambda d: name(d))
def test_float_out_of_range_to_8_and_16_bits_keeps_the_low_bits(target, device, src, dst):
    """Outside the target's range (undefined in Triton) the interpreter computes what the GPU
    code does: saturate to 32 bits, keep the low bits (300.0 -> uint8 44, not 255)
    (tests/test_semantics_agree.py runs the same rule through the CPU emulation too)."""
    n = 37
    x = (torch.randn(n, dtype=torch.float64) * 1e5).to(src)
    x[:6] = torch.tensor([300.0, -300.0, 1e12, -1e12, float("inf"), float("nan")])
    out = poison(n, dst, device)
    cast_kernel[(1,)](x.to(device), out, n, DST=nl_dtype(dst), USE_FN=False, BLOCK=64)
    check(out, _narrow_of_float_ref(x, dst))


@pytest.mark.parametrize("dst", ["i8", "u8", "i16", "u16"])
def test_narrow_casts_of_floats_go_through_32_bits(dst):
    """The rule above is the generated code's: the PTX converts to a 32-bit integer first."""
    import re
    ck = newt.compile(cast_kernel, {"x_ptr": "*fp32", "out_ptr": "*" + dst, "n": "i32"},
                      dict(DST=newt.dtypes.from_signature(dst), USE_FN=False, BLOCK=64))
    cvts = set(re.findall(r"cvt\.rzi\.[su]\d+\.f32", ck.ptx))
    assert cvts == {"cvt.rzi.%s32.f32" % ("u" if dst[0] == "u" else "s")}, cvts


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


def _round_half_even(q) -> int:
    """A Fraction to the nearest integer, ties to even."""
    f = q.numerator // q.denominator
    r = q - f
    return f + (1 if r > 0.5 or (r == 0.5 and f % 2) else 0)


def _rounded_once(v, mant_bits):
    """The exact rounding of the number v (int or float) to a binary float with `mant_bits`
    fraction bits, normal range: the reference, computed in rationals."""
    import fractions
    import math
    q = fractions.Fraction(v)
    if q == 0:
        return 0.0
    e = math.frexp(abs(float(q)))[1] - 1      # floor(log2 |v|) (exact for these values)
    if abs(q) < fractions.Fraction(2) ** e:
        e -= 1
    step = fractions.Fraction(2) ** (e - mant_bits)
    return float(_round_half_even(q / step) * step)


def _near_ties(src, mant, n):
    """Values an ulp-fraction off a tie of a float with `mant` fraction bits: through fp32
    they land on the tie."""
    if src is torch.float64:
        k = torch.randint(0, 1 << mant, (n,), dtype=torch.float64)
        e = torch.randint(-8, 9, (n,)).double()
        sign = torch.where(torch.rand(n) < 0.5, -1.0, 1.0).double()
        off = torch.where(torch.rand(n) < 0.5, -1.0, 1.0).double() * 2.0 ** -35
        # 1 + (2k + 1) * 2**-(mant + 1): the tie between 1 + k * 2**-mant and the next value
        return sign * (1 + (2 * k + 1) * 2.0 ** -(mant + 1) + off) * 2.0 ** e
    # integers: bf16 ties, off by one (fp32 drops the 1); int32 at 2**24, 64-bit at 2**40
    k = torch.randint(0, 1 << 7, (n,), dtype=torch.int64)
    off = torch.where(torch.rand(n) < 0.5, -1, 1).to(torch.int64)
    e = 24 if src is torch.int32 else 40
    x = (1 << e) + (2 * k + 1) * (1 << (e - 8)) + off
    return x.to(torch.int32) if src is torch.int32 else x


@pytest.mark.parametrize("src", [torch.float64, torch.int64, torch.uint64, torch.int32],
                         ids=name)
@pytest.mark.parametrize("dst", [torch.float16, torch.bfloat16], ids=name)
def test_wide_to_16_bit_rounds_once(where, src, dst):
    """fp64 / int64 / uint64 / int32 -> fp16 / bf16 rounds the value once (not through fp32 first), on
    values a hair off a 16-bit tie, in the interpreter, in the generated code (emulated on the
    CPU, and on the GPU); torch's CPU conversion rounds twice on these, so the reference is
    computed in rationals."""
    if src is not torch.float64 and dst is torch.float16:
        pytest.skip("integers in fp16's range are exact in fp32: nothing to round twice")
    n = 301
    mant = 10 if dst is torch.float16 else 7
    x = _near_ties(src, mant, n)
    if src is torch.uint64:   # above 2**63: the bit pattern is negative as an int64
        x = ((x << 23) | (1 << 63)).view(torch.uint64)
        vals = [v + (1 << 64) if v < 0 else v for v in x.view(torch.int64).tolist()]
    else:
        vals = x.tolist()
    ref = torch.tensor([_rounded_once(v, mant) for v in vals], dtype=torch.float64)
    out = where.t(poison(n, dst, "cpu"))
    where(cast_kernel, (newt.cdiv(n, 128),), where.t(x), out, n, DST=nl_dtype(dst),
          USE_FN=False, BLOCK=128)
    assert torch.equal(out.cpu().double(), ref)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_wide_to_16_bit_casts_compile_to_one_rounding(arch):
    for src in ("fp64", "i64", "u64", "i32"):
        k = newt.compile(cast_kernel, {"x_ptr": f"*{src}", "out_ptr": "*bf16", "n": "i32"},
                         {"DST": nl.bfloat16, "USE_FN": False, "BLOCK": 256}, arch=arch)
        assert "nt_odd_f32(" in k.source.split("extern \"C\"")[1], src
        assert k.n_spills == 0 and k.local_bytes == 0
