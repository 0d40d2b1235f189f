"""libdevice in the interpreter: each function of newt/language/extra/cuda/libdevice.py computed
with torch (the reference the compiled CUDA calls are tested against).

The variant is chosen as the frontend chooses it (`libdevice.choose`), the arguments are cast to
its dtypes, and REF[name] computes the result from the arguments' data (float64 for float
arguments, int64 for integers). Results of fp32 variants are rounded to fp32 once; the directed
rounding modes (_rz, _rd, _ru) of fp32 results are honoured, those of fp64 results are rounded
to nearest (the interpreter has no wider type to round from).
"""
from __future__ import annotations

import math

import torch

from .. import dtypes as D
from ..language.extra.cuda import libdevice as LD
from .values import Tensor, cast, to_tensor, unwrap, wrap

_F = torch.float64


def _i(bits, signed=True):
    """int64 data of a result of `bits` bits, wrapped (signed) or masked (unsigned)."""
    def f(v):
        return wrap(v, D.int32 if bits == 32 and signed else D.uint32 if bits == 32 else D.int64)
    return f


def _each(fn, *xs, dtype=torch.int64):
    """Elementwise Python function over tensors of one shape (exact 64/128-bit integer math)."""
    flat = [x.reshape(-1).tolist() for x in xs]
    out = [fn(*vals) for vals in zip(*flat)]
    return torch.tensor(out, dtype=dtype).reshape(xs[0].shape)


def _u(v, bits):
    return v & ((1 << bits) - 1)


def _s(v, bits):
    v = _u(v, bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def _round_half_away(x):
    return torch.where(x.abs() < 2.0 ** 52, torch.trunc(x + torch.copysign(torch.full_like(x, 0.5), x)), x)


def _to_int(x, mode, bits, signed):
    x = {"rn": torch.round, "rz": torch.trunc, "rd": torch.floor, "ru": torch.ceil}[mode](x)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    x = torch.nan_to_num(x, nan=0.0)
    return _each(lambda v: _s(int(min(max(v, lo), hi)), bits) if signed or bits < 64
                 else _s(int(min(max(v, lo), hi)), 64), x)


def _directed_f32(v, mode):
    """float64 `v` rounded to fp32 in `mode` (as float64 data)."""
    r = v.to(torch.float32)
    if mode != "rn":
        rd = r.to(_F)
        inf = torch.full_like(r, float("inf"))
        if mode == "rz":
            r = torch.where(rd.abs() > v.abs(), torch.nextafter(r, torch.zeros_like(r)), r)
        elif mode == "rd":
            r = torch.where(rd > v, torch.nextafter(r, -inf), r)
        else:
            r = torch.where(rd < v, torch.nextafter(r, inf), r)
    return r.to(_F)


def _tgamma(x):
    def g(v):
        try:
            return math.gamma(v)
        except (ValueError, OverflowError):
            return float("nan") if v <= 0 and v == int(v) else math.copysign(float("inf"), v)
    return _each(g, x, dtype=_F)


def _bessel_n(kind):
    def f(n, x):
        def one(n, v):
            n = int(n)
            a, b = (math.nan, math.nan)
            t = torch.tensor([v], dtype=_F)
            if kind == "j":
                a, b = torch.special.bessel_j0(t).item(), torch.special.bessel_j1(t).item()
            else:
                a, b = torch.special.bessel_y0(t).item(), torch.special.bessel_y1(t).item()
            if n == 0:
                return a
            for k in range(1, abs(n)):
                a, b = b, 2 * k / v * b - a
            return b if n > 0 else (-1) ** n * b
        return _each(one, n, x, dtype=_F)
    return f


def _logb(x):
    m, e = torch.frexp(x)
    return torch.where(x == 0, torch.full_like(x, -float("inf")),
                       torch.where(torch.isfinite(x), (e - 1).to(_F), x.abs()))


def _byte_perm(x, y, s):
    def one(a, b, sel):
        src = _u(b, 32) << 32 | _u(a, 32)
        return _s(sum(((src >> (8 * ((sel >> (4 * i)) & 7))) & 255) << (8 * i) for i in range(4)), 32)
    return _each(one, x, y, s)


def _brev(bits):
    return lambda x: _each(lambda v: _s(int(format(_u(v, bits), f"0{bits}b")[::-1], 2), bits), x)


def _clz(bits):
    return lambda x: _each(lambda v: bits - _u(v, bits).bit_length(), x)


def _ffs(bits):
    return lambda x: _each(lambda v: (_u(v, bits) & -_u(v, bits)).bit_length(), x)


def _mulhi(bits, signed):
    conv = _s if signed else _u
    return lambda x, y: _each(lambda a, b: _s((conv(a, bits) * conv(b, bits)) >> bits, bits) if signed
                              else _s(_u((_u(a, bits) * _u(b, bits)) >> bits, bits), 64), x, y)


def _mul24(signed):
    conv = _s if signed else _u
    return lambda x, y: _each(lambda a, b: _s(conv(a, 24) * conv(b, 24), 32), x, y)


def _bits_as(src_t, dst_t):
    return lambda x: x.to(src_t).view(dst_t).to(_F if dst_t.is_floating_point else torch.int64)


REF = {
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "rint": torch.round,
    "nearbyint": torch.round, "round": _round_half_away, "exp2": torch.exp2,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "cbrt": lambda x: torch.sign(x) * x.abs() ** (1 / 3),
    "rcbrt": lambda x: 1 / (torch.sign(x) * x.abs() ** (1 / 3)), "exp": torch.exp,
    "exp10": lambda x: torch.pow(10.0, x), "expm1": torch.expm1, "log": torch.log,
    "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "logb": _logb,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "sinpi": lambda x: torch.sin(math.pi * x), "cospi": lambda x: torch.cos(math.pi * x),
    "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "asinh": torch.asinh, "acosh": torch.acosh,
    "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc, "erfinv": torch.erfinv,
    "erfcinv": lambda x: torch.erfinv(1 - x), "erfcx": torch.special.erfcx,
    "normcdf": torch.special.ndtr, "normcdfinv": torch.special.ndtri, "lgamma": torch.lgamma,
    "tgamma": _tgamma, "j0": torch.special.bessel_j0, "j1": torch.special.bessel_j1,
    "y0": torch.special.bessel_y0, "y1": torch.special.bessel_y1,
    "cyl_bessel_i0": torch.special.i0, "cyl_bessel_i1": torch.special.i1,
    "atan2": torch.atan2, "hypot": torch.hypot, "rhypot": lambda x, y: 1 / torch.hypot(x, y),
    "copysign": torch.copysign, "fmod": torch.fmod,
    "remainder": lambda x, y: x - y * torch.round(x / y),
    "fdim": lambda x, y: torch.where(x > y, x - y, torch.where(torch.isnan(x - y), x - y, 0 * x)),
    "nextafter": None,   # in the variant's own precision (below)
    "fma": lambda x, y, z: x * y + z,
    "norm3d": lambda a, b, c: torch.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: torch.rsqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, d: torch.sqrt(a * a + b * b + c * c + d * d),
    "rnorm4d": lambda a, b, c, d: torch.rsqrt(a * a + b * b + c * c + d * d),
    "rcp64h": lambda x: 1 / x, "saturatef": lambda x: torch.nan_to_num(x, nan=0.0).clamp(0, 1),
    "fast_dividef": lambda x, y: x / y, "fast_sinf": torch.sin, "fast_cosf": torch.cos,
    "fast_tanf": torch.tan, "fast_expf": torch.exp, "fast_exp10f": lambda x: torch.pow(10.0, x),
    "fast_logf": torch.log, "fast_log2f": torch.log2, "fast_log10f": torch.log10,
    "fast_powf": torch.pow, "rsqrt_rn": torch.rsqrt,
    "clz": None, "popc": None, "ffs": None, "brev": None, "mulhi": None, "mul24": None,
    "byte_perm": _byte_perm, "sad": lambda x, y, z: (x - y).abs() + z,
    "abs": torch.abs, "hadd": lambda x, y: (x + y) >> 1, "rhadd": lambda x, y: (x + y + 1) >> 1,
    "int2double_rn": lambda x: x.to(_F), "uint2double_rn": lambda x: x.to(_F),
    "hiloint2double": lambda h, lo: ((h << 32) | (lo & 0xFFFFFFFF)).view(torch.float64),
    "double2loint": lambda x: wrap(x.view(torch.int64), D.int32),
    "double2hiint": lambda x: x.view(torch.int64) >> 32,
    "int_as_float": _bits_as(torch.int32, torch.float32),
    "float_as_int": _bits_as(torch.float32, torch.int32),
    "uint_as_float": lambda x: wrap(x, D.int32).to(torch.int32).view(torch.float32).to(_F),
    "float_as_uint": _bits_as(torch.float32, torch.int32),
    "longlong_as_double": lambda x: x.view(torch.float64),
    "double_as_longlong": lambda x: x.view(torch.int64),
    "llrint": lambda x: _to_int(x, "rn", 64, True),
    "llround": lambda x: _to_int(_round_half_away(x), "rz", 64, True),
    "ilogb": lambda x: torch.frexp(x)[1].to(torch.int64) - 1,
    "isnan": torch.isnan, "isinf": torch.isinf, "signbit": lambda x: torch.signbit(x).to(torch.int64),
    "finitef": lambda x: torch.isfinite(x).to(torch.int64),
    "isfinited": lambda x: torch.isfinite(x).to(torch.int64),
    "ldexp": lambda x, n: torch.ldexp(x, n.to(_F)), "scalbn": lambda x, n: torch.ldexp(x, n.to(_F)),
    "pow": lambda x, y: torch.pow(x, y.to(_F)), "jn": _bessel_n("j"), "yn": _bessel_n("y"),
}

_ROUNDED_OPS = {"fma": lambda x, y, z: x * y + z, "div": lambda x, y: x / y,
                "rcp": lambda x: 1 / x, "sqrt": torch.sqrt, "add": lambda x, y: x + y,
                "sub": lambda x, y: x - y, "mul": lambda x, y: x * y}
_CONVERSIONS = {"double2int": (32, True), "double2uint": (32, False), "float2int": (32, True),
                "float2uint": (32, False), "float2ll": (64, True), "float2ull": (64, False),
                "double2ll": (64, True), "double2ull": (64, False)}


def _compute(name, want, res, data):
    """The result data of libdevice `name` (variant arg dtypes `want`, result `res`)."""
    base, _, mode = name.rpartition("_")
    if mode in ("rn", "rz", "rd", "ru") and base in _ROUNDED_OPS:
        v = _ROUNDED_OPS[base](*data)
        return _directed_f32(v, mode) if res is D.float32 else v
    if mode in ("rn", "rz", "rd", "ru") and base in _CONVERSIONS:
        bits, signed = _CONVERSIONS[base]
        v = _to_int(data[0], mode, bits, signed)
        return wrap(v, D.int32) if bits == 32 else v
    if mode in ("rn", "rz", "rd", "ru") and res.is_floating():   # ints / fp64 -> float
        if res is D.float32:
            if base in ("ll2float", "ull2float"):
                return _each(lambda v: _round_int_f32(v, mode, base == "ull2float"), data[0],
                             dtype=_F)
            return _directed_f32(data[0].to(_F), mode)
        if base == "ull2double":
            return _each(lambda v: float(_u(v, 64)), data[0], dtype=_F)
        return data[0].to(_F)
    if name in ("clz", "popc", "ffs", "brev"):
        bits = want[0].bits
        if name == "popc":
            return _each(lambda v: bin(_u(v, bits)).count("1"), data[0])
        return {"clz": _clz, "ffs": _ffs, "brev": _brev}[name](bits)(data[0])
    if name == "mulhi":
        return _mulhi(want[0].bits, want[0].is_signed())(*data)
    if name == "mul24":
        return _mul24(want[0].is_signed())(*data)
    if name == "nextafter":
        t = torch.float32 if res is D.float32 else _F
        return torch.nextafter(data[0].to(t), data[1].to(t)).to(_F)
    return REF[name](*data)


def _round_int_f32(v, mode, unsigned):
    """A 64-bit integer rounded to fp32 in `mode` (through float64 for the nearest value)."""
    v = _u(v, 64) if unsigned else v
    r = torch.tensor(float(v), dtype=torch.float64).to(torch.float32)
    exact = int(r.item())
    toward = None
    if mode == "rz" and abs(exact) > abs(v):
        toward = 0.0
    elif mode == "rd" and exact > v:
        toward = -float("inf")
    elif mode == "ru" and exact < v:
        toward = float("inf")
    if toward is not None:
        r = torch.nextafter(r, torch.tensor(toward, dtype=torch.float32))
    return r.item()


def call(name: str, *args) -> Tensor:
    ts = [to_tensor(unwrap(a)) for a in args]
    for t in ts:
        if t.dtype.is_ptr():
            raise TypeError(f"libdevice.{name} is not defined for pointers")
    first = ts[0].dtype
    want, res, _ = LD.choose(name, [t.dtype for t in ts])
    ts = [cast(t, w) for t, w in zip(ts, want)]
    data = torch.broadcast_tensors(*[t.data.to(_F) if w.is_floating() else t.data
                                     for t, w in zip(ts, want)])
    out = _compute(name, want, res, list(data))
    if res.is_bool():
        r = Tensor(out.to(torch.bool), res)
    elif res.is_floating():
        r = Tensor(out.to(_F).to(res.to_torch()), res)
    else:
        r = Tensor(wrap(out.to(torch.int64), res), res)
    if res is want[0] and first in (D.float16, D.bfloat16):
        r = cast(r, first)
    return r


def _impl(name):
    def f(*args):
        return call(name, *args)
    f.__name__ = name
    return f


FUNCTIONS = {n: _impl(n) for n in LD.TABLE}
