"""Op suite, elementwise: every arithmetic, bitwise, shift and comparison operator over every
dtype, Triton's promotion (weak Python numbers, int/float mixes), C-style integer division,
wrapping overflow, and Python's min/max/abs on scalars. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import (ALL, BLOCK, FLOATS, INTS, SIGNED, UNSIGNED, bits, check, from_i64,
                         is_unsigned, name, poison, rand, to_i64, wrap)


@newt.jit
def binop_kernel(x_ptr, y_ptr, out_ptr, n, OP: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "truediv":
        z = x / y
    elif OP == "floordiv":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "and":
        z = x & y
    elif OP == "or":
        z = x | y
    elif OP == "xor":
        z = x ^ y
    elif OP == "shl":
        z = x << y
    elif OP == "shr":
        z = x >> y
    elif OP == "lt":
        z = x < y
    elif OP == "le":
        z = x <= y
    elif OP == "gt":
        z = x > y
    elif OP == "ge":
        z = x >= y
    elif OP == "eq":
        z = x == y
    elif OP == "ne":
        z = x != y
    elif OP == "neg":
        z = -x
    elif OP == "invert":
        z = ~x
    elif OP == "pos":
        z = +x
    else:
        nl.static_assert(OP == "abs")
        z = abs(x)
    nl.store(out_ptr + offs, z, mask=mask)


def run_binop(op, x, y, out):
    n = x.numel()
    binop_kernel[(newt.cdiv(n, BLOCK),)](x, y, out, n, OP=op, BLOCK=BLOCK)
    return out


def int_ref(op, x, y, dt):
    """Triton's integer semantics computed on int64 bit patterns, wrapped to `dt`."""
    a, b = to_i64(x), to_i64(y)
    if op == "add":
        r = a + b
    elif op == "sub":
        r = a - b
    elif op == "mul":
        r = a * b
    elif op == "floordiv":
        r = torch.div(a, b, rounding_mode="trunc")
    elif op == "mod":
        r = torch.fmod(a, b)
    elif op == "and":
        r = a & b
    elif op == "or":
        r = a | b
    elif op == "xor":
        r = a ^ b
    elif op == "shl":
        r = a << b
    elif op == "shr":
        r = a >> b
        if is_unsigned(dt) and bits(dt) == 64:
            r = r & ((1 << (64 - b)) - 1)
    elif op == "neg":
        r = -a
    elif op == "invert":
        r = ~a
    elif op == "pos":
        r = a
    elif op == "abs":
        r = a if is_unsigned(dt) else a.abs()
    return from_i64(r, dt)


ARITH = ["add", "sub", "mul", "floordiv", "mod"]
BITWISE = ["and", "or", "xor", "shl", "shr"]


@pytest.mark.parametrize("n", [1, 7, 1025])
@pytest.mark.parametrize("op", ARITH + BITWISE + ["neg", "invert", "pos", "abs"])
@pytest.mark.parametrize("dt", INTS, ids=name)
def test_int_ops(target, device, dt, op, n):
    b = bits(dt)
    if op in ("floordiv", "mod"):  # no zero divisors; uint64 below 2**62 so int64 math agrees
        hi = 2 ** 62 if b == 64 else None
        x = rand(n, dt, device, 0 if dt == torch.uint64 else None, hi)
        y = rand(n, dt, device, 1, 2 ** min(b - 1, 20))
        if not is_unsigned(dt):
            y = torch.where(torch.rand(n, device=device) < 0.5, y, -y.to(torch.int64)).to(dt)
    elif op in ("shl", "shr"):
        x = rand(n, dt, device)
        y = rand(n, dt, device, 0, b)
    else:
        x, y = rand(n, dt, device), rand(n, dt, device)
    out = run_binop(op, x, y, poison(n, dt, device))
    check(out, int_ref(op, x, y, dt))


@pytest.mark.parametrize("n", [1, 7, 1025])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "mod", "neg", "pos", "abs"])
@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_float_ops(target, device, dt, op, n):
    x, y = rand(n, dt, device), rand(n, dt, device)
    # division and remainder of fp16/bf16 compute (and return) fp32, as in Triton
    out_dt = torch.float32 if op in ("truediv", "mod") and dt in (torch.float16, torch.bfloat16) else dt
    out = run_binop(op, x, y, poison(n, out_dt, device))
    wide = torch.float64 if dt == torch.float64 else torch.float32
    a, b = x.to(wide), y.to(wide)
    ref = {"add": a + b, "sub": a - b, "mul": a * b, "truediv": a / b, "mod": torch.fmod(a, b),
           "neg": -a, "pos": a, "abs": a.abs()}[op]
    check(out, ref.to(out_dt))


def _some_ties(x, y):
    """y with ~30% of its elements replaced by x's. (torch.where on the bits: some torch builds
    have no where for uint16/32/64.)"""
    signed = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}
    vx, vy = (x.view(signed[x.dtype]), y.view(signed[y.dtype])) if x.dtype in signed else (x, y)
    pick = torch.where(torch.rand(x.numel(), device=x.device) < 0.3, vx, vy)
    return pick.view(x.dtype)


@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge", "eq", "ne"])
@pytest.mark.parametrize("dt", ALL, ids=name)
def test_comparisons(target, device, dt, op):
    n = 1000
    x = rand(n, dt, device)
    y = _some_ties(x, rand(n, dt, device))
    out = run_binop(op, x, y, poison(n, torch.bool, device))
    if dt.is_floating_point or dt == torch.bool:
        a, b = x.cpu(), y.cpu()
    else:  # order of unsigned 64-bit patterns: flip the sign bit
        a, b = to_i64(x), to_i64(y)
        if dt == torch.uint64:
            a, b = a ^ (-2 ** 63), b ^ (-2 ** 63)
    ref = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[op]
    check(out, ref)


@pytest.mark.parametrize("dt", INTS + [torch.bool], ids=name)
def test_int_truediv_gives_fp32(target, device, dt):
    n = 257
    lo = 1 if dt != torch.bool else None
    x = rand(n, dt, device, lo, 100 if dt != torch.bool else None)
    y = rand(n, dt, device, lo, 100 if dt != torch.bool else None)
    if dt == torch.bool:
        x, y = x, torch.ones_like(y)
    out = run_binop("truediv", x, y, poison(n, torch.float32, device))
    check(out, x.cpu().to(torch.float32) / y.cpu().to(torch.float32))


def test_division_truncates_toward_zero(target, device):
    """// and % on ints are C's (truncate, sign of the dividend), not Python's floor semantics."""
    x = torch.tensor([7, -7, 7, -7, 0, 1, -1, 2 ** 31 - 1], dtype=torch.int32, device=device)
    y = torch.tensor([2, 2, -2, -2, 3, -3, 3, 7], dtype=torch.int32, device=device)
    q = run_binop("floordiv", x, y, poison(8, torch.int32, device))
    r = run_binop("mod", x, y, poison(8, torch.int32, device))
    check(q, torch.tensor([3, -3, -3, 3, 0, 0, 0, 306783378], dtype=torch.int32))
    check(r, torch.tensor([1, -1, 1, -1, 0, 1, -1, 1], dtype=torch.int32))
    fx = torch.tensor([5.5, -5.5, 5.5, -5.5], device=device)
    fy = torch.tensor([2.0, 2.0, -2.0, -2.0], device=device)
    fr = run_binop("mod", fx, fy, poison(4, torch.float32, device))
    check(fr, torch.tensor([1.5, -1.5, 1.5, -1.5]))  # fmod


def test_int32_overflow_wraps(target, device):
    n = 1000
    x = rand(n, torch.int32, device, 2 ** 30, 2 ** 31)
    y = rand(n, torch.int32, device, 2 ** 30, 2 ** 31)
    check(run_binop("add", x, y, poison(n, torch.int32, device)), int_ref("add", x, y, torch.int32))
    check(run_binop("mul", x, y, poison(n, torch.int32, device)), int_ref("mul", x, y, torch.int32))


# ----------------------------------------------------------------------------- promotion

@newt.jit
def mixed_kernel(x_ptr, y_ptr, out_ptr, n, EXPECT: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    z = x + y
    nl.static_assert(z.dtype == EXPECT, "promotion")
    nl.store(out_ptr + offs, z, mask=mask)


PROMOTIONS = [  # (x, y, result) per Triton's rules
    (torch.int8, torch.int32, torch.int32), (torch.int16, torch.int64, torch.int64),
    (torch.uint8, torch.int8, torch.uint8), (torch.uint32, torch.int32, torch.uint32),
    (torch.int32, torch.float16, torch.float16), (torch.float16, torch.float32, torch.float32),
    (torch.float16, torch.bfloat16, torch.float16), (torch.bfloat16, torch.float64, torch.float64),
    (torch.bfloat16, torch.int32, torch.float32), (torch.int8, torch.bfloat16, torch.float32),
    (torch.bool, torch.int16, torch.int16), (torch.int64, torch.float32, torch.float32),
]


@pytest.mark.parametrize("xd,yd,rd", PROMOTIONS, ids=lambda d: name(d))
def test_promotion(target, device, xd, yd, rd):
    n = 300
    x = rand(n, xd, device, 0, 50) if not xd.is_floating_point and xd != torch.bool else rand(n, xd, device)
    y = rand(n, yd, device, 0, 50) if not yd.is_floating_point and yd != torch.bool else rand(n, yd, device)
    out = poison(n, rd, device)
    mixed_kernel[(newt.cdiv(n, 128),)](x, y, out, n, EXPECT=newt.dtypes.from_torch(rd), BLOCK=128)
    if rd.is_floating_point:
        ref = (x.cpu().to(rd).to(torch.float64) + y.cpu().to(rd).to(torch.float64)).to(rd)
    else:
        ref = from_i64(to_i64(x.to(torch.int64) if xd == torch.bool else x)
                       + to_i64(y.to(torch.int64) if yd == torch.bool else y), rd)
    check(out, ref)


@newt.jit
def weak_scalar_kernel(x_ptr, h_ptr, out_i_ptr, out_h_ptr, out_f_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)      # int8
    h = nl.load(h_ptr + offs, mask=mask)      # fp16
    nl.store(out_i_ptr + offs, x + 1, mask=mask)          # stays int8: 127 + 1 wraps
    nl.store(out_h_ptr + offs, h * 0.1, mask=mask)        # stays fp16: rounded in fp16
    nl.store(out_f_ptr + offs, x * 0.5, mask=mask)        # int * float -> fp32


def test_weak_python_scalars(target, device):
    n = 1000
    x = rand(n, torch.int8, device)
    x[:4] = 127
    h = rand(n, torch.float16, device)
    oi, oh, of = (poison(n, torch.int32, device), poison(n, torch.float32, device),
                  poison(n, torch.float32, device))
    weak_scalar_kernel[(newt.cdiv(n, 256),)](x, h, oi, oh, of, n, BLOCK=256)
    check(oi, wrap(to_i64(x) + 1, torch.int8).to(torch.int32))
    check(oh, (h.cpu().float() * torch.tensor(0.1, dtype=torch.float16).float()).half().float(),
          rtol=0, atol=0)
    check(of, x.cpu().float() * 0.5)


# ----------------------------------------------------------------------------- Python scalars

@newt.jit
def python_builtins_kernel(out_ptr, v, B: nl.constexpr):
    nl.store(out_ptr + 0, max(v, 0))      # Python's max on a runtime scalar
    nl.store(out_ptr + 1, min(v, 0))
    nl.store(out_ptr + 2, abs(v))
    nl.store(out_ptr + 3, min(B, 64))     # constexpr: 64 when B = 128
    nl.store(out_ptr + 4, max(B, 64))
    nl.store(out_ptr + 5, max(v, 3, -2))
    nl.store(out_ptr + 6, v // 2)         # C division on a runtime scalar
    nl.store(out_ptr + 7, B // 3)         # Python's // on constexprs


@pytest.mark.parametrize("v", [-5, 0, 7])
def test_python_min_max_abs(target, device, v):
    out = poison(8, torch.int32, device)
    python_builtins_kernel[(1,)](out, v, B=128)
    trunc = int(v / 2)
    check(out, torch.tensor([max(v, 0), min(v, 0), abs(v), 64, 128, max(v, 3, -2), trunc, 42],
                            dtype=torch.int32))


@newt.jit
def strong_scalar_kernel(h_ptr, out_ptr, n, f, i, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    h = nl.load(h_ptr + offs, mask=mask)                  # fp16
    nl.store(out_ptr + offs, h * f, mask=mask)            # fp32 runtime scalar: strong -> fp32
    nl.store(out_ptr + n + offs, h * i, mask=mask)        # int32 runtime scalar: -> fp16


def test_runtime_scalars_are_strong(target, device):
    n = 300
    h = rand(n, torch.float16, device)
    out = poison(2 * n, torch.float32, device)
    strong_scalar_kernel[(newt.cdiv(n, 128),)](h, out, n, 0.1, 3, BLOCK=128)
    hs = h.cpu().float()
    f = torch.tensor(0.1, dtype=torch.float32)
    check(out[:n], hs * f, rtol=1e-6, atol=0)
    check(out[n:], (hs * 3).half().float(), rtol=0, atol=0)


@newt.jit
def bool_logic_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    nl.store(out_ptr + offs * 4 + 0, x & y, mask=mask)
    nl.store(out_ptr + offs * 4 + 1, x | y, mask=mask)
    nl.store(out_ptr + offs * 4 + 2, x ^ y, mask=mask)
    nl.store(out_ptr + offs * 4 + 3, ~x | (y & (x != y)), mask=mask)


def test_bool_logic(target, device):
    n = 333
    x, y = rand(n, torch.bool, device), rand(n, torch.bool, device)
    out = poison(4 * n, torch.bool, device)
    out.zero_()
    bool_logic_kernel[(newt.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    a, b = x.cpu(), y.cpu()
    check(out, torch.stack([a & b, a | b, a ^ b, ~a | (b & (a != b))], 1).reshape(-1))
