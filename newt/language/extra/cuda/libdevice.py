"""libdevice: every function of Triton's `tl.extra.cuda.libdevice`, as names a kernel calls
(`from newt.language.extra import libdevice`; `libdevice.asin(x)`).

The functions are generated from one table, TABLE: for each name, its variants (argument dtypes
-> result dtype = the CUDA math function or intrinsic that computes it). The frontend picks a
variant by the argument dtypes (newt/frontend/libdevice.py) and emits one `libdevice` op that
codegen prints as that CUDA call (newt/codegen/libdevice.py); the interpreter computes each name
with torch (newt/interpreter/libdevice.py). NVRTC provides CUDA's math library without headers.

Dtype codes: f32 f64 i32 i64 u32 u64 b (int1). `F` stands for the pair `f32>f32=<name>f
f64>f64=<name>`, `F2` / `F3` / `F4` for the same with 2, 3 or 4 arguments of one float type;
`R:<f32 fn>:<f64 fn>` for the four rounding modes rn/rz/rd/ru of a name ending in `_{r}`. A
CUDA name holding `{0}` is a C template of the arguments.

Differences from Triton (listed in docs/language.md):
  - fp16 / bf16 arguments are computed in fp32 and, for functions whose result has the
    argument's float type, rounded back to the 16-bit type (Triton has no 16-bit variants and
    rejects them); integer arguments of float-only functions are converted to fp32;
  - `rcp64h` is the correctly rounded reciprocal (`__drcp_rn`), more exact than libdevice's;
  - `pow(x, int)` is `pow(x, (float)n)`: CUDA's math API has no integer-power function.
"""
from __future__ import annotations

from ....dtypes import float32, float64, int1, int32, int64, uint32, uint64

DTYPES = {"f32": float32, "f64": float64, "i32": int32, "i64": int64, "u32": uint32,
          "u64": uint64, "b": int1}

_ROUNDED = """
fma_{r}            R3:__fmaf_{r}:__fma_{r}
div_{r}            R2:__fdiv_{r}:__ddiv_{r}
rcp_{r}            R1:__frcp_{r}:__drcp_{r}
sqrt_{r}           R1:__fsqrt_{r}:__dsqrt_{r}
add_{r}            R2:__fadd_{r}:__dadd_{r}
sub_{r}            R2:__fsub_{r}:__dsub_{r}
mul_{r}            R2:__fmul_{r}:__dmul_{r}
double2float_{r}   f64>f32=__double2float_{r}
double2int_{r}     f64>i32=__double2int_{r}
double2uint_{r}    f64>i32=__double2uint_{r}
float2int_{r}      f32>i32=__float2int_{r}
float2uint_{r}     f32>i32=__float2uint_{r}
int2float_{r}      i32>f32=__int2float_{r}
uint2float_{r}     u32>f32=__uint2float_{r}
float2ll_{r}       f32>i64=__float2ll_{r}
float2ull_{r}      f32>i64=__float2ull_{r}
double2ll_{r}      f64>i64=__double2ll_{r}
double2ull_{r}     f64>i64=__double2ull_{r}
ll2float_{r}       i64>f32=__ll2float_{r}
ull2float_{r}      u64>f32=__ull2float_{r}
ll2double_{r}      i64>f64=__ll2double_{r}
ull2double_{r}     u64>f64=__ull2double_{r}
"""

_PLAIN = """
clz                i32>i32=__clz i64>i32=__clzll
popc               i32>i32=__popc i64>i32=__popcll
byte_perm          i32,i32,i32>i32=__byte_perm
mulhi              i32,i32>i32=__mulhi u32,u32>u32=__umulhi i64,i64>i64=__mul64hi u64,u64>u64=__umul64hi
mul24              i32,i32>i32=__mul24 u32,u32>u32=__umul24
brev               i32>i32=__brev i64>i64=__brevll
sad                i32,i32,u32>i32=__sad u32,u32,u32>u32=__usad
abs                i32>i32=abs i64>i64=llabs f32>f32=fabsf f64>f64=fabs
hadd               i32,i32>i32=__hadd u32,u32>u32=__uhadd
rhadd              i32,i32>i32=__rhadd u32,u32>u32=__urhadd
ffs                i32>i32=__ffs i64>i32=__ffsll
floor ceil trunc rint nearbyint round exp2 sqrt rsqrt cbrt rcbrt exp exp10 expm1   F
log log2 log10 log1p logb sin cos tan sinpi cospi sinh cosh tanh asin acos atan    F
asinh acosh atanh erf erfc erfinv erfcinv erfcx normcdf normcdfinv lgamma tgamma   F
j0 j1 y0 y1 cyl_bessel_i0 cyl_bessel_i1                                            F
atan2 hypot rhypot copysign fmod remainder fdim nextafter                          F2
fma norm3d rnorm3d                                                                 F3
norm4d rnorm4d                                                                     F4
rcp64h             f64>f64=__drcp_rn
saturatef          f32>f32=__saturatef
fast_dividef       f32,f32>f32=__fdividef
fast_sinf          f32>f32=__sinf
fast_cosf          f32>f32=__cosf
fast_tanf          f32>f32=__tanf
fast_expf          f32>f32=__expf
fast_exp10f        f32>f32=__exp10f
fast_logf          f32>f32=__logf
fast_log2f         f32>f32=__log2f
fast_log10f        f32>f32=__log10f
fast_powf          f32,f32>f32=__powf
rsqrt_rn           f32>f32=__frsqrt_rn
int2double_rn      i32>f64=__int2double_rn
uint2double_rn     u32>f64=__uint2double_rn
hiloint2double     i32,i32>f64=__hiloint2double
double2loint       f64>i32=__double2loint
double2hiint       f64>i32=__double2hiint
int_as_float       i32>f32=__int_as_float
float_as_int       f32>i32=__float_as_int
uint_as_float      u32>f32=__uint_as_float
float_as_uint      f32>i32=__float_as_uint
longlong_as_double i64>f64=__longlong_as_double
double_as_longlong f64>i64=__double_as_longlong
llrint             f32>i64=llrintf f64>i64=llrint
llround            f32>i64=llroundf f64>i64=llround
ilogb              f32>i32=ilogbf f64>i32=ilogb
isnan              f32>b=isnan f64>b=isnan
isinf              f32>b=isinf f64>b=isinf
signbit            f32>i32=signbit f64>i32=signbit
finitef            f32>i32=isfinite
isfinited          f64>i32=isfinite
ldexp              f32,i32>f32=ldexpf f64,i32>f64=ldexp
scalbn             f32,i32>f32=scalbnf f64,i32>f64=scalbn
pow                f32,i32>f32=powf({0},(float){1}) f64,i32>f64=pow({0},(double){1}) f32,f32>f32=powf f64,f64>f64=pow
jn                 i32,f32>f32=jnf i32,f64>f64=jn
yn                 i32,f32>f32=ynf i32,f64>f64=yn
"""


def _variants(spec: str, name: str) -> list:
    """[(arg codes, result code, CUDA function)] of one table entry."""
    if spec.startswith("F"):
        n = int(spec[1:] or 1)
        return [(("f32",) * n, "f32", name + "f"), (("f64",) * n, "f64", name)]
    if spec.startswith("R"):
        n, f32, f64 = spec[1:].split(":")
        return [(("f32",) * int(n), "f32", f32), (("f64",) * int(n), "f64", f64)]
    out = []
    for v in spec.split():
        sig, cfn = v.split("=", 1)
        args, res = sig.split(">")
        out.append((tuple(args.split(",")), res, cfn))
    return out


def _parse() -> dict:
    table = {}
    for line in _PLAIN.strip().splitlines():
        words = line.split()
        if words[-1] in ("F", "F2", "F3", "F4"):
            for name in words[:-1]:
                table[name] = _variants(words[-1], name)
        else:
            table[words[0]] = _variants(" ".join(words[1:]), words[0])
    for line in _ROUNDED.strip().splitlines():
        pattern, spec = line.split(None, 1)
        for r in ("rn", "rz", "rd", "ru"):
            table[pattern.format(r=r)] = _variants(spec.format(r=r), pattern.format(r=r))
    return table


TABLE: dict = _parse()      # name -> [(arg codes, result code, CUDA function)]
FUNCTIONS: dict = {}        # name -> the stub a kernel calls


def _cost(have, want) -> int:
    """How far argument dtype `have` is from variant dtype `want` (None: not allowed)."""
    if have is want:
        return 0
    if want.is_floating():
        if have.is_floating():
            return 1 if want.bits > have.bits else 8     # widening, or fp64 -> fp32
        return 4 if have.is_int() else None              # ints of float-only functions
    if want.is_int() and have.is_int() and not have.is_bool():
        if have.bits > want.bits:
            return None
        return 1 + (have.is_signed() != want.is_signed()) + (have.bits < want.bits)
    return None


def choose(name: str, arg_dtypes) -> tuple:
    """The variant of `name` for arguments of `arg_dtypes`: (arg dtypes, result dtype, CUDA
    function). An exact match wins; otherwise the variant needing the mildest conversions (a
    float widened, an int of the same signedness, fp16/bf16 computed in fp32). Raises
    TypeError when no variant takes the arguments."""
    best, best_cost = None, None
    for args, res, cfn in TABLE[name]:
        want = [DTYPES[a] for a in args]
        if len(want) != len(arg_dtypes):
            raise TypeError(f"libdevice.{name} takes {len(want)} argument(s), got "
                            f"{len(arg_dtypes)}")
        costs = [_cost(h, w) for h, w in zip(arg_dtypes, want)]
        if None in costs:
            continue
        if best_cost is None or sum(costs) < best_cost:
            best, best_cost = (tuple(want), DTYPES[res], cfn), sum(costs)
    if best is None:
        forms = ", ".join("(" + ", ".join(a) + ")" for a, _, _ in TABLE[name])
        got = ", ".join(d.name for d in arg_dtypes)
        raise TypeError(f"libdevice.{name} has no variant for ({got}); it takes {forms}")
    return best


def _stub(name, variants):
    n = len(variants[0][0])
    params = [f"arg{i}" for i in range(n)]

    def outside_kernel(*args, **kwargs):
        raise RuntimeError(f"libdevice.{name}() can only be called inside a @newt.jit kernel "
                           f"(set NEWT_INTERPRET=1 to run kernels on the CPU)")

    import inspect
    outside_kernel.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    outside_kernel.__name__ = outside_kernel.__qualname__ = name
    outside_kernel.__newt_builtin__ = "libdevice." + name
    forms = "; ".join(f"({', '.join(a)}) -> {r}: `{c}`" for a, r, c in variants)
    outside_kernel.__doc__ = f"libdevice `{name}`, elementwise. {forms}."
    return outside_kernel


for _name, _vs in TABLE.items():
    FUNCTIONS[_name] = globals()[_name] = _stub(_name, _vs)

__all__ = sorted(FUNCTIONS)
