"""What a runtime kernel argument contributes to the specialization key: its kind (int width,
equal to 1, divisible by 16; a tensor's dtype, device, 16-byte alignment and size class) and the
value the launch packs. Called by the generated launch function on a miss of its fast branch
(newt/jit.py) and by the specializer (newt/runtime/specialize.py).
"""
from __future__ import annotations

from .language import constexpr as _constexpr

_INT32 = (-2**31, 2**31)


def classify(v, dns: bool):
    """(key part, value passed) of a runtime argument that is not exactly a torch.Tensor."""
    if v.__class__ is bool:
        return ("i1",), v
    if v.__class__ is int:
        if _INT32[0] <= v < _INT32[1]:
            t = "i32"
        elif -2**63 <= v < 2**63:
            t = "i64"
        elif 0 <= v < 2**64:
            t = "u64"
        else:
            return ("bad", "int out of 64-bit range"), v
        # 0 is not "divisible by 16" here (Triton counts it): a zero row stride (a broadcast
        # operand) must not be taken for a TMA-able one (passes/tc/dot_tma.py)
        return ((t,) if dns else (t, v == 1, v % 16 == 0 and v != 0)), v
    if v.__class__ is float:
        return ("fp32",), v
    if isinstance(v, _constexpr):
        return classify(v.value, dns)
    import torch
    if isinstance(v, torch.Tensor):  # subclasses (nn.Parameter, ...)
        p = v.data_ptr()
        if dns:
            return (v.dtype, v.get_device()), p
        return (v.dtype, v.get_device(), not p & 15, v.numel() >= 2**31), p
    if isinstance(v, bool):
        return ("i1",), bool(v)
    if isinstance(v, int):
        return classify(int(v), dns)
    if isinstance(v, float):
        return ("fp32",), float(v)
    if v is None:   # as in Triton: a None argument is the constexpr None (packed as an unused 0)
        return (None,), 0
    from .tensor_like import classify as tensor_like   # data_ptr() + dtype, DLPack objects
    return tensor_like(v, dns) or (("bad", type(v).__name__), None)
