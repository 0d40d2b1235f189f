"""Tensor descriptors and block pointers: the kernel-side values and their lowering.

    desc = nl.make_tensor_descriptor(base, shape, strides, block_shape)
    tile = desc.load([m0, k0]);  desc.store([m0, n0], tile)
    p = nl.make_block_ptr(base, shape, strides, offsets, block_shape, order)
    tile = nl.load(p, boundary_check=(0, 1), padding_option="zero");  p = nl.advance(p, (0, BK))

Both become what a user would write by hand: a block of pointers `base + sum over axes of
(offset + arange(block)) * stride`, and a mask `0 <= offset + arange(block) < shape` on the
checked axes (every axis of a descriptor), with `other` the padding (0, or NaN for
padding_option="nan"). The lowering is written once, here, over a small table of operations
(`Ops`): the frontend's table builds IR (frontend/descriptors.py), the interpreter's runs torch
(interpreter/descriptors.py), so both compute the same thing, and the passes see the pointer and
mask form they already know (the masks pass drops bounds it proves, the tensor-core path turns
the loads of a matmul loop into its pipelined or TMA copies).

A block pointer is a tuple of its offsets, the only part `advance` changes, so that it can be
carried through loops and branches like any tuple of values; base, shape, strides, block shape
and order live on a class made for each `make_block_ptr` (they never change in a loop).
"""
from __future__ import annotations

import math

from .language.blocks import tensor_descriptor


class Ops:
    """The operations the lowering needs; each implementation fills them in."""

    def __init__(self, arange, load, store, atomic_add, error, is_float, nonneg):
        self.arange, self.load, self.store = arange, load, store
        self.atomic_add, self.error, self.is_float = atomic_add, error, is_float
        self.nonneg = nonneg    # is a runtime offset provably >= 0 (False when unsure)


def _ints(ops, v, what, rank=None):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if rank is not None and len(v) != rank:
        ops.error(f"{what} has {len(v)} entries, the descriptor has {rank} dimensions")
    return v


def _block_shape(ops, block_shape, what):
    bs = _ints(ops, block_shape, what)
    for n in bs:
        if not isinstance(n, int) or n < 1 or n & (n - 1):
            ops.error(f"{what} must be compile-time powers of two, got {list(bs)}")
    return bs


def _access(ops, base, shape, strides, offsets, block_shape, checked):
    """(pointer block, mask or None) of the block at `offsets`."""
    rank = len(block_shape)
    ptr, mask = base, None
    for d in range(rank):
        idx = offsets[d] + ops.arange(block_shape[d])
        if rank > 1:
            idx = idx[tuple(slice(None) if i == d else None for i in range(rank))]
        step = idx if (isinstance(strides[d], int) and strides[d] == 1) else idx * strides[d]
        ptr = ptr + step
        if d in checked:
            # the lower bound only where the offset may be negative: a mask term other than
            # `index < bound` keeps a matmul's loads off the tensor-core path's TMA ring
            off = offsets[d]
            known = ops.nonneg(off) if not isinstance(off, int) else off >= 0
            inside = (idx < shape[d]) if known else (idx >= 0) & (idx < shape[d])
            mask = inside if mask is None else mask & inside
    return ptr, mask


def _padding(ops, base, padding):
    if padding in ("", "zero", None):
        return 0
    if padding != "nan":
        ops.error(f"padding_option must be 'zero' or 'nan', got {padding!r}")
    if not ops.is_float(base):
        ops.error("padding_option='nan' needs a floating-point tensor")
    return math.nan


class TensorDescriptor(tensor_descriptor):
    """`nl.make_tensor_descriptor(...)` in a kernel, or a host TensorDescriptor argument."""
    __newt_kernel_value__ = True

    def __init__(self, ops, base, shape, strides, block_shape, padding="zero"):
        self.block_shape = _block_shape(ops, block_shape, "block_shape")
        rank = len(self.block_shape)
        self.shape = _ints(ops, shape, "shape", rank)
        self.strides = _ints(ops, strides, "strides", rank)
        self.ops, self.base, self.padding = ops, base, padding
        self.dtype = base.dtype.element_ty
        _padding(ops, base, padding)

    def _at(self, offsets):
        offs = _ints(self.ops, offsets, "offsets", len(self.block_shape))
        return _access(self.ops, self.base, self.shape, self.strides, offs, self.block_shape,
                       range(len(offs)))

    def load(self, offsets):
        """The block at `offsets`; elements outside the tensor read as the padding."""
        ptr, mask = self._at(offsets)
        return self.ops.load(ptr, mask, _padding(self.ops, self.base, self.padding))

    def store(self, offsets, value):
        """Store `value` (of the block shape) at `offsets`; elements outside are not written."""
        ptr, mask = self._at(offsets)
        return self.ops.store(ptr, value, mask)

    def atomic_add(self, offsets, value):
        ptr, mask = self._at(offsets)
        return self.ops.atomic_add(ptr, value, mask)


class BlockPointer(tuple):
    """`nl.make_block_ptr(...)`: the offsets, with the rest on the class (see the docstring)."""
    __newt_kernel_value__ = True
    ops = base = shape = strides = block_shape = order = None

    def load(self, boundary_check=(), padding_option=""):
        ptr, mask = _access(self.ops, self.base, self.shape, self.strides, tuple(self),
                            self.block_shape, self._checked(boundary_check))
        if mask is None:
            return self.ops.load(ptr, None, None)
        return self.ops.load(ptr, mask, _padding(self.ops, self.base, padding_option))

    def store(self, value, boundary_check=()):
        ptr, mask = _access(self.ops, self.base, self.shape, self.strides, tuple(self),
                            self.block_shape, self._checked(boundary_check))
        return self.ops.store(ptr, value, mask)

    def _checked(self, boundary_check):
        axes = _ints(self.ops, boundary_check, "boundary_check")
        for a in axes:
            if not isinstance(a, int) or not 0 <= a < len(self.block_shape):
                self.ops.error(f"boundary_check axes must be ints in [0, "
                               f"{len(self.block_shape)}), got {list(axes)}")
        return set(axes)

    def advance(self, offsets):
        offs = _ints(self.ops, offsets, "advance offsets", len(self))
        return type(self)(a + b for a, b in zip(self, offs))


def make_block_ptr(ops, base, shape, strides, offsets, block_shape, order=None):
    bs = _block_shape(ops, block_shape, "block_shape")
    rank = len(bs)
    cls = type("block_ptr", (BlockPointer,), dict(
        ops=ops, base=base, shape=_ints(ops, shape, "shape", rank),
        strides=_ints(ops, strides, "strides", rank), block_shape=bs,
        order=tuple(order) if order is not None else tuple(range(rank))[::-1]))
    return cls(_ints(ops, offsets, "offsets", rank))


def advance(ops, pointer, offsets):
    if not isinstance(pointer, BlockPointer):
        ops.error("nl.advance needs a block pointer (from nl.make_block_ptr)")
    return pointer.advance(offsets)


# ----------------------------------------------------------------------------- as a parameter
# A host TensorDescriptor argument is the parameter `name` ("tensordesc<fp16[64,64]>" in the
# signature: the base pointer, at the Python parameter's index) and 2 * rank ints, `name_shape0`
# ... `name_stride0` ..., specialized like int arguments (a stride of 1 becomes the constant 1).
# Their indices follow the Python parameters, descriptor by descriptor, in this order: the
# launcher packs them there (jit.py, runtime/specialize.py) and the frontend numbers them so.

def signature_of(elem_short: str, block_shape, padding: str = "zero") -> str:
    tail = ",nan" if padding == "nan" else ""
    return f"tensordesc<{elem_short}[{','.join(str(int(n)) for n in block_shape)}]{tail}>"


def parse_signature(s):
    """(element type spelling, block shape, padding) of a "tensordesc<...>" entry, else None."""
    if not isinstance(s, str) or not s.startswith("tensordesc<") or not s.endswith(">"):
        return None
    body = s[len("tensordesc<"):-1]
    elem, _, rest = body.partition("[")
    dims, _, tail = rest.partition("]")
    block = tuple(int(d) for d in dims.split(",") if d.strip())
    return elem.strip(), block, "nan" if tail.strip(", ") == "nan" else "zero"


def part_names(name: str, rank: int) -> list[str]:
    return [f"{name}_shape{j}" for j in range(rank)] + [f"{name}_stride{j}" for j in range(rank)]
