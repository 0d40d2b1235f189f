"""The interpreter and the generated code define the same results at the edges of the value
ranges: NaN in max/min/argmax/argmin reductions (every layout, padded or not), int64 MIN // -1
and MIN % -1, uint64 >= 2**63 converted to float64, fp16/bf16 cumsum accumulated in fp32.

Each kernel runs on the interpreter and through the CPU emulation of its generated CUDA C++
(tests/test_codegen_emulator.py), both against a torch reference on fresh random data."""
from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
import newt.options
from test_codegen_emulator import HAS_CXX, emulate

PATHS = ["interp", pytest.param("emulated", marks=pytest.mark.skipif(
    not HAS_CXX, reason="no host C++ compiler")), pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no CUDA device"))]


def run(path, kernel, grid, *args, **kwargs):
    """Launch on one path with CPU tensors; outputs come back into them."""
    if path == "emulated":
        return emulate(kernel, grid, *args, **kwargs)
    if path == "cuda":
        dev = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
        kernel[grid](*dev, **kwargs)
        for a, d in zip(args, dev):
            if isinstance(a, torch.Tensor):
                a.copy_(d.cpu())
        return None
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        kernel[grid](*args, **kwargs)
    finally:
        newt.options.flags.interpret = old


# ----------------------------------------------------------------------------- NaN in reductions

@newt.jit
def _rows_extremes(x_ptr, mx_ptr, mn_ptr, amx_ptr, amn_ptr, M, N, BM: nl.constexpr,
                   BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=float("nan"))
    nl.store(mx_ptr + rm, nl.max(x, axis=1), mask=rm < M)
    nl.store(mn_ptr + rm, nl.min(x, axis=1), mask=rm < M)
    nl.store(amx_ptr + rm, nl.argmax(x, axis=1), mask=rm < M)
    nl.store(amn_ptr + rm, nl.argmin(x, axis=1), mask=rm < M)


def _nan_rows(M, N):
    """Random rows with NaN scattered, NaN before and after -inf / +inf, and rows of NaN only."""
    x = torch.randn(M, N)
    x[torch.rand(M, N) < 0.3] = float("nan")
    x[0] = float("nan")
    if M > 1:
        x[1, :2] = torch.tensor([float("nan"), -float("inf")])
        x[1, 2:] = float("nan")
    if M > 2 and N > 3:
        x[2, :4] = torch.tensor([-float("inf"), float("nan"), float("inf"), float("nan")])
        x[2, 4:] = float("nan")
    if M > 3:
        x[3, :] = float("nan")
        x[3, N - 1] = float("inf")
    return x


def _fmax_ref(x, is_max):
    """Max / min ignoring NaN (NaN only for a row of NaN), and the first index of it (0 for a
    row of NaN)."""
    nan = x.isnan()
    fill = -float("inf") if is_max else float("inf")
    key = torch.where(nan, fill, x)
    v = key.amax(1) if is_max else key.amin(1)
    hit = (x == v[:, None]) & ~nan
    idx = torch.where(hit.any(1), hit.int().argmax(1), torch.zeros_like(v, dtype=torch.int64))
    return torch.where(nan.all(1), float("nan"), v), idx.to(torch.int32)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("M,N,BM,BN,num_warps", [
    (5, 7, 8, 8, 4),       # 64 elements, 128 threads: padded slots in the layout
    (4, 33, 4, 64, 1),     # masked columns, one warp
    (6, 129, 8, 256, 4),   # several slots per thread, across warps
])
def test_nan_in_max_min_reductions(path, M, N, BM, BN, num_warps):
    x = _nan_rows(M, N)
    outs = [torch.full((M,), float("nan")) for _ in range(2)] + \
        [torch.full((M,), -7, dtype=torch.int32) for _ in range(2)]
    run(path, _rows_extremes, (1,), x, *outs, M, N, BM=BM, BN=BN, num_warps=num_warps)
    (mx, amx), (mn, amn) = _fmax_ref(x, True), _fmax_ref(x, False)
    torch.testing.assert_close(outs[0], mx, equal_nan=True)
    torch.testing.assert_close(outs[1], mn, equal_nan=True)
    torch.testing.assert_close(outs[2], amx)
    torch.testing.assert_close(outs[3], amn)


@newt.jit
def _full_max(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=float("nan"))
    nl.store(out_ptr, nl.max(x))
    nl.store(out_ptr + 1, nl.min(x))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("BLOCK,n", [(16, 16), (16, 11), (512, 300)])
@pytest.mark.parametrize("case", ["all_nan", "nan_then_ninf", "ninf_then_nan", "random"])
def test_nan_in_full_reductions(path, BLOCK, n, case):
    x = torch.randn(n)
    if case == "all_nan":
        x[:] = float("nan")
    elif case == "random":
        x[torch.rand(n) < 0.5] = float("nan")
    else:
        x[:] = float("nan")
        pair = [float("nan"), -float("inf")]
        x[:2] = torch.tensor(pair if case == "nan_then_ninf" else pair[::-1])
        x[-1] = float("inf")   # the min's: +inf, after NaN
    out = torch.full((2,), -1.0)
    run(path, _full_max, (1,), x, out, n, BLOCK=BLOCK)
    (mx, _), (mn, _) = _fmax_ref(x[None], True), _fmax_ref(x[None], False)
    torch.testing.assert_close(out, torch.cat([mx, mn]), equal_nan=True)


@newt.jit
def _propagate_nan(x_ptr, y_ptr, o_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    y = nl.load(y_ptr + offs, mask=m)
    ALL = nl.PropagateNan.ALL
    nl.store(o_ptr + offs, nl.maximum(x, y, propagate_nan=ALL), mask=m)
    nl.store(o_ptr + n + offs, nl.minimum(x, y.to(nl.float16), ALL), mask=m)
    nl.store(o_ptr + 2 * n + offs, nl.clamp(x, -0.5, 0.75, propagate_nan=ALL), mask=m)
    nl.store(o_ptr + 3 * n + offs, nl.maximum(x, y, propagate_nan=nl.PropagateNan.NONE), mask=m)
    nl.store(o_ptr + 4 * n + offs, nl.minimum(x, float("nan"), propagate_nan=ALL), mask=m)


@pytest.mark.parametrize("path", PATHS)
def test_propagate_nan_all_and_none(path):
    """Triton's `propagate_nan=nl.PropagateNan.ALL`: NaN wins in maximum / minimum / clamp (the
    default, NONE, lets a number win), the same on every path."""
    n = 37
    x, y = torch.randn(n), torch.randn(n)
    x[torch.rand(n) < 0.3] = float("nan")
    y[torch.rand(n) < 0.3] = float("nan")
    out = torch.full((5 * n,), -1.0)
    run(path, _propagate_nan, (1,), x, y, out, n, BLOCK=64)
    want = torch.cat([torch.maximum(x, y), torch.minimum(x, y.half().float()),
                      x.clamp(-0.5, 0.75), torch.fmax(x, y), torch.full((n,), float("nan"))])
    torch.testing.assert_close(out, want, equal_nan=True)


def test_propagate_nan_takes_only_its_enum():
    with pytest.raises(newt.CompilationError, match="propagate_nan must be"):
        newt.compile(_propagate_nan_bad, {"x_ptr": "*fp32"}, {})


@newt.jit
def _propagate_nan_bad(x_ptr):
    nl.store(x_ptr, nl.maximum(nl.load(x_ptr), 1.0, propagate_nan=True))


# ----------------------------------------------------------------------------- integer division

@newt.jit
def _div_mod(a_ptr, b_ptr, q_ptr, r_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a = nl.load(a_ptr + offs, mask=offs < n)
    b = nl.load(b_ptr + offs, mask=offs < n)
    nl.store(q_ptr + offs, a // b, mask=offs < n)
    nl.store(r_ptr + offs, a % b, mask=offs < n)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt", [torch.int64, torch.int32])
def test_min_divided_by_minus_one_wraps(path, dt):
    """MIN // -1 == MIN and MIN % -1 == 0 (the generated code's nt_div / nt_mod), never a trap;
    the other lanes divide as C does."""
    info = torch.iinfo(dt)
    n = 37
    a = torch.randint(info.min, info.max, (n,), dtype=dt)
    b = torch.randint(-50, 50, (n,), dtype=dt)
    b[b == 0] = 3
    a[:4] = info.min
    b[:3] = -1
    a[5], b[5] = info.max, -1
    q, r = torch.full((n,), 7, dtype=dt), torch.full((n,), 7, dtype=dt)
    run(path, _div_mod, (1,), a, b, q, r, n, BLOCK=64)
    a64, b64 = a.tolist(), b.tolist()
    want_q = [int(x / y) if abs(x) < 2**52 else _trunc_div(x, y) for x, y in zip(a64, b64)]
    want_q = [((v + 2**(info.bits - 1)) % 2**info.bits) - 2**(info.bits - 1) for v in want_q]
    want_r = [x - _trunc_div(x, y) * y for x, y in zip(a64, b64)]
    assert q.tolist() == want_q
    assert r.tolist() == want_r


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_division_by_zero_is_defined(path, dt):
    """x // 0 is all ones and x % 0 is x (so x == (x // y) * y + x % y everywhere); the other
    lanes divide as C does."""
    info = torch.iinfo(dt)
    n = 37
    a = torch.randint(max(info.min, -1000), min(info.max, 1000), (n,), dtype=dt)
    b = torch.randint(1, min(info.max, 50), (n,), dtype=dt)
    b[::3] = 0
    q, r = torch.full((n,), 5, dtype=dt), torch.full((n,), 5, dtype=dt)
    run(path, _div_mod, (1,), a, b, q, r, n, BLOCK=64)
    zero = b == 0
    assert torch.equal(q[zero], torch.full_like(q[zero], -1 if info.min < 0 else info.max))
    assert torch.equal(r[zero], a[zero])
    a64, b64 = a[~zero].tolist(), b[~zero].tolist()
    assert q[~zero].tolist() == [_trunc_div(x, y) for x, y in zip(a64, b64)]
    assert r[~zero].tolist() == [x - _trunc_div(x, y) * y for x, y in zip(a64, b64)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dt", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_division_by_zero_agrees_with_the_gpu(dt):
    """`//` and `%` by zero (undefined in Triton): the interpreter gives what the GPU's code
    gives. The CPU emulator's nt_div / nt_mod are models written for it, so only the GPU can
    judge here."""
    info = torch.iinfo(dt)
    n = 37
    a = torch.randint(max(info.min, -1000), min(info.max, 1000), (n,), dtype=dt)
    b = torch.zeros(n, dtype=dt)
    b[::3] = 7
    outs = {}
    for path in ("interp", "cuda"):
        q, r = torch.full((n,), 5, dtype=dt), torch.full((n,), 5, dtype=dt)
        run(path, _div_mod, (1,), a, b, q, r, n, BLOCK=64)
        outs[path] = (q, r)
    assert torch.equal(outs["interp"][0], outs["cuda"][0]), (outs["interp"][0], outs["cuda"][0])
    assert torch.equal(outs["interp"][1], outs["cuda"][1]), (outs["interp"][1], outs["cuda"][1])


def _trunc_div(x, y):
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


# ----------------------------------------------------------------------------- shifts

@newt.jit
def _shifts(a_ptr, b_ptr, l_ptr, r_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a = nl.load(a_ptr + offs, mask=offs < n)
    b = nl.load(b_ptr + offs, mask=offs < n)
    nl.store(l_ptr + offs, a << b, mask=offs < n)
    nl.store(r_ptr + offs, a >> b, mask=offs < n)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt", [torch.int32, torch.int64, torch.uint32, torch.int8])
def test_shift_amounts_outside_the_width(path, dt):
    """A shift by an amount >= the width or negative (read as unsigned) clamps to the width, as
    PTX's shl / shr do: << gives 0, >> gives 0 or the sign. (C++ leaves it undefined: the
    generated code used to give x << (s % 32) on a CPU.)"""
    bits = torch.iinfo(dt).bits
    n = 45
    a = torch.randint(-2**31, 2**31, (n,), dtype=torch.int64).to(dt)
    b = torch.randint(-3, 2 * bits + 3, (n,), dtype=torch.int64)
    b[:6] = torch.tensor([bits, bits - 1, bits + 1, 32, 33, -1])
    b = b.to(dt)
    lo, ro = torch.full((n,), 5, dtype=dt), torch.full((n,), 5, dtype=dt)
    run(path, _shifts, (1,), a, b, lo, ro, n, BLOCK=64)
    signed = dt.is_signed
    wide = max(bits, 32)     # narrower types shift in 32 bits and are truncated back
    A = [int(v) for v in a.to(torch.int64)] if dt != torch.uint32 else \
        [int(v) % 2**32 for v in a.to(torch.int64)]
    S = [int(v) % 2**wide for v in b.to(torch.int64)]

    def wrap(v):
        v %= 2**bits
        return v - 2**bits if signed and v >= 2**(bits - 1) else v
    want_l = [wrap(x << s) if s < wide else 0 for x, s in zip(A, S)]
    want_r = [wrap(x >> min(s, wide - 1)) if signed else (x >> s if s < wide else 0)
              for x, s in zip(A, S)]
    got_l = [wrap(int(v)) for v in lo.to(torch.int64)]
    got_r = [wrap(int(v)) for v in ro.to(torch.int64)]
    assert got_l == want_l
    assert got_r == want_r


# ----------------------------------------------------------------------------- bool arithmetic

@newt.jit
def _bool_arith(a_ptr, b_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a = nl.load(a_ptr + offs, mask=offs < n)
    b = nl.load(b_ptr + offs, mask=offs < n)
    nl.store(out_ptr + offs, (a + b).to(nl.int32), mask=offs < n)
    nl.store(out_ptr + n + offs, (a + a).to(nl.int32), mask=offs < n)
    nl.store(out_ptr + 2 * n + offs, (a - b).to(nl.int32), mask=offs < n)
    nl.store(out_ptr + 3 * n + offs, (a * b).to(nl.int32), mask=offs < n)
    nl.store(out_ptr + 4 * n + offs, (a << b).to(nl.int32), mask=offs < n)


@pytest.mark.parametrize("path", PATHS)
def test_bool_arithmetic_wraps(path):
    """int1 + - * << wrap to one bit, as Triton's i1 arithmetic does (True + True is False);
    the generated code converted the 32-bit sum to bool (2 -> True)."""
    n = 37
    a, b = torch.rand(n) < 0.5, torch.rand(n) < 0.5
    out = torch.full((5 * n,), 7, dtype=torch.int32)
    run(path, _bool_arith, (1,), a, b, out, n, BLOCK=64)
    x, y = a.int(), b.int()
    want = torch.cat([x ^ y, x * 0, x ^ y, x & y, x * (1 - y)])
    assert torch.equal(out, want)


# ----------------------------------------------------------------------------- float -> int

@newt.jit
def _float_to_ints(x_ptr, i8_ptr, u16_ptr, i32_ptr, u32_ptr, i64_ptr, u64_ptr, n,
                   BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    nl.store(i8_ptr + offs, x.to(nl.int8), mask=offs < n)
    nl.store(u16_ptr + offs, x.to(nl.uint16), mask=offs < n)
    nl.store(i32_ptr + offs, x.to(nl.int32), mask=offs < n)
    nl.store(u32_ptr + offs, x.to(nl.uint32), mask=offs < n)
    nl.store(i64_ptr + offs, x.to(nl.int64), mask=offs < n)
    nl.store(u64_ptr + offs, x.to(nl.uint64), mask=offs < n)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16])
def test_float_to_int_saturates_outside_the_range(path, src):
    """Float -> int truncates toward zero, saturates to 32 or 64 bits and takes NaN to 0 (2^63's
    bits at 64 bits: the GPU's cvt.rzi from fp32); 8- and 16-bit results are the low bits of the
    32-bit one. The generated code calls the CUDA conversions (a C cast is undefined there: on a
    CPU NaN gave INT_MIN), with an fp64 NaN tested first."""
    n = 45
    x = (torch.randn(n, dtype=torch.float64) * 10.0 ** torch.randint(0, 21, (n,))).to(src)
    x[:8] = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0 ** 31, -2.0 ** 31 - 2**9,
                          2.0 ** 64, 2.0 ** 63, -300.7], dtype=torch.float64).to(src)
    outs = [torch.full((n,), 3, dtype=d) for d in (torch.int8, torch.int16, torch.int32,
                                                   torch.int32, torch.int64, torch.int64)]
    run(path, _float_to_ints, (1,), x, *outs[:1], outs[1].view(torch.uint16), outs[2],
        outs[3].view(torch.uint32), outs[4], outs[5].view(torch.uint64), n, BLOCK=64)
    t = torch.nan_to_num(x.double(), nan=0.0).trunc()

    def sat(lo, hi):
        return [lo if v <= lo else hi if v >= hi else int(v) for v in t.tolist()]
    i32, u32 = sat(-2**31, 2**31 - 1), sat(0, 2**32 - 1)
    i64, u64 = sat(-2**63, 2**63 - 1), sat(0, 2**64 - 1)

    def wrap(vs, bits):
        return [(v + 2**(bits - 1)) % 2**bits - 2**(bits - 1) for v in vs]
    assert outs[0].tolist() == wrap(i32, 8)
    assert outs[1].tolist() == wrap(u32, 16)
    assert outs[2].tolist() == i32
    assert outs[3].tolist() == wrap(u32, 32)
    nan64 = [-2**63 if v != v else w for v, w in zip(x.double().tolist(), i64)]
    assert outs[4].tolist() == nan64                # NaN: 2^63's bits at 64 bits (cvt.rzi.s64)
    assert outs[5].tolist() == [-2**63 if v != v else w
                                for v, w in zip(x.double().tolist(), wrap(u64, 64))]


# ----------------------------------------------------------------------------- rtz downcasts

@newt.jit
def _downcasts(x_ptr, d_ptr, h_ptr, b_ptr, e_ptr, r_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    f = x.to(nl.float32)
    nl.store(d_ptr + offs, x.to(nl.float32, fp_downcast_rounding="rtz"), mask=offs < n)
    nl.store(h_ptr + offs, f.to(nl.float16, "rtz"), mask=offs < n)
    nl.store(b_ptr + offs, nl.cast(f, nl.bfloat16, fp_downcast_rounding="rtz"), mask=offs < n)
    e = nl.minimum(nl.maximum(f, -440.0), 440.0)
    nl.store(e_ptr + offs, e.to(nl.float8e4nv, fp_downcast_rounding="rtz"), mask=offs < n)
    nl.store(r_ptr + offs, f.to(nl.float16, fp_downcast_rounding="rtne"), mask=offs < n)


def _toward_zero(x, dt):
    """The representable value of `dt` nearest `x` on the side of zero (x exact in fp64)."""
    out = []
    for v in x.double().tolist():
        t = torch.tensor([v], dtype=x.dtype).to(dt)      # to nearest: one rounding from x's type
        bits = {1: torch.int8, 2: torch.int16, 4: torch.int32}[t.element_size()]
        while v == v and abs(t.double().item()) > abs(v):
            t = (t.view(bits) - 1).view(dt)
        out.append(t)
    return torch.cat(out)


@pytest.mark.parametrize("path", PATHS)
def test_fp_downcast_rounding_toward_zero(path):
    """`x.to(dt, fp_downcast_rounding="rtz")` rounds toward zero (beyond the range: the largest
    finite value), "rtne" to nearest, as in Triton; the option was accepted and ignored."""
    n = 45
    x = torch.randn(n, dtype=torch.float64) * 10.0 ** torch.randint(-6, 6, (n,))
    x[:6] = torch.tensor([70000.0, -1e6, float("inf"), float("nan"), -0.0, 1.0 + 2.0 ** -40])
    outs = [torch.full((n,), float("nan"), dtype=d) for d in (torch.float32, torch.float16,
                                                             torch.bfloat16)]
    e = torch.zeros(n, dtype=torch.float8_e4m3fn)
    rn = torch.full((n,), float("nan"), dtype=torch.float16)
    run(path, _downcasts, (1,), x, *outs, e, rn, n, BLOCK=64)
    f = x.float()
    torch.testing.assert_close(outs[0], _toward_zero(x, torch.float32), equal_nan=True,
                               rtol=0, atol=0)
    torch.testing.assert_close(outs[1], _toward_zero(f, torch.float16), equal_nan=True,
                               rtol=0, atol=0)
    torch.testing.assert_close(outs[2], _toward_zero(f, torch.bfloat16), equal_nan=True,
                               rtol=0, atol=0)
    want_e = _toward_zero(f.nan_to_num(nan=-440.0).clamp(-440.0, 440.0), torch.float8_e4m3fn)
    assert torch.equal(e.view(torch.uint8), want_e.view(torch.uint8))
    torch.testing.assert_close(rn, f.half(), equal_nan=True, rtol=0, atol=0)


def test_fp_downcast_rounding_is_only_for_float_narrowing():
    for body, msg in [(_rtz_widen, "narrower float"), (_rtz_unknown, '"rtne" or "rtz"')]:
        with pytest.raises(newt.CompilationError, match=msg):
            newt.compile(body, {"x_ptr": "*fp32"}, {})


@newt.jit
def _rtz_widen(x_ptr):
    nl.store(x_ptr, nl.load(x_ptr).to(nl.float64, fp_downcast_rounding="rtz").to(nl.float32))


@newt.jit
def _rtz_unknown(x_ptr):
    nl.store(x_ptr, nl.load(x_ptr).to(nl.float16, fp_downcast_rounding="up").to(nl.float32))


# ----------------------------------------------------------------------------- 16-bit NaN bits

@newt.jit
def _half_nan_bits(x_ptr, h_ptr, b_ptr, hb_ptr, bb_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    h = x.to(nl.float16)
    b = x.to(nl.bfloat16)
    nl.store(h_ptr + offs, h, mask=offs < n)
    nl.store(b_ptr + offs, b, mask=offs < n)
    nl.store(hb_ptr + offs, h.to(nl.int16, bitcast=True), mask=offs < n)
    nl.store(bb_ptr + offs, b.to(nl.uint16, bitcast=True).to(nl.int32), mask=offs < n)


@pytest.mark.parametrize("path", PATHS)
def test_half_nan_is_canonical_when_stored_or_bitcast(path):
    """fp16 / bf16 live in fp32 registers: every NaN leaves one as 0x7FFF (cvt.rn.f16.f32,
    cvt.rn.bf16.f32), whatever its sign and payload, stored or bitcast; other values keep their
    bits. (The interpreter kept torch's bits: 0x7E00 / 0xFE00 and payloads for fp16, 0xFFFF
    for bf16.)"""
    n = 37
    x = torch.randn(n)
    bits = torch.tensor([0x7FC00000, -0x400000, 0x7F812345, -0x7F0000FF], dtype=torch.int32)
    x[:4] = bits.view(torch.float32)
    x[4], x[5] = float("inf"), -0.0
    h, b = torch.full((n,), 1.0, dtype=torch.float16), torch.full((n,), 1.0, dtype=torch.bfloat16)
    hb, bb = torch.full((n,), 5, dtype=torch.int16), torch.full((n,), 5, dtype=torch.int32)
    run(path, _half_nan_bits, (1,), x, h, b, hb, bb, n, BLOCK=64)
    nan = x.isnan()
    want_h = torch.where(nan, 0x7FFF, x.half().view(torch.int16).int()).short()
    want_b = torch.where(nan, 0x7FFF, x.bfloat16().view(torch.int16).int() & 0xFFFF)
    assert torch.equal(h.view(torch.int16), want_h)
    assert torch.equal(hb, want_h)
    assert torch.equal(b.view(torch.int16).int() & 0xFFFF, want_b)
    assert torch.equal(bb, want_b)


# ----------------------------------------------------------------------------- uint64 -> float

@newt.jit
def _u64_to_float(x_ptr, d_ptr, f_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    nl.store(d_ptr + offs, x.to(nl.float64), mask=offs < n)
    nl.store(f_ptr + offs, x.to(nl.float32), mask=offs < n)


@pytest.mark.parametrize("path", PATHS)
def test_uint64_above_2_63_converts_with_one_rounding(path):
    """2**64 - 1025 and its neighbours sit halfway-ish between float64 neighbours: rounding the
    int64 value first and adding 2**64 after rounds twice."""
    n = 45
    vals = [2**64 - 1025, 2**64 - 1024 - 1, 2**64 - 3000, 2**63 + 1025, 2**63 + 3 * 1024 + 1,
            2**64 - 1]
    vals += [2**63 + 2 * int(v) + 1 for v in torch.randint(0, 2**62, (n - len(vals),))]
    x = torch.tensor([v - 2**64 if v >= 2**63 else v for v in vals], dtype=torch.int64)
    x = x.view(torch.uint64)
    d, f = torch.full((n,), float("nan"), dtype=torch.float64), torch.full((n,), float("nan"))
    run(path, _u64_to_float, (1,), x, d, f, n, BLOCK=64)
    assert d.tolist() == [float(v) for v in vals]
    import numpy as np
    assert f.tolist() == np.array(vals, dtype=np.uint64).astype(np.float32).tolist()


# ----------------------------------------------------------------------------- fp16/bf16 cumsum

@newt.jit
def _cumsum_rows(x_ptr, out_ptr, M, N, REVERSE: nl.constexpr, BM: nl.constexpr,
                 BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    nl.store(out_ptr + offs, nl.cumsum(x, axis=1, reverse=REVERSE), mask=mask)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reverse", [False, True])
def test_half_cumsum_accumulates_in_fp32(path, dt, reverse):
    """Every prefix sum within one rounding to the 16-bit type of the exact one (plus fp32's
    error, negligible here): partial sums rounded to 16 bits at each step drift by several ulp
    over 500 positive terms."""
    M, N = 3, 501
    x = (torch.rand(M, N) + 0.5).to(dt)
    out = torch.full((M, N), float("nan"), dtype=dt)
    run(path, _cumsum_rows, (1,), x, out, M, N, REVERSE=reverse, BM=4, BN=512)
    xs = x.double().flip(1) if reverse else x.double()
    exact = xs.cumsum(1).flip(1) if reverse else xs.cumsum(1)
    ulp = torch.finfo(dt).eps * exact.abs()       # the 16-bit spacing near each sum (upper bound)
    assert ((out.double() - exact).abs() <= ulp).all(), (out.double() - exact).abs().max()
