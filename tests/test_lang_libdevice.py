"""libdevice (newt.language.extra.libdevice, nl.math): functions of every kind (float of 1, 2
and 3 arguments, rounding modes, conversions, bit and integer intrinsics, predicates) against
torch / Python references on the interpreter, the CPU emulation of the generated code and the
GPU; fp16 arguments rounded back; and the whole table compiled with NVRTC for sm_80 and
sm_90a (every function, every variant)."""
import math

import pytest
import torch

import newt
import newt.language as nl
from lang_helpers import NVRTC_ARCHS, nan_like, nvrtc, where  # noqa: F401
from newt.language.extra import libdevice
from newt.language.extra.cuda import libdevice as cuda_libdevice

N, BLOCK = 37, 64


def _u(lo, hi):
    return lambda n, dt: torch.rand(n, dtype=torch.float64).mul(hi - lo).add(lo).to(dt)


_ANY = _u(-3, 3)
_POS = _u(0.25, 4)
# (name, arity, torch reference on float64, input domain, runs in the emulator)
FLOAT = [
    ("asin", 1, torch.asin, _u(-1, 1), True), ("acosh", 1, torch.acosh, _u(1, 5), True),
    ("atanh", 1, torch.atanh, _u(-0.9, 0.9), True), ("sinh", 1, torch.sinh, _ANY, True),
    ("erfc", 1, torch.erfc, _ANY, True), ("erfinv", 1, torch.erfinv, _u(-0.9, 0.9), False),
    ("exp10", 1, lambda x: 10 ** x, _ANY, True), ("expm1", 1, torch.expm1, _ANY, True),
    ("log1p", 1, torch.log1p, _u(-0.5, 3), True), ("cbrt", 1, lambda x: x.sign() * x.abs() ** (1 / 3), _ANY, True),
    ("tgamma", 1, lambda x: torch.lgamma(x).exp(), _u(0.5, 5), True),
    ("lgamma", 1, torch.lgamma, _u(0.5, 5), True), ("rint", 1, torch.round, _u(-9, 9), True),
    ("round", 1, lambda x: x.sign() * (x.abs() + 0.5).floor(), _u(-9, 9), True),
    ("j0", 1, torch.special.bessel_j0, _ANY, True), ("y1", 1, torch.special.bessel_y1, _POS, True),
    ("sinpi", 1, lambda x: torch.sin(math.pi * x), _ANY, True),
    ("normcdf", 1, torch.special.ndtr, _ANY, True), ("rcp_rn", 1, lambda x: 1 / x, _POS, True),
    ("atan2", 2, torch.atan2, _ANY, True), ("hypot", 2, torch.hypot, _ANY, True),
    ("copysign", 2, torch.copysign, _ANY, True), ("fmod", 2, torch.fmod, _POS, True),
    ("remainder", 2, lambda x, y: x - y * torch.round(x / y), _POS, True),
    ("fdim", 2, lambda x, y: (x - y).clamp(min=0), _ANY, True),
    ("pow", 2, torch.pow, _POS, True), ("add_rn", 2, torch.add, _ANY, True),
    ("fma_rn", 3, lambda x, y, z: x * y + z, _ANY, True),
    ("norm3d", 3, lambda a, b, c: (a * a + b * b + c * c).sqrt(), _ANY, True),
]


@newt.jit
def many_kernel(x_ptr, y_ptr, z_ptr, o_ptr, n, NAMES: nl.constexpr, ARITIES: nl.constexpr,
                BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = offs < n
    for k in nl.static_range(len(NAMES)):      # function k reads and writes row k
        x = nl.load(x_ptr + k * BLOCK + offs, mask=m)
        y = nl.load(y_ptr + k * BLOCK + offs, mask=m)
        z = nl.load(z_ptr + k * BLOCK + offs, mask=m)
        f = getattr(libdevice, NAMES[k])
        if ARITIES[k] == 1:
            r = f(x)
        elif ARITIES[k] == 2:
            r = f(x, y)
        else:
            r = f(x, y, z)
        nl.store(o_ptr + k * BLOCK + offs, r, mask=m)


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_float_functions(where, dt):
    """Every function of FLOAT in one kernel (one build), each on inputs of its domain."""
    cases = [c for c in FLOAT if c[4] or where.name != "emu"]
    names, arities = tuple(c[0] for c in cases), tuple(c[1] for c in cases)
    xs = [torch.stack([c[3](BLOCK, dt) for c in cases]) for _ in range(3)]
    out = nan_like((len(cases), BLOCK), dt, where.device)
    where(many_kernel, (1,), *[where.t(x) for x in xs], out, N, NAMES=names, ARITIES=arities,
          BLOCK=BLOCK)
    for k, (name, arity, ref, _, _) in enumerate(cases):
        expect = ref(*[x[k, :N].double() for x in xs[:arity]]).to(dt)
        tol = dict(rtol=2e-6, atol=2e-6) if dt == torch.float32 else \
            dict(rtol=1e-12, atol=1e-12)
        if name in ("j0", "y1"):     # torch's Bessel functions are themselves approximations
            tol = dict(rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out[k, :N].cpu(), expect, **tol, msg=lambda m: f"{name}: {m}")


# (name, args (int32 tensors), expected as int64 from Python ints)
def _bits(v):
    return v & 0xFFFFFFFF


INT = [
    ("clz", 1, lambda a: 32 - _bits(a).bit_length()),
    ("popc", 1, lambda a: bin(_bits(a)).count("1")),
    ("ffs", 1, lambda a: (_bits(a) & -_bits(a)).bit_length()),
    ("brev", 1, lambda a: int(format(_bits(a), "032b")[::-1], 2)),
    ("mulhi", 2, lambda a, b: (a * b) >> 32),
    ("hadd", 2, lambda a, b: (a + b) >> 1),
    ("sad", 3, lambda a, b, c: abs(a - b) + (c & 0xFFFFFFFF)),
]


def test_integer_functions(where):
    names, arities = tuple(c[0] for c in INT), tuple(c[1] for c in INT)
    xs = [torch.randint(-2 ** 31, 2 ** 31, (len(INT), BLOCK), dtype=torch.int32)
          for _ in range(3)]
    k_sad = names.index("sad")
    for x in xs:
        x[k_sad] = torch.randint(0, 1000, (BLOCK,), dtype=torch.int32)
    out = torch.full((len(INT), BLOCK), 77, dtype=torch.int32, device=where.device)
    where(many_kernel, (1,), *[where.t(x) for x in xs], out, N, NAMES=names, ARITIES=arities,
          BLOCK=BLOCK)
    for k, (name, arity, ref) in enumerate(INT):
        vals = [x[k, :N].tolist() for x in xs[:arity]]
        expect = [((ref(*a) + 2 ** 31) % 2 ** 32) - 2 ** 31 for a in zip(*vals)]
        assert out[k, :N].cpu().tolist() == expect, name


@newt.jit
def conv_kernel(x_ptr, i_ptr, f2i_ptr, i2f_ptr, bits_ptr, ll_ptr, nan_ptr, ex_ptr, n,
                BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    i = nl.load(i_ptr + offs, mask=m)
    nl.store(f2i_ptr + offs, libdevice.float2int_rd(x), mask=m)
    nl.store(i2f_ptr + offs, libdevice.int2float_rn(i), mask=m)
    nl.store(bits_ptr + offs, libdevice.float_as_int(x), mask=m)
    nl.store(ll_ptr + offs, libdevice.llrint(x), mask=m)
    nl.store(nan_ptr + offs, libdevice.isnan(x) | libdevice.isinf(x), mask=m)
    nl.store(ex_ptr + offs, libdevice.ldexp(x, i % 8) + nl.math.erf(x) + nl.math.asinh(x),
             mask=m)


def test_conversions_and_predicates(where):
    x = torch.randn(N) * 100
    x[3], x[5] = float("nan"), float("inf")
    i = torch.randint(-2 ** 20, 2 ** 20, (N,), dtype=torch.int32)
    outs = [torch.full((N,), 7, dtype=torch.int32), torch.full((N,), float("nan")),
            torch.full((N,), 7, dtype=torch.int32), torch.full((N,), 7, dtype=torch.int64),
            torch.zeros(N, dtype=torch.bool), torch.full((N,), float("nan"))]
    outs = [where.t(o) for o in outs]
    where(conv_kernel, (1,), where.t(x), where.t(i), *outs, N, BLOCK=BLOCK)
    f2i, i2f, bits, ll, isn, ex = [o.cpu() for o in outs]
    fin = torch.isfinite(x)
    assert torch.equal(f2i[fin], x[fin].floor().int())
    assert torch.equal(i2f, i.float())
    assert torch.equal(bits, x.view(torch.int32))
    assert torch.equal(ll[fin], torch.round(x[fin].double()).long())
    assert torch.equal(isn, ~fin)
    r = torch.ldexp(x.double(), (i.remainder(8) * torch.where(i < 0, -1, 1)).double()) \
        if False else x.double() * 2.0 ** torch.fmod(i, 8).double()
    expect = (r + torch.erf(x.double()) + torch.asinh(x.double())).float()
    torch.testing.assert_close(ex[fin], expect[fin], rtol=2e-6, atol=2e-6)


@newt.jit
def half_kernel(x_ptr, o_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    nl.store(o_ptr + offs, libdevice.tanh(x) * 2, mask=offs < n)


def test_fp16_arguments_are_computed_in_fp32_and_rounded_back(where):
    x = torch.randn(N).half()
    out = nan_like((N,), torch.float16, where.device)
    where(half_kernel, (1,), where.t(x), out, N, BLOCK=BLOCK)
    expect = (torch.tanh(x.float()).half().float() * 2).half()
    torch.testing.assert_close(out.cpu(), expect, rtol=1e-3, atol=1e-3)


def test_namespaces():
    assert libdevice.asin is cuda_libdevice.asin is nl.math.asin
    assert nl.math.exp is nl.exp and nl.extra.libdevice is libdevice
    assert len(libdevice.TABLE) >= 190
    with pytest.raises(RuntimeError, match="inside a @newt.jit kernel"):
        libdevice.asin(1.0)


@newt.jit
def every_kernel(x_ptr, o_ptr, NAMES: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    acc = nl.zeros([BLOCK], dtype=nl.float64)
    for name in NAMES:
        f = getattr(libdevice, name)
        for variant in libdevice.TABLE[name]:
            c = variant[0]
            a = x.to(libdevice.DTYPES[c[0]])
            if len(c) == 1:
                r = f(a)
            elif len(c) == 2:
                r = f(a, x.to(libdevice.DTYPES[c[1]]))
            elif len(c) == 3:
                r = f(a, x.to(libdevice.DTYPES[c[1]]), x.to(libdevice.DTYPES[c[2]]))
            else:
                r = f(a, a, a, a)
            acc += r.to(nl.float64)
    nl.store(o_ptr + offs, acc)


# one function of each kind through newt.compile for both archs; the whole table (every
# variant: ~400 calls) once, through NVRTC directly (newt.compile would also retry register
# budgets: half a minute each) with ptxas at -O0
SAMPLE = ("asin", "atan2", "fma", "norm4d", "div_rz", "double2ull_ru", "cyl_bessel_i1", "brev",
          "byte_perm", "pow", "jn", "isnan", "hiloint2double", "fast_powf", "ll2float_rd")
SIG = {"x_ptr": "*fp32", "o_ptr": "*fp64"}


@pytest.mark.parametrize("arch", NVRTC_ARCHS)
def test_sample_functions_compile(arch):
    k = nvrtc(every_kernel, SIG, {"NAMES": SAMPLE, "BLOCK": 32}, arch, num_warps=1)
    for name in ("asinf", "asin", "__fdiv_rz", "__ddiv_rz", "__double2ull_ru", "__brev"):
        assert name + "(" in k.source


def test_every_function_compiles():
    from newt import dtypes as D
    from newt.codegen import generate
    from newt.frontend import build_ir
    from newt.options import Options
    from newt.passes import run_passes
    from newt.runtime import nvrtc as N
    fn = build_ir(every_kernel, {k: D.from_signature(v) for k, v in SIG.items()},
                  {"NAMES": tuple(sorted(libdevice.TABLE)), "BLOCK": 32})
    fn.attrs["equal_to_1"] = set()
    opts = Options(arch="sm_80", num_warps=1)
    run_passes(fn, opts)
    source, name = generate(fn, opts)
    res = N.compile_cuda(source, name, "sm_80", ("--ptxas-options=-O0",))
    assert res.cubin
    for name, variants in libdevice.TABLE.items():
        for _, _, cfn in variants:
            assert cfn.split("(")[0] + "(" in source, (name, cfn)
