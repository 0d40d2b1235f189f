"""Pointers, loads, stores and atomics of the interpreter.

A pointer value is a `values.Tensor` of dtype pointer<T> whose data holds int64 element offsets
into a `Buffer`: the flat storage of one tensor argument, from its first element to the end of
its storage. Consumes pointer Tensors built by launch.py (one per tensor argument) and pointer
arithmetic; produces loaded values and writes through to the caller's torch tensors.

Masked-off lanes never touch memory. An active lane outside the buffer raises IndexError naming
the kernel, the source line, the program id, the offending offset and the argument, where the
GPU would read garbage or fault. A pointer made from an integer address (`addr.to(
nl.pointer_type(T))`) is the exception: it points into the whole address space, unchecked.

Spin loops: a program waiting for memory that another program changes (a spin lock taken with
atomic_cas or atomic_xchg, a flag read with a volatile load) runs correctly here when the other
program ran earlier, since programs run one at a time. When it did not (the lock is still held by
a program that has ended, the flag is set by a later program) nothing can change the memory, so
the loop would never end; the same access then keeps coming back with nothing written in
between, and after SPIN_LIMIT such repeats it raises an error naming the line instead of hanging.
"""
from __future__ import annotations

import ctypes

import torch

from .. import dtypes as D
from . import context
from ..errors import OutOfBoundsError
from .values import Tensor, cast, raw_torch, const, from_storage, to_storage, to_tensor, unwrap


class Buffer:
    """The memory behind one tensor argument, as a flat 1-D view of its storage."""

    __slots__ = ("flat", "name", "shape")

    def __init__(self, t: torch.Tensor, name: str):
        n = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
        flat = t.as_strided((max(n, 0),), (1,), t.storage_offset())
        self.flat = flat.view(raw_torch(D.from_torch(t.dtype)))
        self.name, self.shape = name, tuple(t.shape)


def pointer_to(t: torch.Tensor, name: str) -> Tensor:
    """The pointer value a tensor argument becomes: offset 0 into its Buffer."""
    return Tensor(torch.zeros((), dtype=torch.int64), D.pointer_type(D.from_torch(t.dtype)),
                  Buffer(t, name))


def offset_pointer(p: Tensor, offs, sign: int) -> Tensor:
    """`p + offs` / `p - offs`: offsets are integers, widened to 64 bits (as on the GPU)."""
    offs = to_tensor(offs)
    if not offs.dtype.is_int() or offs.dtype.is_bool():
        raise TypeError(f"pointer arithmetic needs integer offsets, got {offs.dtype.name}")
    return Tensor(p.data + offs.data if sign > 0 else p.data - offs.data, p.dtype, p.buf)


def pointer_cast(x: Tensor, dt) -> Tensor:
    """`x.to(dt)` where either side is a pointer: pointer to pointer, 64-bit integer address to
    pointer, pointer to its 64-bit address (the frontend's rule); anything else is an error."""
    if x.dtype.is_ptr() and dt.is_ptr():
        return reinterpret_pointer(x, dt)
    if dt.is_ptr() and x.dtype in (D.int64, D.uint64):
        return pointer_from_address(x, dt)
    if x.dtype.is_ptr() and dt in (D.int64, D.uint64):
        return Tensor(x.buf.flat.data_ptr() + x.data * x.dtype.element_ty.itemsize, dt)
    raise TypeError(f"cannot cast {x.dtype.name} to {dt.name}")


_MEMORY: dict = {}   # element dtype -> the process's address space as one Buffer of that type


def pointer_from_address(x: Tensor, dt) -> Tensor:
    """An integer address as a pointer (a table of the addresses of tensors the kernel was not
    given, as in a grouped GEMM). The interpreter cannot know which tensor holds the address,
    so the pointer is an offset into the whole address space: its accesses are not bounds-
    checked, as on the GPU. The address must be aligned to the element type."""
    elem = dt.element_ty
    size = elem.itemsize
    if bool((x.data % size != 0).any()):
        raise TypeError(f"an address cast to {dt.name} must be a multiple of {size}")
    buf = _MEMORY.get(elem)
    if buf is None:
        # a view of every byte below 2**48 (user-space addresses); nothing is read until used
        span = (ctypes.c_char * (1 << 48)).from_address(0)
        buf = _MEMORY[elem] = Buffer.__new__(Buffer)
        buf.flat = torch.frombuffer(span, dtype=raw_torch(elem))
        buf.name, buf.shape = "memory at an integer address", (buf.flat.numel(),)
    return Tensor(x.data // size, dt, buf)


def reinterpret_pointer(p: Tensor, dt) -> Tensor:
    """`p.to(nl.pointer_type(T))`: the same bytes seen as T (equal element sizes only)."""
    src, dst = p.dtype.element_ty, dt.element_ty
    if src.itemsize != dst.itemsize:
        raise TypeError(f"pointer casts between element sizes ({src.name} -> {dst.name}) are not "
                        "supported by the interpreter")
    buf = Buffer.__new__(Buffer)
    buf.flat, buf.name, buf.shape = p.buf.flat.view(raw_torch(dst)), p.buf.name, p.buf.shape
    return Tensor(p.data, dt, buf)


# ----------------------------------------------------------------------------- spin loops

SPIN_LIMIT = 1000   # repeats of one unproductive access (see the module docstring)


class _Spin:
    """The current program's last access that read without writing, and how often it repeated
    unchanged: the same access, the same offsets, no memory written since."""
    writes = 0          # memory writes so far (a store, an atomic that changed a value)
    last = None         # (what, storage, offsets, writes at the time)
    repeats = 0


def new_program():
    """Called by launch.py before each program: repeats never carry over between programs."""
    _Spin.last, _Spin.repeats = None, 0


def _wrote():
    _Spin.writes += 1


def _waited(what, p, offs):
    """An access that changed nothing (a failed compare-and-swap, an exchange with the value
    already there, a volatile load): count it, and stop a loop that can never end."""
    last = _Spin.last
    if (last is not None and last[0] == what and last[1] == p.buf.flat.data_ptr()
            and last[3] == _Spin.writes and torch.equal(last[2], offs)):
        _Spin.repeats += 1
        if _Spin.repeats >= SPIN_LIMIT:
            raise RuntimeError(
                f"{what} has read the same unchanged memory of argument `{p.buf.name}` "
                f"{SPIN_LIMIT} times in a row with nothing written in between: this program "
                "waits for another to change it, but the interpreter runs programs one at a "
                "time, so a lock held by a program that has ended (or a flag a later program "
                "sets) never changes and the loop would never end (on the GPU it would hang "
                "too unless a program running alongside changes it)")
        return
    _Spin.last, _Spin.repeats = (what, p.buf.flat.data_ptr(), offs.clone(), _Spin.writes), 0


def _check_pointer(p, what):
    p = unwrap(p)
    if not (isinstance(p, Tensor) and p.dtype.is_ptr()):
        raise TypeError(f"{what} needs a pointer (a tensor argument plus offsets), got "
                        f"{type(p).__name__ if not isinstance(p, Tensor) else p.dtype.name}")
    return p


def _mask_of(mask):
    mask = unwrap(mask)
    if mask is None:
        return None
    m = to_tensor(mask)
    return m.data if m.dtype.is_bool() else (m.data != 0)


def _bounds_check(p: Tensor, offs: torch.Tensor, what: str):
    n = p.buf.flat.numel()
    if offs.numel() == 0:
        return
    lo, hi = int(offs.min()), int(offs.max())
    if lo >= 0 and hi < n:
        return
    bad = lo if lo < 0 else hi
    loc = context.user_location()
    raise OutOfBoundsError(
        f"out-of-bounds {what} in kernel {context.current.kernel_name}, program id "
        f"{context.current.pid}: element offset {bad} is outside [0, {n}) of argument "
        f"`{p.buf.name}` ({p.dtype.element_ty.name}, shape {list(p.buf.shape)}); mask the "
        f"access or fix the offsets\n  at {loc}")


def _as_elem(x, elem) -> Tensor:
    """A value converted to the pointee type (Python numbers directly, so 0.1 rounds once)."""
    x = unwrap(x)
    return cast(x, elem) if isinstance(x, Tensor) else const(x, elem)


def _broadcast(*ts):
    ts = [t for t in ts if t is not None]
    return torch.broadcast_shapes(*(t.shape for t in ts))


def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    p = _check_pointer(pointer, "nl.load")
    elem = p.dtype.element_ty
    m = _mask_of(mask)
    other = unwrap(other)
    o = None if other is None else _as_elem(other, elem).data
    shape = _broadcast(p.data, m, o)
    offs = p.data.expand(shape)
    if m is None:
        _bounds_check(p, offs, "load")
        if volatile:
            _waited("nl.load(volatile=True)", p, offs)
        return Tensor(from_storage(p.buf.flat[offs], elem), elem)
    m = m.expand(shape)
    sel = offs[m]
    _bounds_check(p, sel, "load")
    if volatile:
        _waited("nl.load(volatile=True)", p, sel)
    fill = o if o is not None else const(0, elem).data
    out = fill.expand(shape).clone()
    out[m] = from_storage(p.buf.flat[sel], elem)
    return Tensor(out, elem)


def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    p = _check_pointer(pointer, "nl.store")
    elem = p.dtype.element_ty
    v = _as_elem(value, elem)
    m = _mask_of(mask)
    shape = _broadcast(p.data, m)
    if torch.broadcast_shapes(shape, v.data.shape) != shape:
        raise ValueError(f"nl.store: a value of shape {list(v.shape)} does not fit a pointer block "
                         f"of shape {list(shape)}")
    offs = p.data.expand(shape)
    data = to_storage(v.data.expand(shape), elem)
    if m is not None:
        m = m.expand(shape)
        offs, data = offs[m], data[m]
    _bounds_check(p, offs, "store")
    p.buf.flat[offs.reshape(-1)] = data.reshape(-1)
    _wrote()


# ----------------------------------------------------------------------------- atomics

def _rmw(what, pointer, val, mask, combine):
    """Read-modify-write at every active lane; returns the old values (0 where masked off).
    Programs run one after another, so each atomic is trivially atomic; lanes of one call that
    hit the same address are applied in element order, like a serialized GPU."""
    p = _check_pointer(pointer, what)
    elem = p.dtype.element_ty
    v = _as_elem(val, elem)
    m = _mask_of(mask)
    shape = _broadcast(p.data, v.data, m)
    offs = p.data.expand(shape)
    vals = v.data.expand(shape)
    result = torch.zeros(shape, dtype=v.data.dtype)
    if m is not None:
        m = m.expand(shape)
        offs, vals = offs[m], vals[m]
    else:
        m = torch.ones(shape, dtype=torch.bool)
    _bounds_check(p, offs, what)
    flat = p.buf.flat
    if offs.numel() == 0:
        return Tensor(result, elem)
    before = flat[offs].clone()   # (a 0-d offset indexes a view: the write would show)
    if torch.unique(offs).numel() == offs.numel():
        old = Tensor(from_storage(before, elem), elem)
        new = combine(old, Tensor(vals, elem))
        flat[offs] = to_storage(new.data, elem)
        result[m] = old.data
    else:
        olds = []
        for o, x in zip(offs.tolist(), vals.unbind(0) if vals.dim() else [vals]):
            # (a clone: flat[o] is a view, which the write below would change under `old`)
            old = Tensor(from_storage(flat[o].clone(), elem), elem)
            flat[o] = to_storage(combine(old, Tensor(x, elem)).data, elem)
            olds.append(old.data)
        result[m] = torch.stack(olds)
    if not _same_bits(before, flat[offs]):
        _wrote()
    elif what == "nl.atomic_xchg":     # a test-and-set lock that is held: a spin
        _waited(what, p, offs)
    return Tensor(result, elem)


def _register_nan(t: torch.Tensor, elem) -> torch.Tensor:
    """A 16-bit float as it is after a trip through a register on the GPU, where fp16 and bf16
    values live in fp32 (docs/language.md): a NaN becomes the canonical NaN (bits 0x7FFF), so
    atom.cas compares and writes those bits and returns them for a NaN it read."""
    if elem.name not in ("float16", "bfloat16") or not bool(torch.isnan(t).any()):
        return t
    canon = torch.tensor(0x7FFF, dtype=torch.int16).view(t.dtype)
    return torch.where(torch.isnan(t), canon, t)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.is_floating_point:
        kind = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        a, b = a.view(kind), b.view(kind)
    return torch.equal(a, b)


def _max(a, b):
    from .ops import maximum
    return maximum(a, b)


def _min(a, b):
    from .ops import minimum
    return minimum(a, b)


def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_add", pointer, val, mask, lambda a, b: a + b)


def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_max", pointer, val, mask, _max)


def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_min", pointer, val, mask, _min)


def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_xchg", pointer, val, mask, lambda a, b: b)


def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_and", pointer, val, mask, lambda a, b: a & b)


def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_or", pointer, val, mask, lambda a, b: a | b)


def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    return _rmw("nl.atomic_xor", pointer, val, mask, lambda a, b: a ^ b)


def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Where `*p == cmp` write `val`; returns the old values. Lanes run in element order. The
    comparison is of the bits, as the GPU's atom.cas compares them (so -0.0 does not match 0.0
    and a NaN matches the same NaN; a 16-bit float NaN is the canonical one, see
    `_register_nan`). `sem` and `scope` (checked by the frontend) order memory
    between programs running at once; here programs run one at a time, so every order holds."""
    p = _check_pointer(pointer, "nl.atomic_cas")
    elem = p.dtype.element_ty
    c, v = _as_elem(cmp, elem), _as_elem(val, elem)
    shape = _broadcast(p.data, c.data, v.data)
    offs, cs, vs = (t.expand(shape).reshape(-1) for t in (p.data, c.data, v.data))
    _bounds_check(p, offs, "nl.atomic_cas")
    cs, vs = _register_nan(cs, elem), _register_nan(vs, elem)
    flat, olds, swapped = p.buf.flat, [], False
    for o, ci, vi in zip(offs.tolist(), cs.unbind(0), vs.unbind(0)):
        # (a clone: a view would see the write below)
        old = _register_nan(from_storage(flat[o].clone(), elem), elem)
        if _same_bits(flat[o], to_storage(ci, elem)):
            flat[o] = to_storage(vi, elem)
            swapped = True
        olds.append(old)
    if swapped:
        _wrote()
    else:
        _waited("nl.atomic_cas", p, offs)
    return Tensor(torch.stack(olds).reshape(shape), elem)

