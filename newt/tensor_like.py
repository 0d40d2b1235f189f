"""Kernel arguments that are not torch tensors but stand for one.

Sits beside the launch path, off its fast branch: jit.py's generated launch function sends every
argument that is not exactly a torch.Tensor or an int to `arg_kinds.classify`, which asks here last. Two
kinds are taken, as Triton takes them:

    an object with `data_ptr()` and a torch `dtype`   launched as a pointer to that dtype, on the
                                                       device its `device` attribute names (the
                                                       current CUDA device when it has none)
    a DLPack-capable object (`__dlpack__`: NumPy,      viewed as a tensor through torch.from_dlpack
    CuPy, JAX arrays ...)                              on every launch (convert it once yourself
                                                       on a hot path)

The interpreter (NEWT_INTERPRET=1) needs a tensor's extent, which a bare `data_ptr()` does not
give: it takes DLPack objects and refuses the others with an error naming the argument.
"""
from __future__ import annotations

import torch

_CPU = -1


def device_index(v) -> int:
    """Device index of a data_ptr() object (-1: the CPU), from its `device` attribute."""
    dev = getattr(v, "device", None)
    if dev is None:
        return torch.cuda.current_device() if torch.cuda.is_available() else _CPU
    if isinstance(dev, int):      # a bare index names a CUDA device, as torch.device(i) does
        return dev
    dev = torch.device(dev) if isinstance(dev, str) else dev
    if getattr(dev, "type", "cuda") != "cuda":
        return _CPU
    index = getattr(dev, "index", None)
    return torch.cuda.current_device() if index is None else index


def from_dlpack(v):
    """A tensor viewing a DLPack-capable object, or None when `v` is not one."""
    if not hasattr(v, "__dlpack__") or isinstance(v, torch.Tensor):
        return None
    try:
        return torch.from_dlpack(v)
    except (TypeError, ValueError, RuntimeError, BufferError):
        return None


def is_pointer_like(v) -> bool:
    return callable(getattr(v, "data_ptr", None)) and isinstance(getattr(v, "dtype", None),
                                                                 torch.dtype)


def classify(v, dns: bool):
    """(key part, value passed) of a tensor-like argument, or None when `v` is not one. The key
    part has a tensor's layout (dtype, device index, 16-byte aligned, 2**31+ elements)."""
    t = from_dlpack(v)
    if t is not None:
        v = t
        p = t.data_ptr()
        big = t.numel() >= 2**31
        dev = t.get_device()
    elif is_pointer_like(v):
        p = int(v.data_ptr())
        big = False    # no extent known: 32-bit offsets, as for a tensor below 2**31 elements
        dev = device_index(v)
    else:
        return None
    if dns:
        return (v.dtype, dev), p
    return (v.dtype, dev, not p & 15, big), p


def for_interpreter(name: str, value):
    """The tensor the interpreter runs on for a tensor-like argument; a LaunchError naming the
    argument for a data_ptr() object; None for any other value."""
    t = from_dlpack(value)
    if t is not None:
        return t
    if is_pointer_like(value):
        from .errors import LaunchError
        raise LaunchError(
            f"argument `{name}` is a {type(value).__name__} (data_ptr() and dtype, no extent): "
            "NEWT_INTERPRET=1 needs to know the memory it may read; pass a torch tensor or a "
            "DLPack-capable object")
    return None
