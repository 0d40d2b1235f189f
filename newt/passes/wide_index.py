"""64-bit index pass: offsets into tensors of 2**31 elements or more are computed in 64 bits.

Consumes IR whose pointer params carry `Param.large` (the JIT sets it for tensors with 2**31+
elements); marks `value.attrs["wide"] = True` on every 32-bit integer value that feeds the
offset of an `addptr` whose base pointer comes from a large param. Codegen declares wide values
as int64 and computes them in 64 bits (operands sign-extend), so `pid * BLOCK + arange(...)`
cannot wrap past 2**31 the way a 32-bit computation would. Other kernels keep 32-bit math.

The walk goes backwards from the offset through integer arithmetic, casts, shape ops,
loop-carried values (to their inits and yields) and if results (to both yields). It stops at
values that are not computed from indices (loads, comparisons, reductions): those keep their
type and are sign-extended where a wide op uses them.
"""
from __future__ import annotations

from ..ir.core import Block, Op, Value

# integer ops whose result widens exactly when computed in 64 bits
_WIDEN_OPS = {"binary", "unary", "cast", "splat", "broadcast", "reshape", "permute", "select",
              "convert_layout", "arange", "program_id", "num_programs", "constant"}
_WIDEN_BINARY = {"add", "sub", "mul", "shl", "idiv", "mod", "maximum", "minimum", "and", "or",
                 "xor", "shr"}


def _large_pointer(v: Value, large_ids: set, seen=None) -> bool:
    seen = seen if seen is not None else set()
    if v.id in seen:
        return False
    seen.add(v.id)
    if v.id in large_ids:
        return True
    owner = v.owner
    if isinstance(owner, Op):
        if owner.opcode in ("addptr", "splat", "broadcast", "reshape", "permute", "select",
                            "convert_layout"):
            return any(_large_pointer(o, large_ids, seen) for o in owner.operands
                       if o.dtype.is_ptr())
        if owner.opcode in ("for", "while", "if"):
            return any(_large_pointer(o, large_ids, seen) for o in _sources_of_result(owner, v))
        return False
    if isinstance(owner, Block):
        return any(_large_pointer(o, large_ids, seen) for o in _sources_of_arg(owner, v))
    return False


def _sources_of_result(op: Op, v: Value):
    i = v.index
    if op.opcode == "for":
        return [op.operands[3 + i], op.regions[0].ops[-1].operands[i]]
    if op.opcode == "while":
        return [op.operands[i], op.regions[1].ops[-1].operands[i]]
    return [r.ops[-1].operands[i] for r in op.regions]


def _sources_of_arg(block: Block, v: Value):
    op = block.parent
    if op is None:
        return []
    if op.opcode == "for":
        if v.index == 0:
            return []                  # the induction variable: widened by its bounds
        i = v.index - 1
        return [op.operands[3 + i], block.ops[-1].operands[i]]
    if op.opcode == "while":
        i = v.index
        return [op.operands[i], op.regions[1].ops[-1].operands[i]]
    return []


def _widen(v: Value, seen: set):
    if v.id in seen or not (v.dtype.is_int() and not v.dtype.is_bool()) or v.dtype.bits >= 64:
        return
    seen.add(v.id)
    v.attrs["wide"] = True
    owner = v.owner
    if isinstance(owner, Op):
        if owner.opcode in ("for", "while", "if"):
            for o in _sources_of_result(owner, v):
                _widen(o, seen)
        elif owner.opcode in _WIDEN_OPS:
            if owner.opcode == "binary" and owner.attrs["op"] not in _WIDEN_BINARY:
                return
            if owner.opcode == "cast" and not owner.operands[0].dtype.is_int():
                return
            for o in owner.operands[1:] if owner.opcode == "select" else owner.operands:
                _widen(o, seen)
    elif isinstance(owner, Block):
        op = owner.parent
        if op is not None and op.opcode == "for" and v.index == 0:
            for o in op.operands[:3]:
                _widen(o, seen)
        for o in _sources_of_arg(owner, v):
            _widen(o, seen)


def mark_wide_indices(fn, options=None):
    large_ids = {p.value.id for p in fn.params if p.large and p.value is not None}
    if not large_ids:
        return fn
    seen: set = set()
    for op in fn.walk():
        if op.opcode == "addptr" and _large_pointer(op.operands[0], large_ids):
            _widen(op.operands[1], seen)
    return fn


def c_int_type(v: Value) -> str:
    """The C type of an integer value after this pass (wide values are int64)."""
    if v.attrs.get("wide"):
        return "i64" if v.dtype.is_signed() else "u64"
    return None

