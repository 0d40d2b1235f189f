"""`x.to(dtype, fp_downcast_rounding=...)` / `nl.cast(...)` (frontend, called from builtins.py
and values.py): Triton's rounding modes of a float converted to a narrower float, "rtne" (to
nearest even, the default) and "rtz" (toward zero). "rtz" is built from ops every path has: the
nearest value, stepped one unit toward zero (its bits minus one) where it lies farther from zero
than the input; so an input beyond the range gives the largest finite value, NaN stays NaN. The
interpreter computes the same (newt/interpreter/ops.py, cast_)."""
from __future__ import annotations

from .. import dtypes as D
from . import semantic
from .semantic import error
from .values import Tensor

_BITS = {8: D.int8, 16: D.int16, 32: D.int32}


def cast(b, x, dt, bitcast=False, fp_downcast_rounding=None) -> Tensor:
    r = semantic.cast(b, x, dt, bitcast)
    mode = getattr(fp_downcast_rounding, "value", fp_downcast_rounding)
    if mode is None:
        return r
    if mode not in ("rtne", "rtz"):
        error(f'fp_downcast_rounding must be "rtne" or "rtz", got {mode!r}')
    dt = semantic.check_dtype(dt)
    if bitcast or not (isinstance(x, Tensor) and x.dtype.is_floating() and dt.is_floating()
                       and x.dtype.bits > dt.bits):
        error("fp_downcast_rounding is only for a float converted to a narrower float")
    if mode == "rtne":
        return r
    up = semantic.cast(b, r, x.dtype)                    # exact
    farther = semantic.binary(b, "gt", semantic.abs_(b, up), semantic.abs_(b, x))
    bits = semantic.cast(b, r, _BITS[dt.bits], bitcast=True)
    stepped = semantic.cast(b, semantic.binary(b, "sub", bits, 1), dt, bitcast=True)
    return semantic.where(b, farther, stepped, r)
