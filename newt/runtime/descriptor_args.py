"""Tensor-descriptor arguments on the launch slow path (runtime/specialize.py calls it).

A host `newt.tools.tensor_descriptor.TensorDescriptor` argument becomes the compile inputs of
its parameter (newt/descriptors.py, "as a parameter"): the signature entry
"tensordesc<fp16[64,64]>" with the base tensor's alignment and size facts, and one int entry
per dimension's size and stride, typed and specialized like an int argument (i64 for a tensor
of 2**31 elements or more, where the offsets need 64 bits).
"""
from __future__ import annotations

from ..descriptors import part_names, signature_of
from ..errors import LaunchError


def is_descriptor(v) -> bool:
    from ..tools.tensor_descriptor import TensorDescriptor
    return isinstance(v, TensorDescriptor)


def specialize(name: str, p: str, desc, signature: dict, spec: dict, devices: dict,
               allow_cpu: bool):
    """Fill signature / spec / devices for descriptor argument `p` of kernel `name`."""
    import torch

    from .. import dtypes
    from ..jit import _classify
    base = desc.base
    if not isinstance(base, torch.Tensor):
        raise LaunchError(f"kernel {name}: argument '{p}' is a TensorDescriptor whose base is a "
                          f"{type(base).__name__}, not a tensor")
    if base.device.type != "cuda" and not allow_cpu:
        raise LaunchError(f"kernel {name}: argument '{p}' is a TensorDescriptor of a tensor on "
                          f"{base.device}; newt kernels run on CUDA tensors (NEWT_INTERPRET=1 "
                          "runs them on the CPU)")
    devices.setdefault(base.device, p)
    try:
        dt = dtypes.from_torch(base.dtype)
    except (KeyError, ValueError, TypeError):
        raise LaunchError(f"kernel {name}: argument '{p}' is a TensorDescriptor of dtype "
                          f"{base.dtype}, which newt does not support") from None
    _, _, aligned, large = _classify(base, False)[0]
    signature[p] = signature_of(dt.short, desc.block_shape, desc.padding)
    spec[p] = dict(divisible_by_16=bool(aligned), equal_to_1=False, large=bool(large))
    rank = len(desc.shape)
    for sub, v in zip(part_names(p, rank), list(desc.shape) + list(desc.strides)):
        kp, _ = _classify(int(v), False)
        if kp[0] not in ("i32", "i64"):
            raise LaunchError(f"kernel {name}: argument '{p}': shape and strides must be 64-bit "
                              f"ints, got {v}")
        signature[sub] = "i64" if large else kp[0]
        spec[sub] = dict(divisible_by_16=bool(kp[2]), equal_to_1=bool(kp[1]), large=False)
