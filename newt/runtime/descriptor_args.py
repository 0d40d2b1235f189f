"""Tensor-descriptor arguments on the launch slow path (runtime/specialize.py calls it).

A host `newt.tools.tensor_descriptor.TensorDescriptor` argument becomes the compile inputs of
its parameter (newt/descriptors.py, "as a parameter"): the signature entry
"tensordesc<fp16[64,64]>" with the base tensor's alignment and size facts, and one int entry
per dimension's size and stride, typed and specialized like an int argument (i64 for a tensor
of 2**31 elements or more, where the offsets need 64 bits). `launch_code` writes the part of
jit.py's generated launch function that keys and packs such an argument.
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
    from ..arg_kinds import classify as _classify
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


def launch_code(a: str, i: int, rank: int):
    """(statements, key expression, number of ints) of TensorDescriptor parameter `a` in the
    generated launch function: base pointer `_n_v{i}`, then `_n_v{i}_{k}` for each size and
    stride (newt/descriptors.py's order), keyed like tensors and ints, with the block shape
    and padding."""
    n = 2 * rank
    code = [f"if {a}.__class__ is not _n_TD or len({a}.shape) != {rank}:",
            f"    _n_self._not_descriptor({a!r}, {a}, {rank})",
            f"_n_b{i} = {a}.base",
            f"_n_v{i} = _n_b{i}.data_ptr()"]
    code += [f"_n_v{i}_{j} = {a}.shape[{j}]" for j in range(rank)]
    code += [f"_n_v{i}_{rank + j} = {a}.strides[{j}]" for j in range(rank)]
    ints = [f"(1 if {x} == 1 else 0 if {x} & 15 or not {x} else 16) if -2147483648 <= {x} <= "
            f"2147483647 else _n_classify({x}, False)[0]" for x in
            (f"_n_v{i}_{k}" for k in range(n))]
    key = (f"_n_b{i}.dtype, _n_b{i}.get_device(), not _n_v{i} & 15, _n_b{i}.nbytes > "
           f"2147483647 and _n_b{i}.numel() > 2147483647, tuple({a}.block_shape), {a}.padding, "
           + ", ".join(f"({x})" for x in ints))
    return code, key, n
