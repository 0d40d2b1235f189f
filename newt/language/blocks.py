"""The kernel language's tensor descriptors and block pointers (part of `newt.language`, which
re-exports every name here; docstrings are the user reference, as in language.py).

Both are lowered to blocks of pointers and masks (newt/descriptors.py), so they compute on every
target what the same kernel written with pointer arithmetic computes, and take the same paths
through the compiler.
"""
from __future__ import annotations

from . import builtin


class tensor_descriptor:
    """The type of tensor descriptors inside a kernel (`isinstance(d, nl.tensor_descriptor)`):
    what `nl.make_tensor_descriptor` returns and what a host
    `newt.tools.tensor_descriptor.TensorDescriptor` argument becomes. Attributes `shape`,
    `strides`, `block_shape`, `dtype`; methods `load(offsets)`, `store(offsets, value)`,
    `atomic_add(offsets, value)`."""


# ----------------------------------------------------------------------------- tensor descriptors and block pointers

@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A descriptor of the tensor at `base` (a pointer argument) with `shape` and `strides`
    (ints, in elements; runtime values or constants), read and written in blocks of
    `block_shape` (compile-time powers of two). `desc.load([o0, o1, ...])` returns the block
    whose first element is at those offsets, elements outside the tensor (on any side) reading
    as 0 (NaN with `padding_option="nan"`); `desc.store(offsets, value)` writes the elements
    inside the tensor only; `desc.atomic_add(offsets, value)` adds them atomically. Lowered to
    a masked pointer access (newt/descriptors.py), which on sm_90a takes the tensor-core path's
    TMA copies where the pointer form would. Unlike Triton, newt needs no global scratch memory
    for it (`newt.set_allocator` is accepted and unused), and the last stride need not be 1."""


@builtin
def load_tensor_descriptor(desc, offsets):
    """`desc.load(offsets)`."""


@builtin
def store_tensor_descriptor(desc, offsets, value):
    """`desc.store(offsets, value)`."""


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order=None):
    """A block pointer: the block of `block_shape` (compile-time powers of two) at `offsets` in
    the tensor at `base` of `shape` and `strides` (in elements). Load and store it with
    `nl.load(p, boundary_check=(axes...), padding_option="zero" | "nan")` and
    `nl.store(p, value, boundary_check=(axes...))`: elements outside the tensor along the
    checked axes (on either side) read as the padding and are not written; the unchecked axes
    must be in bounds. Move it with `nl.advance`; it can be carried through loops. `order` is
    accepted and unused (newt picks memory layouts itself). Lowered to pointers and masks
    (newt/descriptors.py)."""


@builtin
def advance(base, offsets):
    """The block pointer `base` moved by `offsets` (one per dimension, in elements)."""
