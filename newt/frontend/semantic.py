"""Type rules of the kernel language (the middle of the frontend's three layers).

Consumes Tensors (values.py) and compile-time Python values; produces Tensors, emitting IR
through a Builder with every conversion explicit: constants, `cast`, `splat`, `reshape`,
`broadcast`. Rules are Triton's:

  - promotion: `newt.dtypes.computation_type`; Python numbers are weak (they take the block's
    type unless their kind is higher: `x_fp16 * 2.0` stays fp16, `i8 + 1` stays int8);
  - broadcasting: numpy's (ranks aligned on the right, size-1 dims repeat);
  - `/` is true division (ints go to fp32); `//` and `%` on ints truncate toward zero as in C
    (Triton's behaviour, unlike Python's floor semantics); `//` on floats is an error;
  - bitwise and shift operators need integers; pointer + int is `addptr`, pointer + pointer an
    error.

Errors raise CompilationError without a location; the AST visitor adds the user's line.
"""
from __future__ import annotations

from .. import dtypes as D
from ..errors import CompilationError
from .values import Tensor

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "pow": "**",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}
BITWISE = {"and", "or", "xor", "shl", "shr"}


def error(msg: str):
    raise CompilationError(msg)


def is_number(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, Tensor)


def python_dtype(x) -> D.dtype:
    """Triton's type for a Python number: ints in [2**31, 2**32) are uint32 (so masks like
    0xFFFFFFFF keep a uint32 block unsigned)."""
    if isinstance(x, bool):
        return D.int1
    if isinstance(x, int):
        if -2**31 <= x < 2**31:
            return D.int32
        if 2**31 <= x < 2**32:
            return D.uint32
        if -2**63 <= x < 2**63:
            return D.int64
        if 2**63 <= x < 2**64:
            return D.uint64
        error(f"integer constant {x} does not fit in 64 bits")
    if isinstance(x, float):
        return D.float32
    error(f"expected a number or a block, got {type(x).__name__} {x!r}")


def _wrap_int(v: int, dt: D.dtype) -> int:
    """Two's-complement wrap of a Python int into `dt`'s range (constants never overflow C)."""
    if dt.is_bool():
        return int(bool(v))
    m = 1 << dt.bits
    v &= m - 1
    if dt.is_signed() and v >= m >> 1:
        v -= m
    return v


def constant(b, value, dt: D.dtype) -> Tensor:
    if dt.is_ptr():
        error(f"cannot make a constant of pointer type {dt.short}")
    if dt.is_floating():
        value = float(value)
    else:
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                error(f"cannot convert {value} to {dt.name}")
            value = D.float_to_int(value, dt)   # as the same number cast at runtime
        value = _wrap_int(int(value), dt)
    return Tensor(b.constant(value, dt), b)


def to_tensor(b, x, dt: D.dtype | None = None) -> Tensor:
    """A Tensor for `x`: itself, or a constant of `dt` (default: Triton's type of the number)."""
    if isinstance(x, Tensor):
        return x
    if is_number(x):
        return constant(b, x, dt or python_dtype(x))
    error(f"expected a number or a block, got {type(x).__name__} {x!r}")


def dtype_weak(x):
    if isinstance(x, Tensor):
        return x.dtype, False
    return python_dtype(x), True


def check_dtype(dt):
    from ..language import constexpr
    if isinstance(dt, constexpr):
        dt = dt.value
    if not isinstance(dt, D.dtype):
        error(f"expected a dtype (like nl.float32), got {dt!r}")
    return dt


# ----------------------------------------------------------------------------- casts

def cast(b, x, dt, bitcast: bool = False) -> Tensor:
    dt = check_dtype(dt)
    if not isinstance(x, Tensor):
        if bitcast:
            x = to_tensor(b, x)
        else:
            return constant(b, x, dt)
    src = x.dtype
    if src is dt:
        return x
    if bitcast:
        if src.bits != dt.bits:
            error(f"bitcast needs types of equal width: {src.name} ({src.bits} bits) to "
                  f"{dt.name} ({dt.bits} bits)")
        return Tensor(b.cast(x.v, dt, bitcast=True), b)
    if src.is_ptr() or dt.is_ptr():
        if (src.is_ptr() and dt.is_ptr()) or D.int64 in (src, dt) or D.uint64 in (src, dt):
            return Tensor(b.cast(x.v, dt, bitcast=True), b)
        error(f"cannot cast {src.short} to {dt.short} (pointers convert only to other pointers "
              f"or 64-bit ints)")
    return Tensor(b.cast(x.v, dt), b)


# ----------------------------------------------------------------------------- broadcasting

def broadcast_shapes(s1: tuple, s2: tuple) -> tuple:
    if s1 == s2:
        return s1
    n = max(len(s1), len(s2))
    a = (1,) * (n - len(s1)) + tuple(s1)
    c = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for i, (x, y) in enumerate(zip(a, c)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            error(f"cannot broadcast shapes {list(s1)} and {list(s2)}: dimension {i} is {x} vs {y}")
    return tuple(out)


def broadcast_to_shape(b, t: Tensor, shape) -> Tensor:
    shape = tuple(shape)
    src = t.shape
    if src == shape:
        return t
    if not src:
        return Tensor(b.splat(t.v, shape), b)
    if len(src) > len(shape):
        error(f"cannot broadcast a block of shape {list(src)} to {list(shape)}")
    v = t.v
    if len(src) < len(shape):
        src = (1,) * (len(shape) - len(src)) + src
        v = b.reshape(v, src)
    for i, (x, y) in enumerate(zip(src, shape)):
        if x != y and x != 1:
            error(f"cannot broadcast a block of shape {list(t.shape)} to {list(shape)} "
                  f"(dimension {i}: {x} vs {y})")
    if src != shape:
        v = b.broadcast(v, shape)
    return Tensor(v, b)


def broadcast_all(b, *xs: Tensor):
    shape = ()
    for x in xs:
        shape = broadcast_shapes(shape, x.shape)
    return [broadcast_to_shape(b, x, shape) for x in xs]


def no_fp8(dt, what: str):
    """fp8 values are loaded, stored, cast, selected and multiplied by nl.dot; any other
    arithmetic needs a wider float (Triton's compiler fails on it as well)."""
    if dt.is_fp8():
        error(f"{what} on {dt.name} values: cast them to nl.float16 or nl.float32 first "
              f"(fp8 blocks support loads, stores, casts, nl.where and nl.dot)")


def promote(b, x, y, div_or_mod=False, what="operands"):
    """Convert two operands (Tensors or numbers) to their computation type and one shape."""
    (xt, xw), (yt, yw) = dtype_weak(x), dtype_weak(y)
    if xt.is_ptr() or yt.is_ptr():
        error(f"{what}: pointers ({xt.short}, {yt.short}) cannot be used here")
    try:
        ct = D.computation_type(xt, xw, yt, yw, div_or_mod)
    except TypeError as e:
        error(str(e))
    no_fp8(ct, what)
    # Python ints outside ct's range wrap (two's complement), as the interpreter does; Triton
    # raises instead ("Scalar out of range", "unsigned tensor and a negative scalar")
    x = cast(b, x, ct)
    y = cast(b, y, ct)
    x, y = broadcast_all(b, x, y)
    return x, y, ct


# ----------------------------------------------------------------------------- binary operators

def binary(b, op: str, x, y) -> Tensor:
    """A Python operator (`op` in _SYMBOL) on two values, at least one of them a Tensor."""
    sym = _SYMBOL.get(op, op)
    xt, yt = dtype_weak(x)[0], dtype_weak(y)[0]
    if xt.is_ptr() or yt.is_ptr():
        return _pointer_arith(b, op, x, y, xt, yt)
    if op == "pow":
        error("** is not supported on blocks (use nl.exp2 / nl.log2, or multiply)")
    if op in BITWISE:
        if xt.is_floating() or yt.is_floating():
            error(f"bitwise operator {sym} needs integer operands, got {xt.name} and {yt.name}")
        x, y, ct = promote(b, x, y, what=f"operator {sym}")
        return Tensor(b.binary(op, x.v, y.v), b)
    if op in COMPARE:
        x, y, ct = promote(b, x, y, what=f"operator {sym}")
        return Tensor(b.binary(op, x.v, y.v), b)
    folded = _identity(op, x, y)
    if folded is not None:
        return folded
    div_or_mod = op in ("truediv", "floordiv", "mod")
    x, y, ct = promote(b, x, y, div_or_mod, what=f"operator {sym}")
    if op == "truediv":
        if ct.is_int():  # Triton: int / int is fp32 true division
            x, y = cast(b, x, D.float32), cast(b, y, D.float32)
        return Tensor(b.binary("div", x.v, y.v), b)
    if op == "floordiv":
        if ct.is_floating():
            error(f"// is not defined for floating-point blocks ({ct.name}) in Triton semantics; "
                  f"use nl.floor(a / b)")
        return Tensor(b.binary("idiv", x.v, y.v), b)
    if op in ("add", "sub", "mul", "mod"):
        return Tensor(b.binary(op, x.v, y.v), b)
    error(f"unknown operator {op}")


def _identity(op, x, y):
    """x * 1, 1 * x, x + 0, 0 + x, x - 0 with a Python int: x itself, when the type would not
    change (this is what makes an `equal_to_1` stride free)."""
    if is_number(y) and not isinstance(y, float) and isinstance(x, Tensor) and x.dtype.is_int() \
            and not x.dtype.is_bool():
        t, k = x, y
    elif is_number(x) and not isinstance(x, float) and op != "sub" and isinstance(y, Tensor) \
            and y.dtype.is_int() and not y.dtype.is_bool():
        t, k = y, x
    else:
        return _typed_identity(op, x, y)
    if (op == "mul" and k == 1) or (op in ("add", "sub") and k == 0):
        return t
    return None


def _typed_identity(op, x, y):
    """The same with a typed scalar constant (a runtime int specialized as equal to 1 is one):
    only when promotion would leave the other operand's type unchanged."""
    def const(v):
        owner = getattr(getattr(v, "v", None), "owner", None)
        if getattr(owner, "opcode", None) == "constant" and not v.v.type.shape:
            return owner.attrs.get("value")
        return None
    for t, k, kv in ((x, y, const(y)), (y, x, const(x) if op != "sub" else None)):
        if kv is None or not isinstance(t, Tensor) or not t.dtype.is_int() or t.dtype.is_bool() \
                or not k.dtype.is_int() or k.dtype.is_bool():
            continue
        if not ((op == "mul" and kv == 1) or (op in ("add", "sub") and kv == 0)):
            continue
        if D.computation_type(t.dtype, False, k.dtype, False) is t.dtype:
            return t
    return None


def _pointer_arith(b, op, x, y, xt, yt) -> Tensor:
    sym = _SYMBOL.get(op, op)
    if xt.is_ptr() and yt.is_ptr():
        if op == "add":
            error("cannot add two pointers")
        if op in COMPARE and xt is yt:
            x, y = broadcast_all(b, x, y)
            xi = Tensor(b.cast(x.v, D.int64, bitcast=True), b)
            yi = Tensor(b.cast(y.v, D.int64, bitcast=True), b)
            return Tensor(b.binary(op, xi.v, yi.v), b)
        error(f"operator {sym} is not defined for two pointers ({xt.short}, {yt.short})")
    if op == "add":
        ptr, off, ot = (x, y, yt) if xt.is_ptr() else (y, x, xt)
    elif op == "sub" and xt.is_ptr():
        ptr, off, ot = x, y, yt
    else:
        error(f"operator {sym} is not defined for pointer ({(xt if xt.is_ptr() else yt).short}) "
              f"operands; only pointer + int and pointer - int are")
    if not (ot.is_int()):
        error(f"pointer offsets must be integers, got {ot.name}")
    if op == "sub":
        off = -off if is_number(off) else unary_operator(b, "neg", off)
    off = to_tensor(b, off)
    if off.dtype.is_bool():
        off = cast(b, off, D.int32)
    ptr, off = broadcast_all(b, ptr, off)
    return Tensor(b.addptr(ptr.v, off.v), b)


def unary_operator(b, op: str, x) -> Tensor:
    x = to_tensor(b, x)
    dt = x.dtype
    if op == "pos":
        return x
    if dt.is_ptr():
        error(f"unary operator {op} is not defined for pointers")
    no_fp8(dt, f"unary operator {op}")
    if op == "neg":
        if dt.is_bool():
            error("unary - is not defined for bool blocks")
        return Tensor(b.unary("neg", x.v), b)
    if op == "invert":
        if not dt.is_int():
            error(f"~ (bitwise not) needs an integer operand, got {dt.name}")
        # ~ on a 1-bit value is logical not (C's ~ on a bool would give a nonzero -2)
        return Tensor(b.unary("not" if dt.is_bool() else "invert", x.v), b)
    if op == "not":
        return Tensor(b.unary("not", to_bool(b, x).v), b)
    error(f"unknown unary operator {op}")


def to_bool(b, x) -> Tensor:
    """Truth value as i1 (x != 0), the meaning of a value used as a condition."""
    x = to_tensor(b, x)
    if x.dtype.is_bool():
        return x
    if x.dtype.is_ptr():
        error("a pointer cannot be used as a condition")
    return Tensor(b.binary("ne", x.v, constant(b, 0, x.dtype).v if not x.is_block()
                           else broadcast_to_shape(b, constant(b, 0, x.dtype), x.shape).v), b)


def logical(b, op: str, x, y) -> Tensor:
    """Python `and` / `or` on runtime values: logical, elementwise, i1 result."""
    x, y = broadcast_all(b, to_bool(b, x), to_bool(b, y))
    return Tensor(b.binary(op, x.v, y.v), b)


# ----------------------------------------------------------------------------- functions

def where(b, cond, x, y) -> Tensor:
    cond = to_bool(b, cond)
    (xt, xw), (yt, yw) = dtype_weak(x), dtype_weak(y)
    if xt.is_ptr() or yt.is_ptr():
        if xt is not yt:
            error(f"where: pointer operands must have one type, got {xt.short} and {yt.short}")
        x, y = to_tensor(b, x), to_tensor(b, y)
    else:
        try:
            ct = D.computation_type(xt, xw, yt, yw)
        except TypeError as e:
            error(str(e))
        x, y = cast(b, x, ct), cast(b, y, ct)
    cond, x, y = broadcast_all(b, cond, x, y)
    return Tensor(b.select(cond.v, x.v, y.v), b)


def minmax(b, op: str, x, y) -> Tensor:
    x, y, _ = promote(b, x, y, what=op)
    return Tensor(b.binary(op, x.v, y.v), b)


def fma(b, x, y, z) -> Tensor:
    x, y, _ = promote(b, x, y, what="fma")
    x, z, ct = promote(b, x, z, what="fma")
    x, y, z = broadcast_all(b, x, y, z)
    y = cast(b, y, ct)
    if not ct.is_floating():
        return binary(b, "add", binary(b, "mul", x, y), z)
    return Tensor(b.fma(x.v, y.v, z.v), b)


def math_unary(b, name: str, x) -> Tensor:
    x = to_tensor(b, x)
    if x.dtype.is_ptr():
        error(f"{name} is not defined for pointers")
    no_fp8(x.dtype, name)
    if not x.dtype.is_floating():
        x = cast(b, x, D.float32)   # Triton: integer inputs are computed in fp32
    return Tensor(b.unary(name, x.v), b)


def abs_(b, x) -> Tensor:
    x = to_tensor(b, x)
    if x.dtype.is_ptr():
        error("abs is not defined for pointers")
    no_fp8(x.dtype, "abs")
    if x.dtype.kind in ("uint", "bool"):
        return x
    return Tensor(b.unary("abs", x.v), b)


def umulhi(b, x, y) -> Tensor:
    x, y, ct = promote(b, x, y, what="umulhi")
    if ct not in (D.int32, D.uint32, D.int64, D.uint64):
        error(f"umulhi needs 32- or 64-bit integers, got {ct.name}")
    if ct.kind == "int":   # the high half of the *unsigned* product, as Triton computes it
        u = D.uint32 if ct.bits == 32 else D.uint64
        x, y = cast(b, x, u, bitcast=True), cast(b, y, u, bitcast=True)
        return cast(b, Tensor(b.binary("umulhi", x.v, y.v), b), ct, bitcast=True)
    return Tensor(b.binary("umulhi", x.v, y.v), b)


def div_rn(b, x, y) -> Tensor:
    x, y, ct = promote(b, x, y, div_or_mod=True, what="div_rn")
    if not ct.is_floating():
        x, y = cast(b, x, D.float32), cast(b, y, D.float32)
    r = b.binary("div", x.v, y.v)
    r.owner.attrs["rounding"] = "rn"      # IEEE, where fp32 `/` is Triton's div.full
    return Tensor(r, b)

