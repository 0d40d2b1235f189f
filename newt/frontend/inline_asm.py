"""nl.inline_asm_elementwise -> one `inline_asm` op (part of the frontend's semantic layer;
name and docs in newt/language/lowlevel.py).

The arguments are broadcast to one shape; the constraints are checked here (one `=`-output per
result dtype, one input per argument, letters r / l / h / f / d), and `pack` (1, 2 or 4
elements per asm statement, each operand's `pack` elements together in one register of at most
32 bits, as Triton packs them), so codegen (newt/codegen/inline_asm.py) only moves values into
and out of their registers.
"""
from __future__ import annotations

from ..ir.builder import type_like
from .semantic import broadcast_all, check_dtype, error, to_tensor
from .values import Tensor

LETTERS = "rlhfd"


def inline_asm_elementwise(b, asm, constraints, args, dtype, is_pure, pack):
    if not isinstance(asm, str) or not isinstance(constraints, str):
        error("inline_asm_elementwise: asm and constraints must be compile-time strings")
    if pack not in (1, 2, 4):
        error(f"inline_asm_elementwise: pack={pack!r} is not supported (1, 2 or 4)")
    args = list(args) if isinstance(args, (tuple, list)) else [args]
    ts = broadcast_all(b, *[to_tensor(b, a) for a in args]) if args else []
    multi = isinstance(dtype, (tuple, list))
    dts = [check_dtype(d) for d in (dtype if multi else (dtype,))]
    cons = [c.strip() for c in constraints.split(",") if c.strip()]
    outs = [c for c in cons if c.startswith("=")]
    ins = [c for c in cons if not c.startswith("=")]
    if len(outs) != len(dts) or len(ins) != len(ts):
        error(f"inline_asm_elementwise: constraints {constraints!r} name {len(outs)} output(s) "
              f"and {len(ins)} input(s), for {len(dts)} dtype(s) and {len(ts)} argument(s)")
    for c in outs + ins:
        if c.lstrip("=") not in tuple(LETTERS):
            error(f"inline_asm_elementwise: constraint {c!r} is not one of "
                  f"{', '.join(LETTERS)} (with '=' for outputs)")
    for t in ts:
        if t.dtype.is_ptr():
            error("inline_asm_elementwise: pointer arguments are not supported")
    if pack > 1:   # `pack` elements share one register: at most 32 bits together
        for dt in [t.dtype for t in ts] + dts:
            if dt.bits * pack > 32:
                error(f"inline_asm_elementwise: pack={pack} packs {pack} elements into one "
                      f"32-bit register, so it needs elements of at most {32 // pack} bits, "
                      f"got {dt.name}")
    like = ts[0].type if ts else None
    types = [type_like(like, d) if like is not None else type_like(_scalar(d), d) for d in dts]
    op = b.create("inline_asm", [t.v for t in ts], types,
                  {"asm": asm, "constraints": tuple(cons), "pure": bool(is_pure), "pack": pack})
    rs = [Tensor(r, b) for r in op.results]
    return tuple(rs) if multi else rs[0]


def _scalar(d):
    from ..ir.core import ScalarType
    return ScalarType(d)
