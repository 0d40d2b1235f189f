"""libdevice calls (newt/language/extra/cuda/libdevice.py) -> one `libdevice` op each (part of
the frontend's semantic layer).

The variant is chosen by the arguments' dtypes (`libdevice.choose`); the arguments are cast to
the variant's dtypes and broadcast to one shape; fp16 / bf16 arguments of a function whose
result has its argument's float type get the result rounded back to their 16-bit type.
"""
from __future__ import annotations

from .. import dtypes as D
from ..ir.builder import type_like
from ..language.extra.cuda import libdevice as LD
from .semantic import broadcast_all, cast, error, no_fp8, to_tensor
from .values import Tensor


def call(b, name: str, *args) -> Tensor:
    ts = [to_tensor(b, a) for a in args]
    for t in ts:
        if t.dtype.is_ptr():
            error(f"libdevice.{name} is not defined for pointers")
        no_fp8(t.dtype, f"libdevice.{name}")
    try:
        want, res, cfn = LD.choose(name, [t.dtype for t in ts])
    except TypeError as e:
        error(str(e))
    first = ts[0].dtype
    ts = broadcast_all(b, *[cast(b, t, w) for t, w in zip(ts, want)])
    op = b.create("libdevice", [t.v for t in ts], [type_like(ts[0].type, res)],
                  {"fn": name, "cfunc": cfn})
    r = Tensor(op.result, b)
    if res is want[0] and first in (D.float16, D.bfloat16):
        r = cast(b, r, first)
    return r


def _impl(name):
    def f(b, *args):
        return call(b, name, *args)
    f.__name__ = name
    return f


IMPLS = {"libdevice." + n: _impl(n) for n in LD.TABLE}
