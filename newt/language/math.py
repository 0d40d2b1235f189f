"""`nl.math`: Triton's `tl.math` namespace. Its own names (exp, exp2, log, log2, cos, sin, sqrt,
sqrt_rn, rsqrt, abs, fdiv, div_rn, erf, floor, ceil, fma, umulhi) are the `nl.*` functions of those
names; every other libdevice function (newt/language/extra/cuda/libdevice.py) is reachable here
too, as `nl.math.asin`, where Triton has it only under `libdevice`."""
from __future__ import annotations

from . import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,  # noqa: F401
               rsqrt, sin, sqrt, sqrt_rn, umulhi)
from .extra.cuda.libdevice import FUNCTIONS as _LIBDEVICE

CORE = ("abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
        "log2", "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi")
for _n, _f in _LIBDEVICE.items():
    if _n not in CORE:
        globals()[_n] = _f
