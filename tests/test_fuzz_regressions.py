"""Regression tests for bugs the differential fuzzer (tests/fuzz, scripts/fuzz_gpu.py) found,
each reduced to a minimal kernel, run on targets interp and cuda and compared with torch.

Bugs still open in another area are marked xfail(strict=True) with a precise reason (on the
target that shows them), so CI stays green, the bug stays visible, and the test starts failing
loudly the day it is fixed (then drop the mark). Where the GPU is needed to see a bug, a CPU
variant checks the compiled path too: AOT compilation (NVRTC) or the generated code emulated on
the CPU (tests/test_codegen_emulator.py).
"""
import re

import pytest
import torch

import newt
import newt.compiler
import newt.language as nl
from newt import dtypes as D

# Fixed: build_ir bound a runtime scalar specialized as equal_to_1 to the weak Python int 1
# (different promotion from any other value of the argument, and no tensor methods such as .to()).


# --------------------------------------------------------------------------- equal_to_1 scalars
# Found by the fuzzer (case seeds 190, 300+): `(s).to(nl.int8)` on a runtime int that is 1.

@newt.jit
def _scalar_to_kernel(x_ptr, s, out_ptr, N, BLOCK: nl.constexpr):
    r = nl.arange(0, BLOCK)
    m = r < N
    x = nl.load(x_ptr + r, mask=m)
    nl.store(out_ptr + r, x * (s).to(nl.int8), mask=m)


@newt.jit
def _scalar_promote_kernel(x_ptr, s, out_ptr, N, BLOCK: nl.constexpr):
    r = nl.arange(0, BLOCK)
    m = r < N
    x = nl.load(x_ptr + r, mask=m)
    nl.store(out_ptr + r, x + s, mask=m)   # int8 block + int32 scalar: int32, no int8 wrap


@pytest.mark.parametrize("s", [1, 3])
def test_scalar_arg_to_method_when_value_is_one(request, target, device, s):
    x = torch.randint(-100, 100, (37,), dtype=torch.int8, device=device)
    out = torch.full((37,), 77, dtype=torch.int8, device=device)
    _scalar_to_kernel[(1,)](x, s, out, 37, BLOCK=64)
    want = (x.cpu().to(torch.int64) * s + 128) % 256 - 128
    assert torch.equal(out.cpu().to(torch.int64), want)


@pytest.mark.parametrize("s", [1, 3])
def test_scalar_arg_promotes_strongly_when_value_is_one(request, target, device, s):
    x = torch.randint(-128, 128, (37,), dtype=torch.int8, device=device)
    x[0] = 127   # 127 + 1 = 128 only if the sum is computed in int32
    out = torch.full((37,), -7, dtype=torch.int32, device=device)
    _scalar_promote_kernel[(1,)](x, s, out, 37, BLOCK=64)
    assert torch.equal(out.cpu(), x.cpu().to(torch.int32) + s)


def test_scalar_arg_equal_to_1_compiles():
    """CPU view of the bug: AOT compile with the specialization the JIT picks for s == 1."""
    newt.compiler.compile(_scalar_to_kernel, {"x_ptr": "*i8", "s": "i32", "out_ptr": "*i8",
                                              "N": "i32"}, {"BLOCK": 64}, arch="sm_90a",
                          specialization={"s": {"equal_to_1": True}})


def _ir_store_dtype(spec):
    import newt.frontend
    fn = newt.frontend.build_ir(_scalar_promote_kernel.fn,
                                {"x_ptr": D.pointer_type(D.int8), "s": D.int32,
                                 "out_ptr": D.pointer_type(D.int32), "N": D.int32},
                                {"BLOCK": 64}, spec)
    from newt.ir.printer import format_function
    return format_function(fn)


def test_scalar_arg_equal_to_1_same_ir_types():
    """CPU view: the add is typed the same whether or not `s` is specialized as 1."""
    import re
    plain = _ir_store_dtype({})
    spec = _ir_store_dtype({"s": {"equal_to_1": True}})

    def add_types(text):
        return [ln.split(":")[-1].strip() for ln in text.splitlines()
                if re.search(r"\badd\b", ln) and "ptr" not in ln]
    assert add_types(spec) == add_types(plain), (plain, spec)


# --------------------------------------------------------------------------- register spills
# Found by the fuzzer (AOT compile check): a plain masked 2-D copy of a 64x128 block on 4 warps
# (64 elements per thread) uses 255 registers and spills.

# Fixed: memory ops read index-computable pointers and masks from their index math per group of
# the access (newt/codegen/memory.py) instead of per-element arrays of 64-bit pointers and mask
# bits that stayed alive across the vectorization test and the predicated fallback.

@newt.jit
def _copy2d_kernel(x_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)[:, None]
    rn = nl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    x = nl.load(x_ptr + rm * N + rn, mask=mask, other=1.0)
    nl.store(out_ptr + rm * N + rn, x, mask=mask)


def test_masked_copy_64x128(target, device):
    x = torch.randn(33, 100, device=device)
    out = torch.full((33, 100), float("nan"), device=device)
    _copy2d_kernel[(1,)](x, out, 33, 100, BM=64, BN=128, num_warps=4)
    assert torch.equal(out.cpu(), x.cpu())


@pytest.mark.parametrize("dt", ["fp32", "fp16", "fp64", "i8"])
def test_masked_copy_64x128_does_not_spill(dt):
    ck = newt.compiler.compile(_copy2d_kernel, {"x_ptr": "*" + dt, "out_ptr": "*" + dt,
                                                "M": "i32", "N": "i32"},
                               {"BM": 64, "BN": 128}, arch="sm_90a", num_warps=4)
    assert ck.n_spills == 0, f"{ck.n_regs} registers, {ck.n_spills} spills"


# Found by the fuzzer (AOT compile check, CI): three masked 2-D loads (bool, fp32, fp32) and a
# select spilled (255 registers + 32 spill ops; 244 registers at 16x64 on 1 warp) with 32
# elements per thread: every load kept a 64-bit pointer per element and the mask bits alive.

@newt.jit
def _select3_kernel(x0_ptr, x1_ptr, x2_ptr, out, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)[:, None]
    rn = nl.arange(0, BN)[None, :]
    mm = rm < M
    mn = rn < N
    mask = mm & mn
    x0 = nl.load(x0_ptr + rm * N + rn, mask=mask, other=True)
    x1 = nl.load(x1_ptr + rm * N + rn, mask=mask, other=1.0)
    x2 = nl.load(x2_ptr + rm * N + rn, mask=mask, other=1.0)
    t1 = nl.where(x0, x2, x1)
    nl.store(out + rm * N + rn, t1, mask=mask)


_SELECT3_SIG = {"x0_ptr": "*i1", "x1_ptr": "*fp32", "x2_ptr": "*fp32", "out": "*fp32",
                "M": "i32", "N": "i32"}


# 32 elements per thread (the most the fuzzer asks for) in every block orientation: 96
# registers or fewer after the fix (NVRTC 13.0), so 160 leaves a margin for other versions
@pytest.mark.parametrize("BM,BN,w", [(16, 64, 1), (256, 4, 1), (1, 1024, 1), (4, 512, 2),
                                     (64, 64, 4), (256, 32, 8)])
def test_masked_select3_does_not_spill(BM, BN, w):
    ck = newt.compiler.compile(_select3_kernel, _SELECT3_SIG, {"BM": BM, "BN": BN},
                               arch="sm_90a", num_warps=w)
    assert ck.n_spills == 0 and ck.local_bytes == 0, f"{ck.n_regs} registers, {ck.n_spills} spills"
    assert ck.n_regs <= 160, f"{ck.n_regs} registers"
    # no access reads a per-element pointer array
    assert not re.search(r"nt_(ld|st)p\d+\(\w+\[", ck.source), "per-slot pointer array"


def _select3_case(device, M, N):
    x0 = torch.rand(M, N, device=device) < 0.5
    x1, x2 = torch.randn(M, N, device=device), torch.randn(M, N, device=device)
    out = torch.full((M, N), float("nan"), device=device)
    return x0, x1, x2, out, torch.where(x0, x2, x1)


@pytest.mark.parametrize("BM,BN,M,N", [(16, 64, 13, 37), (16, 64, 16, 40), (256, 4, 201, 3),
                                       (1, 1024, 1, 1000)])
def test_masked_select3(target, device, BM, BN, M, N):
    x0, x1, x2, out, want = _select3_case(device, M, N)
    _select3_kernel[(1,)](x0, x1, x2, out, M, N, BM=BM, BN=BN, num_warps=1)
    assert torch.equal(out.cpu(), want.cpu())


@pytest.mark.parametrize("BM,BN,w,M,N", [(16, 64, 1, 13, 37), (16, 64, 1, 16, 40),
                                         (16, 64, 1, 16, 64), (256, 4, 1, 201, 3),
                                         (256, 4, 1, 256, 4), (64, 64, 4, 61, 63)])
def test_masked_select3_emulated(BM, BN, w, M, N):
    """CPU view: the generated code run through the emulator (vector groups where rows are
    16-byte aligned and unmasked, the predicated path elsewhere)."""
    import test_codegen_emulator as E
    x0, x1, x2, out, want = _select3_case("cpu", M, N)
    E.emulate(_select3_kernel, (1,), x0, x1, x2, out, M, N, BM=BM, BN=BN, num_warps=w)
    assert torch.equal(out, want)


# --------------------------------------------------------------------------- compile time
# Found by the fuzzer (case seed 31001, depth 6): a kernel with six masked loads sharing the
# same offsets and mask did not finish compiling in minutes (the load-hoisting pass re-lifted
# the shared pure operands of every load recursively, exponential in their sharing).

_SIX_LOADS = '''
import newt
import newt.compiler
import newt.language as nl


@newt.jit
def six_loads(a, b, c, d, e, f, out, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)[:, None]
    rn = nl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    x = nl.load(a + rm * N + rn, mask=mask)
    x += nl.load(b + rm * N + rn, mask=mask)
    x += nl.load(c + rm * N + rn, mask=mask)
    x += nl.load(d + rm * N + rn, mask=mask)
    x += nl.load(e + rm * N + rn, mask=mask)
    x += nl.load(f + rm * N + rn, mask=mask)
    nl.store(out + rm * N + rn, x, mask=mask)


if __name__ == "__main__":
    sig = dict({p: "*fp32" for p in "abcdef"}, out="*fp32", M="i32", N="i32")
    newt.compiler.compile(six_loads, sig, {"BM": 1, "BN": 8}, num_warps=2)
    print("compiled")
'''


def test_six_masked_loads_compile(tmp_path):
    """Compiles in a child process with a generous limit, so a regression cannot hang CI."""
    import os
    import subprocess
    import sys
    path = tmp_path / "six_loads.py"
    path.write_text(_SIX_LOADS)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                           timeout=120, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("compiling six masked loads did not finish in 120 s")
    assert r.returncode == 0 and "compiled" in r.stdout, r.stderr[-3000:]


# --------------------------------------------------------------------------- signed overflow
# Found by the fuzzer on the H200 (case seed 2029120337, depth 5): `abs(x1 << s) % d` on int64
# differed from the interpreter wherever the shift gave INT64_MIN. Signed arithmetic was emitted
# as signed C++, whose overflow is undefined: NVRTC took abs() to be non-negative (an unsigned
# remainder), folded `x + 1 > x` to true and `(x * 4) // 4` to x. Triton and the interpreter
# wrap. Fixed: +, -, *, <<, negation and abs of 32- and 64-bit signed values are computed on
# the unsigned type (newt/codegen/elementwise.py).

@newt.jit
def _wrap_kernel(x_ptr, d_ptr, out_ptr, N, BLOCK: nl.constexpr):
    r = nl.arange(0, BLOCK)
    m = r < N
    x = nl.load(x_ptr + r, mask=m)
    d = nl.load(d_ptr + r, mask=m)
    nl.store(out_ptr + r, nl.where(x + 1 > x, 1, 0), mask=m)
    nl.store(out_ptr + N + r, (x * 4) // 4, mask=m)
    nl.store(out_ptr + 2 * N + r, nl.abs(x) % ((d & 63) + 1), mask=m)
    nl.store(out_ptr + 3 * N + r, nl.where(-x < 0, 1, 0), mask=m)
    nl.store(out_ptr + 4 * N + r, (x << (d & 7)) - d * x, mask=m)


_WRAP_OUTPUTS = ("x + 1 > x", "(x * 4) // 4", "abs(x) % d", "-x < 0", "(x << s) - d * x")


def _wrap_reference(x, d, bits):
    """What Triton computes: two's-complement wrap at `bits`, C's truncating / and %."""
    def wrap(v):
        if bits == 64:
            return v                      # torch's int64 arithmetic wraps already
        return (v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
    x, d = x.to(torch.int64), d.to(torch.int64)
    one = (wrap(x + 1) > x).to(torch.int64)
    quarter = torch.div(wrap(x * 4), 4, rounding_mode="trunc")
    rem = torch.fmod(wrap(torch.abs(x)), (d & 63) + 1)
    neg = (wrap(-x) < 0).to(torch.int64)
    mix = wrap(wrap(x << (d & 7)) - wrap(d * x))
    return torch.stack([one, quarter, rem, neg, mix])


def _wrap_run(device, dt):
    """(got, want, x): each [5, n], one row per expression of _wrap_kernel."""
    info = torch.iinfo(dt)
    n = 301
    x = torch.randint(info.min, info.max, (n,), dtype=dt)
    x[:8] = torch.tensor([info.max, info.min, info.max - 1, info.min + 1, -1, 0, 1,
                          info.max // 4 + 1], dtype=dt)
    d = torch.randint(-1000, 1000, (n,), dtype=dt)
    out = torch.full((5 * n,), 12345, dtype=dt, device=device)
    _wrap_kernel[(1,)](x.to(device), d.to(device), out, n, BLOCK=512)
    return out.cpu().to(torch.int64).view(5, n), _wrap_reference(x, d, info.bits), x


def _wrap_mismatches(got, want, x, rows):
    return [(_WRAP_OUTPUTS[r], int(x[j]), int(got[r, j]), int(want[r, j]))
            for r in rows for j in (got[r] != want[r]).nonzero().flatten().tolist()][:6]


@pytest.mark.parametrize("dt", [torch.int32, torch.int64])
def test_signed_overflow_wraps(target, device, dt):
    got, want, x = _wrap_run(device, dt)
    bad = _wrap_mismatches(got, want, x, [0, 1, 3, 4])
    assert not bad, bad


@pytest.mark.parametrize("dt", [torch.int32, torch.int64])
def test_abs_of_the_minimum_keeps_its_sign_in_a_remainder(target, device, dt):
    """abs(INT_MIN) wraps to INT_MIN, and its remainder is negative (torch.fmod). On the H200
    (2026-12-01) int32 abs as abs.s32 (or shift-xor-subtract in C) came out positive in the
    remainder (ptxas; Triton's kernel of the same source too): int32 abs is inline PTX now."""
    got, want, x = _wrap_run(device, dt)
    bad = _wrap_mismatches(got, want, x, [2])
    assert not bad, bad


@pytest.mark.parametrize("t", ["i32", "i64"])
def test_signed_overflow_not_assumed_away_by_nvrtc(t):
    """CPU view (the emulator compiles at -O0, where nothing is assumed): NVRTC's PTX keeps the
    comparison of `x + 1 > x` and a signed remainder after abs."""
    k = newt.compiler.compile(_wrap_kernel, {"x_ptr": f"*{t}", "d_ptr": f"*{t}",
                                             "out_ptr": f"*{t}", "N": "i32"},
                              {"BLOCK": 512}, arch="sm_90a", num_warps=4)
    body = k.ptx[k.ptx.index(".entry"):]
    bits = t[1:]
    assert f"rem.s{bits}" in body and f"rem.u{bits}" not in body, "abs() % d: unsigned rem"
    if bits == "32":    # int32 abs by the header's inline PTX, never abs.s32 (see above)
        assert "abs.s32" not in body and re.search(r"shr\.s32 t, %r\d+, 31;", body)
    # the first store's value depends on x: a compare against the type's maximum, not a
    # constant 1 (signed: `x + 1 > x` is true; wrapping: false at the maximum)
    assert re.search(rf"setp\.(eq|ne)\.[su]{bits}\s+%p\d+, %r[d]?\d+, "
                     rf"({2 ** (int(bits) - 1) - 1}|{-(2 ** (int(bits) - 1))})", body) or \
        re.search(rf"setp\.\w+\.s{bits}.*\n.*\n?.*selp", body), body[:3000]


# --------------------------------------------------------------------------- 16-bit float bits
# Found by the fuzzer on the H200 (2026-12-03, case seed 1938852604):
# `x.to(nl.bfloat16).to(nl.uint16, bitcast=True).to(nl.int8)` stored 1 for 1.0, not the low
# byte of its bits (0x80). ptxas 13.0 compiles an 8-bit store or truncation of a register that
# `cvt.rn.bf16.f32` / `cvt.rn.f16.f32` wrote as a float-to-int conversion (F2I.U8.F16); the
# bitcast now passes the bits through a move (codegen/header.py, nt_bits16).

@newt.jit
def _half_bits_low_byte_kernel(x_ptr, out_ptr, N, HALF: nl.constexpr, BITS: nl.constexpr,
                               BLOCK: nl.constexpr):
    r = nl.arange(0, BLOCK)
    m = r < N
    x = nl.load(x_ptr + r, mask=m)
    h = x.to(nl.bfloat16) if HALF == "bf16" else x.to(nl.float16)
    bits = h.to(nl.int16, bitcast=True) if BITS == "i16" else h.to(nl.uint16, bitcast=True)
    nl.store(out_ptr + r, bits.to(nl.int8), mask=m)


_HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.mark.parametrize("half", ["bf16", "fp16"])
@pytest.mark.parametrize("bits", ["i16", "u16"])
def test_low_byte_of_half_bits(target, device, half, bits):
    n = 1001
    x = torch.randn(n) * 8
    x[:6] = torch.tensor([1.0, -0.0, 2.0, -1.5, float("inf"), 0.5])
    out = torch.full((n,), 77, dtype=torch.int8, device=device)
    _half_bits_low_byte_kernel[(1,)](x.to(device), out, n, HALF=half, BITS=bits, BLOCK=1024)
    want = x.to(_HALF[half]).view(torch.int16).to(torch.int8)
    assert torch.equal(out.cpu(), want), (out.cpu()[:6].tolist(), want[:6].tolist())


@pytest.mark.parametrize("half", ["bf16", "fp16"])
def test_low_byte_of_half_bits_is_not_stored_from_the_conversion(half):
    """CPU view: in the PTX, no 8-bit store or conversion reads a register that the fp32 ->
    16-bit float conversion wrote (the form ptxas miscompiles); the bits pass a mov.b16 first."""
    k = newt.compiler.compile(_half_bits_low_byte_kernel,
                              {"x_ptr": "*fp32", "out_ptr": "*i8", "N": "i32"},
                              {"HALF": half, "BITS": "u16", "BLOCK": 1024}, arch="sm_90a",
                              num_warps=4)
    body = k.ptx[k.ptx.index(".entry"):]
    kind = "bf16" if half == "bf16" else "f16"
    written = set(re.findall(rf"cvt\.rn\.{kind}\.f32\s+(%rs\d+),", body))
    assert written, "no fp32 -> 16-bit float conversion in the PTX"
    for line in body.splitlines():
        if re.search(r"\b(st\.\w+(\.v\d)?\.[usb]8|cvt\.[us]8\.\w+)\b", line):
            used = set(re.findall(r"%rs\d+\b", line))
            assert not used & written, line
    assert any(re.search(rf"mov\.b16\s+%rs\d+, {re.escape(r)};", body) for r in written)


# --------------------------------------------------------------------------- broadcast row store
# Found by the fuzzer (seeds 777147, 777169, 777230 of base 777123): a row statistic broadcast to
# 2-D and stored crashed the row-vector pass (it read the result of every user of the broadcast,
# a store has none, before checking they were all layout conversions).

@newt.jit
def _row_mean_store_kernel(x_ptr, o_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    mean = nl.sum(x, axis=1) / N
    nl.store(o_ptr + rm[:, None] * N + rn[None, :], nl.broadcast_to(mean[:, None], (BM, BN)),
             mask=mask)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_broadcast_row_store_compiles(arch):
    newt.compile(_row_mean_store_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32",
                                          "N": "i32"}, dict(BM=64, BN=64), arch=arch)


def test_broadcast_row_store(target, device):
    M, N = 37, 51
    x = torch.randn(M, N, device=device)
    o = torch.full((M, N), float("nan"), device=device)
    _row_mean_store_kernel[(1,)](x, o, M, N, BM=64, BN=64)
    torch.testing.assert_close(o, x.mean(1, keepdim=True).expand(M, N), rtol=1e-5, atol=1e-5)
