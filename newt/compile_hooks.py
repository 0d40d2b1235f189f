"""Where torch.compile enters newt: the functions dynamo traces in place of a launch.

A launch is host code dynamo cannot trace; torch_ops.py turns it into a custom op. The hook is
dynamo's `_torchdynamo_inline` attribute (the one torch.compile's own wrappers carry): set on
JITFunction.__getitem__ and friends, it makes dynamo inline the function it names instead, while
a plain launch runs the original untouched, with no check added to its path. These stubs import
torch_ops (and with it torch._dynamo) only once dynamo is tracing.
"""
from __future__ import annotations


def _getitem(jf, grid):
    from . import torch_ops
    return torch_ops.traced_getitem(jf, grid)


def _run(jf, *args, grid, **kwargs):
    from . import torch_ops
    return torch_ops.traced_run(jf, *args, grid=grid, **kwargs)


def _wrapper_getitem(wrapper, grid):
    from . import torch_ops
    return torch_ops.traced_wrapper_getitem(wrapper, grid)


def install():
    from .autotune import Autotuner, Heuristics
    from .jit import JITFunction
    JITFunction.__getitem__._torchdynamo_inline = _getitem
    JITFunction.run._torchdynamo_inline = _run
    for cls in (Autotuner, Heuristics):   # one function, inherited by both
        cls.__getitem__._torchdynamo_inline = _wrapper_getitem
