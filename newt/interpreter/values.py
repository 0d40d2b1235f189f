"""Values of the interpreter: a block (or scalar) is a torch tensor plus a newt dtype.

Consumed by ops.py / memory.py (which implement the language on top of it) and produced for every
expression a kernel evaluates under NEWT_INTERPRET=1. The rules here are the executable spec of
Triton's arithmetic: promotion through `newt.dtypes.computation_type` (Python numbers are weak),
C-style integer division and remainder, wrapping integer overflow, fp16/bf16 computed in fp32
and rounded back, comparisons giving int1.

Canonical storage of `Tensor.data` by dtype (chosen so torch's CPU kernels cover every op):
  int1                 torch.bool
  int8..int64, uint*   torch.int64 holding the value (uint64: the same 64 bits, two's complement)
  fp16/bf16/fp32/fp64  the matching torch float dtype
  pointer<T>           torch.int64 element offsets into `Tensor.buf` (a memory.Buffer)
"""
from __future__ import annotations

import functools
import sys

import torch

from .. import dtypes as D
from ..language import constexpr as _constexpr
from . import context, intdiv
from .rounding import odd_fp32

_MIN64 = -(1 << 63)


def canon_torch(dt) -> torch.dtype:
    """The torch dtype `Tensor.data` uses for newt dtype `dt`."""
    if dt.is_ptr() or dt.kind in ("int", "uint"):
        return torch.int64
    return dt.to_torch()  # bool and floats


def wrap(v: torch.Tensor, dt) -> torch.Tensor:
    """Reduce an int64 tensor to the canonical value of integer dtype `dt` (two's complement wrap)."""
    b = dt.bits
    if b >= 64:
        return v
    if dt.kind == "uint":
        return v & ((1 << b) - 1)
    half = 1 << (b - 1)
    return ((v + half) & ((1 << b) - 1)) - half


_RAW = {D.uint16: torch.int16, D.uint32: torch.int32, D.uint64: torch.int64}


def raw_torch(dt) -> torch.dtype:
    """The torch dtype memory is viewed as: unsigned 16/32/64-bit as the signed type of the same
    width, because torch's CPU kernels (indexing included) do not cover those."""
    return _RAW.get(dt) or dt.to_torch()


def from_storage(t: torch.Tensor, dt) -> torch.Tensor:
    """Memory representation (raw_torch(dt)) -> canonical."""
    if dt.kind in ("int", "uint"):
        v = t.to(torch.int64)
        return v & ((1 << dt.bits) - 1) if dt.kind == "uint" and dt.bits < 64 else v
    return t


def to_storage(v: torch.Tensor, dt) -> torch.Tensor:
    """Canonical -> memory representation (raw_torch(dt)): the bits a store, atomic or bitcast
    writes. A 16-bit float NaN is 0x7FFF, as the GPU's cvt.rn.f16/bf16.f32 write it."""
    if dt in _RAW and dt.bits < 64:
        v = ((v + (1 << (dt.bits - 1))) & ((1 << dt.bits) - 1)) - (1 << (dt.bits - 1))
    out = v.to(raw_torch(dt))
    if dt.name in ("float16", "bfloat16") and bool(torch.isnan(out).any()):
        nan = torch.tensor(0x7FFF, dtype=torch.int16).view(out.dtype)
        out = torch.where(torch.isnan(out), nan, out)
    return out


class Tensor:
    """A value inside an interpreted kernel. Immutable: every op returns a new Tensor."""

    __slots__ = ("data", "dtype", "buf")
    __hash__ = object.__hash__

    def __init__(self, data: torch.Tensor, dtype, buf=None):
        self.data, self.dtype, self.buf = data, dtype, buf

    # -- introspection
    @property
    def shape(self) -> tuple:
        return tuple(self.data.shape)

    @property
    def numel(self) -> int:
        return self.data.numel()

    @property
    def type(self):
        return self.dtype if self.data.dim() == 0 else _BlockTypeView(self.dtype, self.shape)

    @property
    def T(self):
        return self.trans()

    def __repr__(self):
        return f"Tensor({self.dtype.name}{list(self.shape)}, {self.data.tolist()!r})"

    # -- conversion to Python (scalars only; this is what makes `if`, `while`, Python `min`/`max`
    #    and `range(n)` on runtime scalars work)
    def __bool__(self):
        if self.data.dim() == 0:
            return bool(self.data.item())
        caller = sys._getframe(1)
        if context.in_assert(caller):
            return bool(self.data.bool().all())  # `assert block_cond` = device_assert, per element
        raise TypeError(f"a block of shape {list(self.shape)} has no single truth value: "
                        "conditions of if/while and Python's min/max need scalars; use "
                        "nl.where / nl.minimum / nl.maximum on blocks, or reduce first")

    def __index__(self):
        if self.data.dim() != 0 or not self.dtype.is_int():
            raise TypeError(f"only integer scalars can be used as an index, not {self.dtype.name}"
                            f"{list(self.shape)}")
        v = int(self.data.item())
        return v + (1 << 64) if self.dtype is D.uint64 and v < 0 else v

    __int__ = __index__

    def __float__(self):
        return float(self.data.item())

    def __iter__(self):
        raise TypeError("kernel tensors are not iterable")

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        for i in idx:
            if not (i is None or i is Ellipsis or (isinstance(i, slice) and i == slice(None))):
                raise TypeError(f"blocks can only be indexed with None and ':' (got {i!r})")
        return Tensor(self.data[idx], self.dtype, self.buf)

    # -- operators (reflected ones swap the operands)
    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return sub(self, o)
    def __rsub__(self, o): return sub(o, self)
    def __mul__(self, o): return binary(self, o, "mul")
    def __rmul__(self, o): return binary(o, self, "mul")
    def __truediv__(self, o): return truediv(self, o)
    def __rtruediv__(self, o): return truediv(o, self)
    def __floordiv__(self, o): return binary(self, o, "floordiv")
    def __rfloordiv__(self, o): return binary(o, self, "floordiv")
    def __mod__(self, o): return binary(self, o, "mod")
    def __rmod__(self, o): return binary(o, self, "mod")
    def __and__(self, o): return binary(self, o, "and")
    def __rand__(self, o): return binary(o, self, "and")
    def __or__(self, o): return binary(self, o, "or")
    def __ror__(self, o): return binary(o, self, "or")
    def __xor__(self, o): return binary(self, o, "xor")
    def __rxor__(self, o): return binary(o, self, "xor")
    def __lshift__(self, o): return binary(self, o, "shl")
    def __rlshift__(self, o): return binary(o, self, "shl")
    def __rshift__(self, o): return binary(self, o, "shr")
    def __rrshift__(self, o): return binary(o, self, "shr")
    def __lt__(self, o): return compare(self, o, "lt")
    def __le__(self, o): return compare(self, o, "le")
    def __gt__(self, o): return compare(self, o, "gt")
    def __ge__(self, o): return compare(self, o, "ge")
    def __eq__(self, o): return compare(self, o, "eq")
    def __ne__(self, o): return compare(self, o, "ne")
    def __pos__(self): return self

    def __neg__(self):
        if self.dtype.is_ptr():
            raise TypeError("cannot negate a pointer")
        return _down(-_up(self), self.dtype)

    def __invert__(self):
        if not self.dtype.is_int():
            raise TypeError(f"~ needs an integer operand, not {self.dtype.name}")
        if self.dtype is D.int1:
            return Tensor(~self.data, D.int1)
        return Tensor(wrap(~self.data, self.dtype), self.dtype)

    def __abs__(self):
        if self.dtype.kind == "uint" or self.dtype.is_bool():
            return self
        if self.dtype.is_int():
            return Tensor(wrap(self.data.abs(), self.dtype), self.dtype)
        return Tensor(self.data.abs(), self.dtype)

    # -- methods (x.to, x.reshape, ...): implemented in ops.py
    def __getattr__(self, name):  # x.sum(), x.exp(), ... : the language function of that name
        from . import ops
        fn = ops.TENSOR_METHODS.get(name)
        if fn is None:
            raise AttributeError(f"kernel tensors have no attribute {name!r}")
        return functools.partial(fn, self)


class _BlockTypeView:
    """What `x.type` gives for a block (Triton's block_type): element_ty, scalar, shape."""

    def __init__(self, dt, shape):
        self.element_ty = self.scalar = dt
        self.shape = list(shape)


# ----------------------------------------------------------------------------- constants, casts

def unwrap(x):
    return x.value if isinstance(x, _constexpr) else x


def const(value, dt) -> Tensor:
    """A Python number as a scalar of dtype `dt` (ints wrap, floats round, bool is != 0)."""
    value = unwrap(value)
    if isinstance(value, Tensor):
        return cast(value, dt)
    if dt.is_bool():
        return Tensor(torch.tensor(bool(value)), dt)
    if dt.is_floating():
        return Tensor(to_float(torch.tensor(float(value), dtype=torch.float64), dt), dt)
    if isinstance(value, float):
        return cast(Tensor(torch.tensor(value, dtype=torch.float64), D.float64), dt)
    v = int(value) & ((1 << 64) - 1)
    v = v - (1 << 64) if v >= 1 << 63 else v
    return Tensor(wrap(torch.tensor(v, dtype=torch.int64), dt), dt)


def to_tensor(x) -> Tensor:
    """A Tensor as is; a Python number as a scalar of the type Triton gives it."""
    x = unwrap(x)
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return const(x, D.of_python_scalar(x))
    raise TypeError(f"expected a kernel value or a number, got {type(x).__name__}")


def _float_of(t: Tensor) -> torch.Tensor:
    """An integer Tensor's values as float64 (uint64 bit patterns read as unsigned)."""
    if t.dtype is D.uint64:   # one rounding (int64 -> float64, then + 2**64, rounded twice)
        return t.data.view(torch.uint64).to(torch.float64)
    return t.data.to(torch.float64)


def cast(x, dt, bitcast=False) -> Tensor:
    """`x.to(dt)`: float->int truncates toward zero (NaN -> 0, or 2^63's bits for 64-bit
    results; saturating to 32 or 64 bits as the GPU's cvt.rzi does; 8- and 16-bit results are the low bits of the 32-bit one, as in the
    generated code), ->bool is != 0, int->int wraps, bitcast reinterprets bits of equal width."""
    x = to_tensor(x)
    dt = unwrap(dt)
    src = x.dtype
    if src is dt:
        return x
    if src.is_ptr() or dt.is_ptr():
        from .memory import pointer_cast
        return pointer_cast(x, dt)
    if bitcast:
        if src.bits != dt.bits:
            raise TypeError(f"bitcast needs equal widths: {src.name} ({src.bits} bits) to "
                            f"{dt.name} ({dt.bits} bits)")
        raw = to_storage(x.data, src).contiguous().view(raw_torch(dt))
        return Tensor(from_storage(raw, dt), dt)
    if dt.is_bool():
        return Tensor(x.data != 0, dt)
    if src.is_bool():
        return Tensor(x.data.to(canon_torch(dt)), dt)
    if dt.is_floating():
        if dt.bits < 32 and (src is D.float64 or (dt is D.bfloat16 and src.is_int()
                                                  and src.bits >= 32)):
            return Tensor(to_float(odd_fp32(x.data, src), dt), dt)   # rounded once
        if src is D.uint64:   # rounded once to fp64 / fp32, as cvt.rn does; narrower via fp32
            wide = torch.float64 if dt is D.float64 else torch.float32
            return Tensor(to_float(x.data.view(torch.uint64).to(wide), dt), dt)
        return Tensor(to_float(x.data, dt), dt)
    if src.is_floating():  # float -> int
        f = torch.nan_to_num(x.data.to(torch.float64).trunc(), nan=0.0)
        bits = max(dt.bits, 32)   # 8/16 bits: saturated to 32, then wrapped (cvt.rzi.s32 / u32
        #                           and a truncation: what the generated code does)
        lo, hi = (0, (1 << bits) - 1) if dt.kind == "uint" else (-(1 << bits - 1), (1 << bits - 1) - 1)
        f = f.clamp(float(lo), float(hi))
        if dt.bits < 64:
            return Tensor(wrap(f.to(torch.int64), dt), dt)
        big = f >= 2.0 ** 63  # beyond int64: unsigned bit pattern, or saturate for int64
        if dt.kind == "uint":
            v = torch.where(big, (f - 2.0 ** 63).clamp(max=2.0 ** 63 - 1024).to(torch.int64) + _MIN64,
                            f.clamp(max=2.0 ** 63 - 1024).to(torch.int64))
            v = torch.where(f >= 2.0 ** 64, torch.full_like(v, -1), v)
        else:
            v = torch.where(big, torch.full_like(f, 0, dtype=torch.int64) + (2 ** 63 - 1),
                            f.clamp(max=2.0 ** 63 - 1024).to(torch.int64))
        # NaN: 0x8000000000000000 for 64-bit results, as cvt.rzi.{s,u}64 give on the GPU
        return Tensor(torch.where(x.data.isnan(), torch.full_like(v, _MIN64), v), dt)
    return Tensor(wrap(x.data, dt), dt)  # int -> int


# ----------------------------------------------------------------------------- arithmetic core

def _fp8_arith(dt):
    if dt.is_fp8():
        raise TypeError(f"arithmetic on {dt.name} values: cast them to nl.float16 or "
                        f"nl.float32 first (fp8 blocks support loads, stores, casts, nl.where "
                        f"and nl.dot)")


def to_float(v: torch.Tensor, dt) -> torch.Tensor:
    """Float data of dtype `dt` from any torch data; to fp8 through fp32, saturating to the
    largest finite value as the GPU's cvt.rn.satfinite does (NaN stays NaN)."""
    if dt.is_fp8():
        m = torch.finfo(dt.to_torch()).max
        return v.to(torch.float32).clamp(-m, m).to(dt.to_torch())
    return v.to(dt.to_torch())


def _up(t: Tensor) -> torch.Tensor:
    """Compute representation: fp16/bf16 widen to fp32 (rounded back by _down), bool to int64."""
    _fp8_arith(t.dtype)
    if t.dtype is D.float16 or t.dtype is D.bfloat16:
        return t.data.float()
    if t.dtype is D.int1:
        return t.data.to(torch.int64)
    return t.data


def _down(v: torch.Tensor, dt) -> Tensor:
    if dt.is_floating():
        return Tensor(v.to(dt.to_torch()), dt)
    if dt is D.int1:
        return Tensor((v & 1).bool(), dt)
    return Tensor(wrap(v, dt), dt)


def promote(a, b, div_or_mod=False, arith=True):
    """Convert both operands to their Triton computation type; returns (a, b, dtype). fp8 is a
    computation type only for selections (arith=False: nl.where)."""
    a, b = unwrap(a), unwrap(b)
    wa, wb = not isinstance(a, Tensor), not isinstance(b, Tensor)
    ta = a.dtype if not wa else D.of_python_scalar(to_tensor_check(a))
    tb = b.dtype if not wb else D.of_python_scalar(to_tensor_check(b))
    if ta.is_ptr() or tb.is_ptr():
        raise TypeError(f"invalid operands {ta.name} and {tb.name}")
    ct = D.computation_type(ta, wa, tb, wb, div_or_mod)
    if arith:
        _fp8_arith(ct)
    ca = cast(a, ct) if not wa else const(a, ct)
    cb = cast(b, ct) if not wb else const(b, ct)
    return ca, cb, ct


def to_tensor_check(x):
    if isinstance(x, (bool, int, float)):
        return x
    raise TypeError(f"unsupported operand of type {type(x).__name__} in a kernel expression")


def _ordered(t: Tensor) -> torch.Tensor:
    """int64 values whose signed order is the dtype's order (uint64: flip the sign bit)."""
    return t.data ^ _MIN64 if t.dtype is D.uint64 else t.data


def _int_div(a: Tensor, b: Tensor, dt, mod: bool) -> Tensor:
    """`//` / `%` of integers as the generated code defines them (intdiv.py)."""
    if dt is D.uint64:
        return Tensor(intdiv.unsigned64(a.data, b.data, mod), dt)
    return _down(intdiv.signed(_up(a), _up(b), mod), dt)


def binary(a, b, op) -> Tensor:
    """Arithmetic (mul, floordiv, mod), bitwise (and, or, xor) and shifts (shl, shr)."""
    if op in ("floordiv", "mod"):
        a, b, ct = promote(a, b, div_or_mod=True)
        if ct.is_floating():
            if op == "floordiv":
                raise TypeError(f"// is only defined on integers in kernels (got {ct.name}); "
                                "use nl.floor(x / y)")
            return _down(torch.fmod(_up(a), _up(b)), ct)  # C fmod: sign of the dividend
        return _int_div(a, b, ct, op == "mod")
    a, b, ct = promote(a, b)
    if op == "mul":
        return _down(_up(a) * _up(b), ct)
    if not ct.is_int():
        raise TypeError(f"bitwise operator '{op}' needs integer operands, got {ct.name}")
    x, y = _up(a), _up(b)
    if op == "and":
        return _down(x & y, ct)
    if op == "or":
        return _down(x | y, ct)
    if op == "xor":
        return _down(x ^ y, ct)
    # shifts: an amount outside [0, bits) (a negative one read as unsigned) clamps to the width,
    # as PTX's shl / shr do and the generated code's nt_shl / nt_shr
    y = torch.where(y < 0, ct.bits, y.clamp(max=ct.bits))
    if op == "shl":
        return _down(torch.where(y >= 64, torch.zeros_like(x), x << y.clamp(max=63)), ct)
    if ct.kind == "uint" and ct.bits == 64:  # logical shift of a bit pattern
        s = y.clamp(max=63)
        r = (x >> s) & ((torch.ones_like(s) << (64 - s).clamp(max=63)) - 1)
        r = torch.where(s == 0, x, r)
        return Tensor(torch.where(y >= 64, torch.zeros_like(r), r), ct)
    return _down(x >> y.clamp(max=63), ct)  # arithmetic for signed, logical for uint < 64


def add(a, b) -> Tensor:
    a, b = unwrap(a), unwrap(b)
    if isinstance(a, Tensor) and a.dtype.is_ptr():
        from .memory import offset_pointer
        return offset_pointer(a, b, 1)
    if isinstance(b, Tensor) and b.dtype.is_ptr():
        from .memory import offset_pointer
        return offset_pointer(b, a, 1)
    a, b, ct = promote(a, b)
    return _down(_up(a) + _up(b), ct)


def sub(a, b) -> Tensor:
    a, b = unwrap(a), unwrap(b)
    if isinstance(a, Tensor) and a.dtype.is_ptr():
        from .memory import offset_pointer
        return offset_pointer(a, b, -1)
    a, b, ct = promote(a, b)
    return _down(_up(a) - _up(b), ct)


def truediv(a, b) -> Tensor:
    """`/`: true division; integers are divided in fp32 (Triton)."""
    a, b, ct = promote(a, b, div_or_mod=True)
    if not ct.is_floating():
        a, b, ct = cast(a, D.float32), cast(b, D.float32), D.float32
    return _down(_up(a) / _up(b), ct)


_CMP = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq, "ne": torch.ne}


def compare(a, b, op) -> Tensor:
    a, b = unwrap(a), unwrap(b)
    if a is None or b is None:
        return (a is b) if op == "eq" else (a is not b)
    pa = isinstance(a, Tensor) and a.dtype.is_ptr()
    pb = isinstance(b, Tensor) and b.dtype.is_ptr()
    if pa or pb:
        if not (pa and pb and a.buf is b.buf):
            raise TypeError("pointers can only be compared with pointers into the same tensor")
        return Tensor(_CMP[op](a.data, b.data), D.int1)
    a, b, ct = promote(a, b)
    if ct is D.uint64:
        return Tensor(_CMP[op](_ordered(a), _ordered(b)), D.int1)
    return Tensor(_CMP[op](a.data, b.data), D.int1)
