"""Elementwise codegen: constants, program ids, arange, splat, casts, binary/unary math, select,
fma, addptr, philox. Each op is a C expression per slot (blocks) or one expression (scalars).

The expression builders (binary_expr, unary_expr, cast_expr, ...) take operand expressions and
the IR value they define, so shapes.value_at can reuse them to recompute index-computable
values anywhere. C semantics as ops.py specifies: integer division truncates, % is the C
remainder (fmod for floats), >> is arithmetic for signed types. Integers narrower than 32 bits
are computed in 32 bits and truncated back; fp16/bf16 are computed in fp32 and rounded back.

Signed integers wrap on overflow, as in Triton (LLVM adds without `nsw`) and the interpreter:
+, -, *, <<, negation and abs of 32- and 64-bit signed values are computed on the unsigned type
of the same width and converted back. In C++ a signed overflow is undefined, and NVRTC uses
that: written signed, `x + 1 > x` compiled to `true` and `abs(x) % d` to an unsigned remainder
(wrong for INT64_MIN, found by the differential fuzzer on the H200). int32 abs is a header
helper in inline PTX (nt_abs32): with abs.s32, or the same arithmetic written in C, ptxas took
abs(INT32_MIN) as positive in a remainder (Triton's compiled kernels do the same).
"""
from __future__ import annotations

from ..ir.core import is_block
from .emitter import handles, reg_type

_C_BIN = {"add": "+", "sub": "-", "mul": "*", "div": "/", "idiv": "/", "mod": "%",
          "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>",
          "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

_F32 = {"exp": "nt_exp({})", "exp2": "nt_exp2({})", "log": "logf({})", "log2": "log2f({})",
        "sqrt": "sqrtf({})", "sqrt_rn": "__fsqrt_rn({})", "rsqrt": "rsqrtf({})",
        "sin": "sinf({})", "cos": "cosf({})", "tanh": "tanhf({})", "erf": "erff({})",
        "sigmoid": "nt_sigmoid({})", "floor": "floorf({})", "ceil": "ceilf({})",
        "abs": "fabsf({})", "neg": "(-{})"}
_F64 = {"exp": "exp({})", "exp2": "exp2({})", "log": "log({})", "log2": "log2({})",
        "sqrt": "sqrt({})", "sqrt_rn": "__dsqrt_rn({})", "rsqrt": "rsqrt({})",
        "sin": "sin({})", "cos": "cos({})", "tanh": "tanh({})", "erf": "erf({})",
        "sigmoid": "nt_sigmoid({})", "floor": "floor({})", "ceil": "ceil({})",
        "abs": "fabs({})", "neg": "(-{})"}


def round_to(dt, e: str) -> str:
    """Round an fp32 expression to `dt` when `dt` is a float narrower than its register form
    (fp16, bf16, fp8), held in fp32."""
    from .memory import NARROW
    return f"{NARROW[dt.name][2]}({e})" if dt.name in NARROW else e


def _int_compute_type(dt, wide) -> str:
    if wide or dt.bits >= 32:
        return reg_type(dt, wide)
    return "u32" if dt.kind in ("uint", "bool") else "i32"


def binary_expr(op: str, dt, a: str, b: str, wide=False) -> str:
    """`a op b` for operands of dtype `dt` (result dtype int1 for comparisons)."""
    if dt.is_floating():
        if op in ("maximum", "minimum"):
            f = ("fmax" if op == "maximum" else "fmin") + ("" if dt.bits == 64 else "f")
            return f"{f}({a}, {b})"
        if op == "mod":
            return round_to(dt, f"{'fmod' if dt.bits == 64 else 'fmodf'}({a}, {b})")
        e = f"({a} {_C_BIN[op]} {b})"
        return e if op in _CMP else round_to(dt, e)
    ct = _int_compute_type(dt, wide)
    rt = reg_type(dt, wide)
    if op in _CMP:
        return f"({a} {_C_BIN[op]} {b})"
    if dt.is_bool() and op in ("and", "or", "xor"):
        return f"(bool)({a} {_C_BIN[op]} {b})"
    if op in ("maximum", "minimum"):
        cmp = ">" if op == "maximum" else "<"
        return f"({a} {cmp} {b} ? {a} : {b})"
    if op == "umulhi":   # the high half of the full product; signed types multiply signed
        if dt.bits == 64 or wide:
            if dt.is_signed():
                return f"({rt})__mul64hi((i64)({a}), (i64)({b}))"
            return f"({rt})__umul64hi((u64)({a}), (u64)({b}))"
        if dt.is_signed():
            return f"({rt})__mulhi((i32)({a}), (i32)({b}))"
        return f"({rt})__umulhi((u32)({a}), (u32)({b}))"
    if op in ("idiv", "mod"):
        e = f"nt_{'div' if op == 'idiv' else 'mod'}(({ct})({a}), ({ct})({b}))"
    elif op in ("shl", "shr"):    # defined for every amount (header.py)
        e = f"nt_{op}(({ct})({a}), ({ct})({b}))"
    elif op in _WRAP and ct in _UNSIGNED:     # the unsigned type's arithmetic wraps
        u = _UNSIGNED[ct]
        return f"({rt})(({u})({a}) {_C_BIN[op]} ({u})({b}))"
    else:
        e = f"(({ct})({a}) {_C_BIN[op]} ({ct})({b}))"
    if dt.is_bool():     # int1 arithmetic wraps (True + True is False), as in Triton
        return f"(bool)({e} & 1u)"
    return e if ct == rt else f"({rt}){e}"


_WRAP = {"add", "sub", "mul", "shl"}
_UNSIGNED = {"i32": "u32", "i64": "u64"}


_CMP = {"eq", "ne", "lt", "le", "gt", "ge"}


def unary_expr(op: str, dt, x: str, wide=False) -> str:
    if dt.is_floating():
        table = _F64 if dt.bits == 64 else _F32
        e = table[op].format(x)
        exact = op in ("neg", "abs", "floor", "ceil")
        return e if exact else round_to(dt, e)
    rt = reg_type(dt, wide)
    if op == "not":
        return f"(!{x})"
    if op == "invert":
        return f"({rt})(~{x})" if not dt.is_bool() else f"(!{x})"
    ct = _int_compute_type(dt, wide)
    neg = f"(0 - ({_UNSIGNED[ct]})({x}))" if ct in _UNSIGNED else f"(-({ct})({x}))"
    if op == "neg":
        return f"({rt}){neg}"
    if op == "abs":
        if dt.kind in ("uint", "bool"):
            return x
        if ct == "i32" and dt.bits == 32:        # (header.py: ptxas and abs(INT32_MIN))
            return f"nt_abs32({x})"
        return f"({x} < 0 ? ({rt}){neg} : ({rt})({x}))"
    raise NotImplementedError(f"unary {op} on {dt}")


def cast_expr(src, dst, x: str, bitcast=False, src_wide=False, dst_wide=False) -> str:
    rt = reg_type(dst, dst_wide)
    if src is dst and src_wide == dst_wide:
        return x
    if bitcast:
        return _bitcast(src, dst, x)
    if dst.is_bool():
        return f"({x} != 0)"
    if src.is_bool():
        return f"({x} ? ({rt})1 : ({rt})0)"
    if dst.is_floating():
        if src.is_floating() and src.bits < 32 and dst.bits > src.bits and dst.name != "float64":
            return x               # fp16/bf16 -> fp32, fp8 -> fp16/bf16/fp32: already exact
        if dst.bits < 32:
            return round_to(dst, _to_f32_once(src, dst, x))
        return f"({rt})({x})"
    if src.is_floating():
        return f"({rt}){_float_to_int(src, dst)}({x})"
    return f"({rt})({x})"                             # int->int wraps


def _float_to_int(src, dst) -> str:
    """The CUDA conversion of a float register to `dst`: truncation toward zero, saturating to
    32 or 64 bits, NaN -> 0 (2^63's bits at 64 bits; cvt.rzi, explicit for fp64), where a C
    cast of a value outside the range is undefined; 8- and 16-bit results keep the low bits of
    the 32-bit one (the interpreter's rule)."""
    if src.bits == 64:      # header.py: the NaN of an fp64 source made explicit
        return "nt_d2" + ("u" if dst.kind == "uint" else "") + (
            "ll" if dst.bits == 64 else ("" if dst.kind == "uint" else "i"))
    i = ("u" if dst.kind == "uint" else "") + ("ll" if dst.bits == 64 else "int")
    return f"__float2{i}_rz"


def _to_f32_once(src, dst, x: str) -> str:
    """The fp32 a narrower float `dst` is rounded from, such that the value is rounded once:
    from fp32 and narrower types as they are; from fp64 rounded to odd (header: nt_odd_f32);
    integers as fp32 for fp16 and fp8 (every integer in their range is exact in fp32) and
    rounded to odd for bf16, whose range holds integers fp32 rounds."""
    if src.name == "float32" or src.bits < 32 or (src.is_int() and dst.name != "bfloat16"):
        return x if src.is_floating() else f"(float)({x})"
    if src.is_int() and src.bits == 64:
        return f"nt_odd_f32(nt_odd_{'u' if src.kind == 'uint' else 'i'}64({x}))"
    return f"nt_odd_f32((double)({x}))"


def _bitcast(src, dst, x):
    from .memory import from_bits, to_bits
    if src.is_fp8():                   # fp8 <-> int8 / uint8 / the other fp8: the storage byte
        return from_bits(dst, to_bits(src, x)) if dst.is_fp8() else \
            f"({reg_type(dst)})({to_bits(src, x)})"
    if dst.is_fp8():
        return from_bits(dst, f"(u8)({x})")
    s16 = src.is_floating() and src.bits == 16
    d16 = dst.is_floating() and dst.bits == 16
    if s16:
        bits = f"nt_f2h({x})" if src.name == "float16" else f"nt_f2b({x})"
        return _from16(dst, bits) if d16 else f"({reg_type(dst)})nt_bits16({bits})"
    if d16:
        return _from16(dst, f"(u16)({x})")
    if src.bits == 32 and dst.is_floating():
        return f"__int_as_float((i32)({x}))"
    if src.bits == 64 and dst.is_floating():
        return f"__longlong_as_double((i64)({x}))"
    if src.is_floating() and src.bits == 32:
        return f"({reg_type(dst)})__float_as_int({x})"
    if src.is_floating() and src.bits == 64:
        return f"({reg_type(dst)})__double_as_longlong({x})"
    return f"({reg_type(dst)})({x})"


def _from16(dst, bits):
    return f"nt_h2f({bits})" if dst.name == "float16" else f"nt_b2f({bits})"


def literal(value, dt) -> str:
    if dt.is_bool():
        return "true" if value else "false"
    if dt.is_floating():
        v = float(value)
        if v != v:
            return "__int_as_float(0x7fc00000)" if dt.bits != 64 else "__longlong_as_double(0x7ff8000000000000LL)"
        if v in (float("inf"), float("-inf")):
            s = "-" if v < 0 else ""
            return f"{s}__int_as_float(0x7f800000)" if dt.bits != 64 else f"{s}__longlong_as_double(0x7ff0000000000000LL)"
        r = repr(v)
        if "e" not in r and "." not in r:
            r += ".0"
        return r if dt.bits == 64 else r + "f"
    v = int(value)
    if dt.bits == 64 or abs(v) >= 2**31:
        return f"{v}{'ULL' if dt.kind == 'uint' else 'LL'}"
    return f"{v}u" if dt.kind == "uint" else str(v)


# ----------------------------------------------------------------------------- handlers

def expr_of(em, op, operand_exprs):
    """The C expression an elementwise op computes from operand expressions (shared by the
    handlers below and by recomputation in shapes.value_at)."""
    c, r = op.opcode, op.results[0]
    wide = r.attrs.get("wide", False)
    if c == "binary":
        k, dt = op.attrs["op"], op.operands[0].dtype
        if k == "div" and dt.name == "float32" and op.attrs.get("rounding") != "rn":
            return f"nt_fdiv({operand_exprs[0]}, {operand_exprs[1]})"   # Triton's div.full
        return binary_expr(k, dt, *operand_exprs,
                           wide=wide or any(o.attrs.get("wide") for o in op.operands))
    if c == "unary":
        if op.attrs["op"] == "sqrt" and r.dtype.name == "float32":
            return f"nt_sqrt({operand_exprs[0]})"                       # Triton's sqrt.approx
        return unary_expr(op.attrs["op"], r.dtype, operand_exprs[0], wide)
    if c == "cast":
        x = op.operands[0]
        return cast_expr(x.dtype, r.dtype, operand_exprs[0], op.attrs.get("bitcast", False),
                         x.attrs.get("wide", False), wide)
    if c == "select":
        return f"({operand_exprs[0]} ? {operand_exprs[1]} : {operand_exprs[2]})"
    if c == "fma":
        f = "fma" if r.dtype.bits == 64 else "fmaf"
        return round_to(r.dtype, f"{f}({', '.join(operand_exprs)})")
    if c == "addptr":
        return f"({operand_exprs[0]} + {operand_exprs[1]})"
    if c == "constant":
        return literal(op.attrs["value"], r.dtype)
    if c in ("program_id", "num_programs"):
        if em.pid_x is not None and op.attrs["axis"] == 0:   # a persistent kernel's program
            return em.pid_x if c == "program_id" else "nt_grid"
        base = "blockIdx" if c == "program_id" else "gridDim"
        return f"(i32){base}.{'xyz'[op.attrs['axis']]}"
    raise NotImplementedError(c)


@handles("binary", "unary", "cast", "select", "fma", "addptr")
def _elementwise(em, op):
    r = op.result
    if op.attrs.get("rounded_by_user"):     # fp32 -> 16-bit cast read only by a dot's A
        return em.alias(r, op.operands[0])  # fragment pack, which rounds (passes/tc/dot_rows.py)
    lay = r.attrs.get("layout")
    em.elementwise(op, lambda s: expr_of(em, op, [em.at(o, s, lay) for o in op.operands]))


@handles("constant", "program_id", "num_programs")
def _scalar_source(em, op):
    em.declare(op.result, expr_of(em, op, []))


@handles("arange")
def _arange(em, op):
    r = op.result
    lay = r.attrs["layout"]
    start = op.attrs["start"]
    em.elementwise(op, lambda s: f"({start} + {lay.flat('tid', s)})" if start
                   else lay.flat("tid", s))


@handles("splat")
def _splat(em, op):
    # no array: every slot reads the scalar (Emitter.at)
    em.inline[op.result.id] = em.name(op.operands[0])


@handles("philox")
def _philox(em, op):
    seed, off = op.operands
    names = []
    for r in op.results:
        names.append(em.declare(r))
    rounds = op.attrs.get("n_rounds", 10)
    if is_block(off.type):
        with em.slots(em.nslots(op.results[0])) as s:
            outs = ", ".join(f"{n}[{s}]" for n in names)
            em.emit(f"nt_philox((u64){em.name(seed)}, {em.at(off, s, op.results[0].attrs['layout'])}, "
                    f"{rounds}, {outs});")
    else:
        em.emit(f"nt_philox((u64){em.name(seed)}, {em.name(off)}, {rounds}, {', '.join(names)});")
