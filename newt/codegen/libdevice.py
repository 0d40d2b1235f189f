"""libdevice ops -> calls of CUDA's math functions and intrinsics, one per element.

The frontend chose the variant and cast the arguments to its dtypes (frontend/libdevice.py), so
the op's `cfunc` attr is the CUDA function to call (or a C template of the arguments, `{0}`).
"""
from __future__ import annotations

from .emitter import handles


def libdevice_expr(op, args: list) -> str:
    from .emitter import reg_type
    cfn = op.attrs["cfunc"]
    call = cfn.format(*args) if "{" in cfn else f"{cfn}({', '.join(args)})"
    r = op.results[0]
    if r.dtype.is_floating():
        return call
    return f"({reg_type(r.dtype)})({call})"


@handles("libdevice")
def _libdevice(em, op):
    lay = op.result.attrs.get("layout")
    em.elementwise(op, lambda s: libdevice_expr(op, [em.at(o, s, lay) for o in op.operands]))
