"""The namespaces beside `nl` as interpreted kernels see them: `nl.math`, `nl.extra.libdevice`
and `nl.extra.cuda.libdevice` (newt/language/math.py, newt/language/extra/), each a module of
interpreter functions (libdevice.py here), so `libdevice.asin(x)` and `nl.math.erf(x)` run
on CPU tensors. launch.py rebinds a kernel's references to the real modules to these twins.
"""
from __future__ import annotations

import types

from .. import language as L
from ..language.extra.cuda import libdevice as LD
from . import libdevice


def namespaces(nl) -> dict:
    """{id(real module): twin} for the modules under newt.language; sets nl.math / nl.extra."""
    ld = types.ModuleType("newt.language.extra.libdevice", "libdevice (interpreter)")
    for k, f in libdevice.FUNCTIONS.items():
        setattr(ld, k, f)
    cuda = types.ModuleType("newt.language.extra.cuda")
    cuda.libdevice = ld
    extra = types.ModuleType("newt.language.extra")
    extra.libdevice, extra.cuda = ld, cuda
    math = types.ModuleType("newt.language.math", "nl.math (interpreter)")
    for k in dir(L.math):
        if not k.startswith("_") and callable(getattr(L.math, k)):
            setattr(math, k, getattr(nl, k) if k in L.math.CORE else getattr(ld, k))
    nl.math, nl.extra = math, extra
    return {id(L.math): math, id(L.extra): extra, id(L.extra.cuda): cuda,
            id(L.extra.libdevice): ld, id(LD): ld}


def stubs() -> dict:
    """{id(stub of a libdevice function): its interpreter function}."""
    return {id(f): libdevice.FUNCTIONS[k] for k, f in LD.FUNCTIONS.items()}


# ----------------------------------------------------------------------------- Python builtins

def _minmax(which):
    import builtins

    from . import ops
    from .values import Tensor, unwrap
    pick, elementwise = (builtins.min, ops.minimum) if which == "min" else (builtins.max, ops.maximum)

    def f(*args, **kwargs):
        vals = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        vals = [unwrap(v) for v in vals]
        if kwargs or not any(isinstance(v, Tensor) for v in vals):
            return pick(*args, **kwargs)
        if len(vals) == 1:
            raise TypeError(f"Python's {which}() of one block is not a reduction inside a "
                            f"kernel; use nl.{which}(x, axis)")
        acc = vals[0]
        for v in vals[1:]:
            acc = elementwise(acc, v)
        return acc
    f.__name__ = which
    return f


def _print(*args, **kwargs):
    """Python print in a kernel: nl.device_print when a block or scalar value is printed."""
    import builtins

    from . import ops
    from .values import Tensor, unwrap
    vals = [unwrap(a) for a in args]
    if not any(isinstance(v, Tensor) for v in vals):
        return builtins.print(*vals, **kwargs)
    i = 0
    while i < len(vals) and isinstance(vals[i], str):
        i += 1
    prefix = " ".join(vals[:i])
    return ops.device_print(prefix + " " if prefix else "", *vals[i:])


PY_BUILTINS = {"min": _minmax("min"), "max": _minmax("max"), "print": _print}
