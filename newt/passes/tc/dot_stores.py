"""Dot-stores pass: the epilogue's stores of a value computed from a staged accumulator are
marked attrs["dot_store"]: codegen/tc/dot_epilogue.py's `dot_store` stores them group by group
from index math (from the dot_acc_out on, codegen/emitter.py: Emitter.claims).

Where it sits: after smem, the last tensor-core decision; consumes the layouts, the icomp
facts and the dot plans. A `dot_acc_out` that moves a tensor-core accumulator out of its
fragment layout through shared memory (and does not leave by TMA boxes: store_tma.py) claims
the stores after it in its block whose value derives from it through elementwise ops and
whose pointer / mask are index-computable in a group-cyclic layout shared with the value: the
same operands (ptr, value[, mask]) and layouts, so the layout pass's vector widths and
run-length facts still hold.
"""
from __future__ import annotations

from ...ir.core import Op, is_block
from ...ir.layouts import CyclicLayout
from ...ir.schedule import acc_layout

_CHAIN = {"cast", "binary", "unary", "select", "fma", "convert_layout"}


def _derives_from(v, src, depth=0) -> bool:
    """v is computed from src through elementwise ops (the epilogue: activation, cast)."""
    if v is src:
        return True
    op = v.owner
    if depth > 32 or not isinstance(op, Op) or op.opcode not in _CHAIN:
        return False
    return any(is_block(o.type) and _derives_from(o, src, depth + 1) for o in op.operands)


def _claim_stores(out_op):
    block = out_op.parent
    src = out_op.result
    for op in block.ops[block.ops.index(out_op) + 1:]:
        if op.opcode != "store" or not is_block(op.operands[0].type):
            continue
        ptr, val = op.operands[0], op.operands[1]
        mask = op.operands[2] if op.attrs.get("has_mask") else None
        lay = ptr.attrs.get("layout")
        if not (isinstance(lay, CyclicLayout) and ptr.attrs.get("icomp")
                and val.attrs.get("layout") == lay and _derives_from(val, src)
                and not op.attrs.get("volatile")
                and (mask is None or (mask.attrs.get("icomp")
                                      and mask.attrs.get("layout") == lay))):
            continue
        op.attrs["dot_store"] = True


def claim_dot_stores(fn, options):
    for op in list(fn.walk()):
        if op.opcode != "dot_acc_out":
            continue
        plan = op.attrs["dot_plan"]
        if plan.engine != "mma" or op.result.attrs["layout"] == acc_layout(plan, options.num_threads):
            continue                    # no staging: the value stays where it is
        if op.attrs.get("tma_store"):
            continue                    # staged in the box format for a TMA store
        _claim_stores(op)
    return fn
