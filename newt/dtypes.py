"""Element types, shared by every stage: the frontend types values with them, the interpreter maps
them to torch dtypes, codegen spells them in C, the JIT classifies arguments into them.

Promotion follows Triton's rules (`computation_type`), so that a kernel means the same thing here
as it does there. Python numbers are "weak": they adopt the kind of the block they meet unless
their own kind is higher (bool < uint < int < float), as in PyTorch.
"""
from __future__ import annotations

import torch


class dtype:
    """A scalar element type. Instances are singletons: compare with `is` or `==`."""

    __slots__ = ("name", "kind", "bits", "cname", "short")

    def __init__(self, name: str, kind: str, bits: int, cname: str, short: str):
        self.name, self.kind, self.bits, self.cname, self.short = name, kind, bits, cname, short

    # kind order used by promotion: bool < uint < int < float
    _KIND_RANK = {"bool": 0, "uint": 1, "int": 2, "float": 3}

    @property
    def kind_rank(self) -> int:
        return self._KIND_RANK[self.kind]

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def is_floating(self) -> bool:
        return self.kind == "float"

    def is_fp8(self) -> bool:
        return self.kind == "float" and self.bits == 8

    def is_int(self) -> bool:  # bool counts as an integer of width 1, as in Triton
        return self.kind in ("int", "uint", "bool")

    def is_signed(self) -> bool:
        return self.kind == "int"

    def is_bool(self) -> bool:
        return self.kind == "bool"

    def is_ptr(self) -> bool:
        return False

    def to_torch(self) -> torch.dtype:
        return _TO_TORCH[self]

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __reduce__(self):  # pickles as the singleton (autotune workers, disk caches)
        return (from_name, (self.name,))


class pointer_type(dtype):
    """Pointer to global memory holding `element_ty` values (Triton's `*fp32`)."""

    __slots__ = ("element_ty",)
    _cache: dict = {}

    def __new__(cls, element_ty: dtype):
        if element_ty not in cls._cache:
            obj = object.__new__(cls)
            dtype.__init__(obj, f"pointer<{element_ty.name}>", "ptr", 64,
                           f"{element_ty.cname}*", "*" + element_ty.short)
            obj.element_ty = element_ty
            cls._cache[element_ty] = obj
        return cls._cache[element_ty]

    def __init__(self, element_ty):  # state set once in __new__
        pass

    def is_ptr(self) -> bool:
        return True

    def is_int(self) -> bool:
        return False

    def __reduce__(self):
        return (pointer_type, (self.element_ty,))


int1 = dtype("int1", "bool", 1, "bool", "i1")
int8 = dtype("int8", "int", 8, "int8_t", "i8")
int16 = dtype("int16", "int", 16, "int16_t", "i16")
int32 = dtype("int32", "int", 32, "int32_t", "i32")
int64 = dtype("int64", "int", 64, "int64_t", "i64")
uint8 = dtype("uint8", "uint", 8, "uint8_t", "u8")
uint16 = dtype("uint16", "uint", 16, "uint16_t", "u16")
uint32 = dtype("uint32", "uint", 32, "uint32_t", "u32")
uint64 = dtype("uint64", "uint", 64, "uint64_t", "u64")
float16 = dtype("float16", "float", 16, "__half", "fp16")
bfloat16 = dtype("bfloat16", "float", 16, "__nv_bfloat16", "bf16")
float32 = dtype("float32", "float", 32, "float", "fp32")
float64 = dtype("float64", "float", 64, "double", "fp64")
# 8-bit floats (Triton's names): e4m3 without infinities, max 448 (torch.float8_e4m3fn), and
# e5m2, max 57344 (torch.float8_e5m2). Loads, stores, casts, `where` and nl.dot; arithmetic
# needs a cast to a wider float first, as in Triton.
float8e4nv = dtype("float8e4nv", "float", 8, "u8", "fp8e4nv")
float8e5 = dtype("float8e5", "float", 8, "u8", "fp8e5")
FP8 = (float8e4nv, float8e5)

ALL = (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
       float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL + FP8}
_BY_NAME.update(bool=int1, float=float32, half=float16, double=float64)
_BY_SHORT = {d.short: d for d in ALL + FP8}
_BY_SHORT.update(bf16=bfloat16, b1=int1)

_TO_TORCH = {
    int1: torch.bool, int8: torch.int8, int16: torch.int16, int32: torch.int32,
    int64: torch.int64, uint8: torch.uint8, uint16: torch.uint16, uint32: torch.uint32,
    uint64: torch.uint64, float16: torch.float16, bfloat16: torch.bfloat16,
    float32: torch.float32, float64: torch.float64,
    float8e4nv: torch.float8_e4m3fn, float8e5: torch.float8_e5m2,
}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}


def from_name(name: str) -> dtype:
    return _BY_NAME[name]


def from_torch(t: torch.dtype) -> dtype:
    try:
        return _FROM_TORCH[t]
    except KeyError:
        raise TypeError(f"newt has no element type for torch dtype {t}") from None


def from_signature(s: str) -> dtype:
    """Parse Triton's signature spelling: 'fp32', 'i32', '*fp16', 'u8', 'i1'."""
    s = s.strip()
    if s.startswith("*"):
        return pointer_type(from_signature(s[1:]))
    if s in _BY_SHORT:
        return _BY_SHORT[s]
    if s in _BY_NAME:
        return _BY_NAME[s]
    raise ValueError(f"unknown type {s!r} in signature (expected e.g. 'fp32', 'i32', '*fp16')")


def of_python_scalar(v) -> dtype:
    """The type Triton gives a Python number: bool -> int1, int -> int32/int64/uint64, float -> fp32."""
    if isinstance(v, bool):
        return int1
    if isinstance(v, int):
        if -2**31 <= v < 2**31:
            return int32
        if -2**63 <= v < 2**63:
            return int64
        if 0 <= v < 2**64:
            return uint64
        raise OverflowError(f"integer {v} does not fit in 64 bits")
    if isinstance(v, float):
        return float32
    raise TypeError(f"{type(v).__name__} is not a number")


def integer_promote(a: dtype, b: dtype) -> dtype:
    if a.kind == b.kind or (a.is_bool() and b.is_bool()):
        return a if a.bits >= b.bits else b
    if a.is_bool():
        return b
    if b.is_bool():
        return a
    if a.kind == "uint":
        return a if a.bits >= b.bits else b
    return b if b.bits >= a.bits else a


def computation_type(a: dtype, a_weak: bool, b: dtype, b_weak: bool, div_or_mod: bool = False) -> dtype:
    """The type both operands of a binary arithmetic op are converted to (Triton's rules).

    `*_weak` marks a Python number (a constexpr literal): it does not widen a block of the same or a
    higher kind, so `x_fp16 * 2.0` stays fp16 and `i8_block + 1` stays int8.
    """
    if a_weak != b_weak:
        scalar, tensor = (a, b) if a_weak else (b, a)
        # signed and unsigned ints are one kind for a weak Python int (Triton's KIND.INTEGRAL,
        # PyTorch's category): uint8_block + 1 stays uint8
        same_int_kind = scalar.kind in ("int", "uint") and tensor.kind in ("int", "uint")
        if scalar.kind_rank <= tensor.kind_rank or same_int_kind:
            if div_or_mod and tensor in (float16, bfloat16):
                return float32
            return tensor
    if float64 in (a, b):
        return float64
    if float32 in (a, b):
        return float32
    # fp16 is checked before bf16, as Triton does: fp16 + bf16 is fp16 (PyTorch would say fp32)
    if float16 in (a, b):
        return float32 if div_or_mod else float16
    if a is bfloat16 and b is bfloat16:
        return float32 if div_or_mod else bfloat16
    if bfloat16 in (a, b):
        # bf16 with an integer block or fp8: fp32 in Triton (PyTorch keeps bf16 with integers)
        return float32
    if a.is_fp8() and b.is_fp8():
        return a if a is b else float16
    if not (a.is_int() and b.is_int()):
        raise TypeError(f"unexpected operand types {a} and {b}")
    if div_or_mod and a.is_signed() != b.is_signed() and not (a.is_bool() or b.is_bool()):
        raise TypeError(f"cannot use /, // or % with {a} and {b}: they have different signedness; "
                        "cast them to the same signedness")
    return integer_promote(a, b)


def float_to_int(value: float, dt: dtype) -> int:
    """A Python float converted to the integer type `dt` as a runtime cast converts it (the
    GPU's cvt.rzi, and the interpreter's `cast`): truncated toward zero, saturated to 32 or 64
    bits, 8- and 16-bit results the low bits of the 32-bit one, NaN 0 (2^63's bits at 64 bits);
    to bool `value != 0`. So a constant folded by the frontend (`nl.full(.., 3e9, nl.int32)`,
    a load's `other`, a stored number) is what the same number computed at runtime gives."""
    if dt.is_bool():
        return int(value != 0)
    width = max(dt.bits, 32)
    if value != value:
        v = 1 << 63 if width == 64 else 0
    elif dt.kind == "uint":
        v = 0 if value <= 0 else min(int(value) if value != float("inf") else 1 << width,
                                     (1 << width) - 1)
    else:
        lo, hi = -(1 << width - 1), (1 << width - 1) - 1
        v = lo if value == float("-inf") else hi if value == float("inf") else \
            max(lo, min(hi, int(value)))
    v &= (1 << dt.bits) - 1
    return v - (1 << dt.bits) if dt.kind == "int" and v >> (dt.bits - 1) else v
