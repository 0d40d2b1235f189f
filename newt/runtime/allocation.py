"""`newt.set_allocator`: where kernels that need global scratch memory would get it.

Triton asks the allocator set here for the memory of tensor descriptors made inside a kernel
(`tl.make_tensor_descriptor`, which encodes a TMA descriptor on the device). newt lowers those
descriptors to pointer arithmetic and masks in the frontend (frontend/descriptors.py), so no
kernel needs scratch memory: the allocator is kept, so that programs written for Triton run
unchanged, and returned by `get_allocator`, but newt never calls it.
"""
from __future__ import annotations

_allocator = None


def set_allocator(allocator):
    """Set the function `allocator(size, alignment, stream) -> tensor` Triton uses for global
    scratch memory. newt needs none (its tensor descriptors are pointers and masks), so it is
    only kept: accepted for Triton's programs."""
    global _allocator
    _allocator = allocator


def get_allocator():
    return _allocator
