"""Tensor descriptors and block pointers on the interpreter: newt/descriptors.py's lowering over
the interpreter's own operations, so a kernel computes what its compiled form computes."""
from __future__ import annotations

from .. import descriptors as DS
from ..errors import CompilationError
from . import context, memory, ops


def _error(msg):
    import linecache

    from ..ir.core import Loc
    f = context.user_frame()
    loc = None if f is None else Loc(f.f_code.co_filename, f.f_lineno, 0, linecache.getline(
        f.f_code.co_filename, f.f_lineno), f.f_code.co_name)
    raise CompilationError(msg, loc)


OPS = DS.Ops(
    arange=lambda n: ops.arange(0, n),
    load=lambda p, m, o: memory.load(p, m, o if m is not None else None),
    store=lambda p, v, m: memory.store(p, v, m),
    atomic_add=lambda p, v, m: memory.atomic_add(p, v, m),
    error=_error,
    is_float=lambda t: t.dtype.element_ty.is_floating(),
    # always both bounds: where the compiler proves an offset >= 0 the lower one is vacuous
    nonneg=lambda x: False)


def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    return DS.TensorDescriptor(OPS, base, shape, strides, block_shape, padding_option)


def from_host(desc, pointer):
    """The kernel-side descriptor of a host TensorDescriptor whose base became `pointer`."""
    return DS.TensorDescriptor(OPS, pointer, [int(s) for s in desc.shape],
                               [int(s) for s in desc.strides], list(desc.block_shape),
                               desc.padding)


def make_block_ptr(base, shape, strides, offsets, block_shape, order=None):
    return DS.make_block_ptr(OPS, base, shape, strides, offsets, block_shape, order)


def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    if isinstance(pointer, DS.BlockPointer):
        if mask is not None or other is not None:
            _error("load of a block pointer takes boundary_check and padding_option, not "
                   "mask / other")
        return pointer.load(boundary_check, padding_option)
    if boundary_check or padding_option:
        _error("load: boundary_check / padding_option apply to block pointers "
               "(nl.make_block_ptr), not to blocks of pointers")
    return memory.load(pointer, mask, other, cache_modifier=cache_modifier,
                       eviction_policy=eviction_policy, volatile=volatile)


def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    if isinstance(pointer, DS.BlockPointer):
        if mask is not None:
            _error("store through a block pointer takes boundary_check, not a mask")
        return pointer.store(value, boundary_check)
    if boundary_check:
        _error("store: boundary_check applies to block pointers (nl.make_block_ptr)")
    return memory.store(pointer, value, mask, cache_modifier=cache_modifier,
                        eviction_policy=eviction_policy)


IMPLS = dict(
    make_tensor_descriptor=make_tensor_descriptor,
    load_tensor_descriptor=lambda desc, offsets: desc.load(offsets),
    store_tensor_descriptor=lambda desc, offsets, value: desc.store(offsets, value),
    make_block_ptr=make_block_ptr,
    advance=lambda base, offsets: DS.advance(OPS, base, offsets),
    load=load, store=store)
