"""load / store / atomics: pointer, mask and value rules (part of the frontend's semantic layer).

The pointer block fixes the shape: `mask` and `other` (and a stored value) are broadcast to it
(a scalar pointer is first broadcast to a block mask's shape). `other` and stored values are cast
to the pointee type, as Triton does. Masks must be booleans.
"""
from __future__ import annotations

from .. import dtypes as D
from .semantic import broadcast_shapes, broadcast_to_shape, cast, error, to_tensor
from .values import Tensor

_CACHE = {"": "", ".ca": "ca", ".cg": "cg", ".cv": "cv", ".cs": "cs", ".wb": "wb", ".wt": "wt"}
_EVICT = {"": "", "evict_first": "evict_first", "evict_last": "evict_last",
          "evict_normal": ""}
_SEMS = ("acq_rel", "acquire", "release", "relaxed")
_SCOPES = ("gpu", "cta", "sys")


def _pointer(b, ptr, what) -> Tensor:
    if not isinstance(ptr, Tensor) or not ptr.dtype.is_ptr():
        got = ptr.dtype.name if isinstance(ptr, Tensor) else repr(ptr)
        error(f"{what} needs a pointer (or a block of pointers) as its first argument, got {got}")
    return ptr


def _mask(b, mask, ptr: Tensor, what):
    """Returns (ptr, mask) with mask an i1 block of ptr's shape, or None."""
    if mask is None or mask is True:
        return ptr, None
    if mask is False:
        mask = to_tensor(b, False)
    if not isinstance(mask, Tensor):
        error(f"{what}: mask must be a boolean block, got {mask!r}")
    if not mask.dtype.is_bool():
        error(f"{what}: mask must be a boolean (i1) block, got {mask.dtype.name} "
              f"(compare it, e.g. mask != 0)")
    if len(mask.shape) > len(ptr.shape) or not ptr.is_block():
        shape = broadcast_shapes(ptr.shape, mask.shape)
        ptr = broadcast_to_shape(b, ptr, shape)
    try:
        mask = broadcast_to_shape(b, mask, ptr.shape)
    except Exception:
        error(f"{what}: mask of shape {list(mask.shape)} does not broadcast to the pointer "
              f"block's shape {list(ptr.shape)}")
    return ptr, mask


def _value(b, val, ptr: Tensor, what, name="value") -> Tensor:
    val = to_tensor(b, val, ptr.dtype.element_ty) if not isinstance(val, Tensor) else val
    if val.is_block() and len(val.shape) > len(ptr.shape):
        error(f"{what}: {name} of shape {list(val.shape)} does not fit the pointer block's shape "
              f"{list(ptr.shape)}")
    val = cast(b, val, ptr.dtype.element_ty)
    return broadcast_to_shape(b, val, ptr.shape)


def load(b, pointer, mask=None, other=None, boundary_check=(), padding_option="",
         cache_modifier="", eviction_policy="", volatile=False) -> Tensor:
    ptr = _pointer(b, pointer, "load")
    if boundary_check or padding_option:
        error("load: boundary_check / padding_option apply to block pointers "
              "(nl.make_block_ptr), not to blocks of pointers")
    ptr, m = _mask(b, mask, ptr, "load")
    o = None
    if other is not None:
        if m is None and mask is None:
            error("load: `other` needs a `mask` (other is what masked-off elements read)")
        o = _value(b, other, ptr, "load", "other")
    if cache_modifier not in _CACHE:
        error(f"load: unknown cache_modifier {cache_modifier!r} (one of {list(_CACHE)})")
    if eviction_policy not in _EVICT:
        error(f"load: unknown eviction_policy {eviction_policy!r} (one of {list(_EVICT)})")
    if m is None:
        o = None
    return Tensor(b.load(ptr.v, m.v if m is not None else None, o.v if o is not None else None,
                         cache=_CACHE[cache_modifier], evict=_EVICT[eviction_policy],
                         volatile=bool(volatile)), b)


def store(b, pointer, value, mask=None, boundary_check=(), cache_modifier="",
          eviction_policy=""):
    ptr = _pointer(b, pointer, "store")
    if boundary_check:
        error("store: boundary_check applies to block pointers (nl.make_block_ptr)")
    if isinstance(value, Tensor) and value.is_block() and not ptr.is_block():
        error(f"store: cannot store a block of shape {list(value.shape)} through a scalar "
              f"pointer (make the pointer a block: ptr + offsets)")
    ptr, m = _mask(b, mask, ptr, "store")
    v = _value(b, value, ptr, "store")
    if cache_modifier not in _CACHE:
        error(f"store: unknown cache_modifier {cache_modifier!r}")
    if eviction_policy not in _EVICT:
        error(f"store: unknown eviction_policy {eviction_policy!r}")
    b.store(ptr.v, v.v, m.v if m is not None else None, cache=_CACHE[cache_modifier],
            evict=_EVICT[eviction_policy])
    return None


def atomic(b, kind: str, pointer, val, mask=None, sem=None, scope=None, cmp=None) -> Tensor:
    what = f"atomic_{kind}"
    ptr = _pointer(b, pointer, what)
    et = ptr.dtype.element_ty
    sem = sem or "acq_rel"
    scope = scope or "gpu"
    if sem not in _SEMS:
        error(f"{what}: sem must be one of {_SEMS}, got {sem!r}")
    if scope not in _SCOPES:
        error(f"{what}: scope must be one of {_SCOPES}, got {scope!r}")
    if kind in ("and", "or", "xor") and not et.is_int():
        error(f"{what} needs an integer pointee type, got {et.name}")
    if kind == "add" and et.is_bool():
        error(f"{what} is not defined on bool")
    if et in (D.int8, D.uint8, D.int16, D.uint16, D.int1) and kind != "xchg":
        error(f"{what} is not supported on {et.name} (use 32- or 64-bit types)")
    if et.is_fp8():
        error(f"{what} is not supported on {et.name} (use 32- or 64-bit types)")
    # a scalar pointer with a block value/mask: broadcast the pointer (every element hits it)
    shape = ptr.shape
    for extra in (val, cmp, mask):
        if isinstance(extra, Tensor):
            shape = broadcast_shapes(shape, extra.shape)
    ptr = broadcast_to_shape(b, ptr, shape)
    if kind == "cas":
        c = _value(b, cmp, ptr, what, "cmp")
        v = _value(b, val, ptr, what, "val")
        return Tensor(b.atomic("cas", ptr.v, v.v, cmp=c.v, sem=sem, scope=scope), b)
    ptr, m = _mask(b, mask, ptr, what)
    v = _value(b, val, ptr, what, "val")
    return Tensor(b.atomic(kind, ptr.v, v.v, m.v if m is not None else None, sem=sem,
                           scope=scope), b)
