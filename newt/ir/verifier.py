"""Checks the invariants of core.py / ops.py on a Function. Run after the frontend (tests do) and
optionally after passes: a failure here is a compiler bug, never a user error, so it raises
VerifierError naming the op, its printed form and its source location.

Checked: known opcodes (the frontend's, and the tensor-core passes' PASS_OPCODES); every operand defined before use in an enclosing scope; identical operand
types for elementwise ops; result types of each op; shape rules of splat/broadcast/reshape/permute;
pointer rules of addptr/load/store/atomic; region signatures and terminators of for/while/if.
"""
from __future__ import annotations

from .. import dtypes as D
from ..errors import NewtError
from .core import Block, BlockType, Function, Op, ScalarType, is_block
from .ops import (ATOMIC_KINDS, BINARY_OPS, COMPARISONS, OPCODES, PASS_OPCODES, REDUCE_KINDS,
                  TERMINATORS, UNARY_OPS)


class VerifierError(NewtError):
    pass


def _fail(op: Op, msg: str):
    from .printer import format_op
    where = f" at {op.loc}" if op.loc is not None else ""
    try:
        text = format_op(op).splitlines()[0]
    except Exception:  # noqa: BLE001 - the printer must not hide the real problem
        text = op.opcode
    raise VerifierError(f"invalid IR{where}: {op.opcode}: {msg}\n    {text}")


def _same_shape_type(t, dtype):
    return BlockType(dtype, t.shape) if is_block(t) else ScalarType(dtype)


def verify(fn: Function) -> Function:
    """Raise VerifierError at the first broken invariant; return `fn` unchanged otherwise."""
    defined = set()
    for p in fn.params:
        if p.value is not None:
            defined.add(p.value.id)
    for a in fn.body.args:
        defined.add(a.id)
    _block(fn.body, defined, top=True)
    return fn


def _block(block: Block, defined: set, top=False):
    defined = set(defined)
    for a in block.args:
        defined.add(a.id)
    n = len(block.ops)
    for i, op in enumerate(block.ops):
        if op.opcode not in OPCODES and op.opcode not in PASS_OPCODES:
            _fail(op, "unknown opcode")
        for v in op.operands:
            if v.id not in defined:
                _fail(op, f"operand %{v.id}:{v.type} is used before it is defined "
                          f"(or outside its scope)")
        if op.opcode in TERMINATORS:
            if op.opcode == "return":
                rest = block.ops[i + 1:]
                if not (len(rest) == 0 or (len(rest) == 1 and rest[0].opcode == "yield")):
                    _fail(op, "return must be the last op before its block's terminator")
            elif i != n - 1:
                _fail(op, "terminator is not the last op of its block")
            elif top:
                _fail(op, "yield/condition at function level")
        _check(op)
        for r in op.regions:
            _block(r, defined)
        for res in op.results:
            defined.add(res.id)


def _terminator(op: Op, block: Block, opcode: str):
    if not block.ops or block.ops[-1].opcode != opcode:
        _fail(op, f"region must end with `{opcode}`")
    return block.ops[-1]


def _types(values):
    return [v.type for v in values]


def _check(op: Op):  # noqa: C901 - one flat table of rules reads best
    c, ops, res, at = op.opcode, op.operands, op.results, op.attrs

    def need(cond, msg):
        if not cond:
            _fail(op, msg)

    def nres(k):
        need(len(res) == k, f"expected {k} result(s), got {len(res)}")

    def nops(*ks):
        need(len(ops) in ks, f"expected {' or '.join(map(str, ks))} operand(s), got {len(ops)}")

    if c == "constant":
        nres(1), nops(0)
        need(isinstance(res[0].type, ScalarType), "constant must be a scalar")
        need("value" in at, "constant needs a value attr")
    elif c in ("program_id", "num_programs"):
        nres(1), nops(0)
        need(at.get("axis") in (0, 1, 2), "axis must be 0, 1 or 2")
        need(res[0].type == ScalarType(D.int32), "result must be i32")
    elif c == "arange":
        nres(1), nops(0)
        n = at["end"] - at["start"]
        need(n > 0 and n & (n - 1) == 0, "length must be a power of two")
        need(res[0].type == BlockType(D.int32, (n,)), "result must be i32[end-start]")
    elif c == "splat":
        nres(1), nops(1)
        need(not is_block(ops[0].type), "operand must be a scalar")
        need(is_block(res[0].type) and res[0].dtype == ops[0].dtype, "bad result type")
    elif c == "broadcast":
        nres(1), nops(1)
        t, r = ops[0].type, res[0].type
        need(is_block(t) and is_block(r) and t.dtype == r.dtype, "operand/result must be blocks of one dtype")
        need(len(t.shape) == len(r.shape), "broadcast keeps the rank (reshape first)")
        need(all(a == b or a == 1 for a, b in zip(t.shape, r.shape)), f"cannot broadcast {t} to {r}")
    elif c == "reshape":
        nres(1), nops(1)
        need(ops[0].type.numel == res[0].type.numel and ops[0].dtype == res[0].dtype,
             "reshape must keep numel and dtype")
    elif c == "permute":
        nres(1), nops(1)
        order = tuple(at.get("order", ()))
        t = ops[0].type
        need(is_block(t) and sorted(order) == list(range(len(t.shape))), "order must be a permutation")
        need(res[0].type == BlockType(t.dtype, tuple(t.shape[i] for i in order)), "bad result shape")
    elif c == "cast":
        nres(1), nops(1)
        need(res[0].type.shape == ops[0].type.shape, "cast keeps the shape")
        if at.get("bitcast"):
            need(res[0].dtype.bits == ops[0].dtype.bits, "bitcast needs equal widths")
    elif c == "binary":
        nres(1), nops(2)
        need(at.get("op") in BINARY_OPS, f"unknown binary op {at.get('op')!r}")
        need(ops[0].type == ops[1].type, f"operand types differ: {ops[0].type} vs {ops[1].type}")
        need(not ops[0].dtype.is_ptr(), "binary op on pointers (use addptr)")
        want = _same_shape_type(ops[0].type, D.int1) if at["op"] in COMPARISONS else ops[0].type
        need(res[0].type == want, f"result type must be {want}")
        if at["op"] == "div":
            need(ops[0].dtype.is_floating(), "div is float division")
        if at["op"] in ("and", "or", "xor", "shl", "shr", "idiv"):
            need(ops[0].dtype.is_int(), f"{at['op']} needs integers")
    elif c == "unary":
        nres(1), nops(1)
        need(at.get("op") in UNARY_OPS, f"unknown unary op {at.get('op')!r}")
        need(res[0].type == ops[0].type, "unary keeps the type")
        if at["op"] == "not":
            need(ops[0].dtype.is_bool(), "not needs an i1 operand")
        if at["op"] == "invert":
            need(ops[0].dtype.is_int(), "invert needs integers")
    elif c == "select":
        nres(1), nops(3)
        need(ops[0].type == _same_shape_type(ops[1].type, D.int1), "condition must be i1 of the same shape")
        need(ops[1].type == ops[2].type == res[0].type, "select operand types differ")
    elif c == "fma":
        nres(1), nops(3)
        need(ops[0].type == ops[1].type == ops[2].type == res[0].type, "fma operand types differ")
        need(ops[0].dtype.is_floating(), "fma needs floats")
    elif c == "addptr":
        nres(1), nops(2)
        need(ops[0].dtype.is_ptr(), "first operand must be a pointer")
        need(ops[1].dtype.is_int() and ops[1].type.shape == ops[0].type.shape,
             "offset must be an int of the pointer's shape")
        need(res[0].type == ops[0].type, "result has the pointer's type")
    elif c == "load":
        nres(1)
        k = 1 + bool(at.get("has_mask")) + bool(at.get("has_other"))
        nops(k)
        p = ops[0].type
        need(p.dtype.is_ptr(), "load needs a pointer")
        need(res[0].type == _same_shape_type(p, p.dtype.element_ty), "result is the pointee type")
        if at.get("has_mask"):
            need(ops[1].type == _same_shape_type(p, D.int1), "mask must be i1 of the pointer's shape")
        if at.get("has_other"):
            need(ops[-1].type == res[0].type, "other must have the result's type")
    elif c == "store":
        nres(0)
        nops(2 + bool(at.get("has_mask")))
        p = ops[0].type
        need(p.dtype.is_ptr(), "store needs a pointer")
        need(ops[1].type == _same_shape_type(p, p.dtype.element_ty), "value must be the pointee type")
        if at.get("has_mask"):
            need(ops[2].type == _same_shape_type(p, D.int1), "mask must be i1 of the pointer's shape")
    elif c == "atomic":
        nres(1)
        need(at.get("kind") in ATOMIC_KINDS, "unknown atomic kind")
        p = ops[0].type
        need(p.dtype.is_ptr(), "atomic needs a pointer")
        vt = _same_shape_type(p, p.dtype.element_ty)
        if at["kind"] == "cas":
            nops(3)
            need(ops[1].type == vt and ops[2].type == vt, "cas operands must be the pointee type")
        else:
            nops(2 + bool(at.get("has_mask")))
            need(ops[1].type == vt, "value must be the pointee type")
            if at.get("has_mask"):
                need(ops[2].type == _same_shape_type(p, D.int1), "mask must be i1 of the pointer's shape")
        need(res[0].type == vt, "result is the pointee type")
    elif c == "reduce":
        nres(1), nops(1)
        need(at.get("kind") in REDUCE_KINDS, "unknown reduce kind")
        t = ops[0].type
        need(is_block(t) and 0 <= at.get("axis", -1) < len(t.shape), "bad axis")
        shape = tuple(s for i, s in enumerate(t.shape) if i != at["axis"])
        dt = D.int32 if at["kind"] in ("argmax", "argmin") else t.dtype
        need(res[0].type == (BlockType(dt, shape) if shape else ScalarType(dt)), "bad result type")
    elif c == "scan":
        nres(1), nops(1)
        t = ops[0].type
        need(is_block(t) and 0 <= at.get("axis", -1) < len(t.shape), "bad axis")
        need(res[0].type == t, "scan keeps the type")
    elif c == "dot":
        nres(1), nops(3)
        a, b, acc = (v.type for v in ops)
        need(all(is_block(t) and len(t.shape) == 2 for t in (a, b, acc)), "dot needs 2-D blocks")
        need(a.shape[1] == b.shape[0] and acc.shape == (a.shape[0], b.shape[1]), "dot shapes mismatch")
        need(a.dtype == b.dtype or (a.dtype.is_fp8() and b.dtype.is_fp8()),
             "dot inputs must have one dtype (or be two fp8 types)")
        need(res[0].type == acc, "result has the accumulator's type")
    elif c == "for":
        need(len(ops) >= 3, "for needs lb, ub, step")
        lb, ub, st = ops[:3]
        need(all(isinstance(v.type, ScalarType) and v.dtype.is_int() for v in (lb, ub, st)),
             "bounds must be integer scalars")
        need(lb.type == ub.type == st.type, "bounds must share one type")
        need(len(op.regions) == 1, "for has one region")
        body = op.regions[0]
        need(_types(body.args) == [lb.type] + _types(ops[3:]), "region args must be (iv, *carried)")
        need(_types(res) == _types(ops[3:]), "results must match the carried values")
        y = _terminator(op, body, "yield")
        need(_types(y.operands) == _types(res), "yield types must match the carried values")
    elif c == "while":
        need(len(op.regions) == 2, "while has a cond and a body region")
        cond, body = op.regions
        need(_types(cond.args) == _types(ops) == _types(body.args) == _types(res),
             "carried types must agree")
        t = _terminator(op, cond, "condition")
        need(t.operands[0].type == ScalarType(D.int1), "condition must be an i1 scalar")
        y = _terminator(op, body, "yield")
        need(_types(y.operands) == _types(res), "yield types must match the carried values")
    elif c == "if":
        nops(1)
        need(ops[0].type == ScalarType(D.int1), "if condition must be an i1 scalar")
        need(len(op.regions) == 2, "if has then and else regions")
        for r in op.regions:
            y = _terminator(op, r, "yield")
            need(_types(y.operands) == _types(res), "yield types must match the if's results")
    elif c == "condition":
        nops(1)
    elif c == "assert":
        nops(1)
        need(ops[0].dtype.is_bool(), "assert needs an i1 condition")
    elif c == "philox":
        nops(2), nres(4)
        need(ops[0].dtype in (D.uint32, D.uint64) and isinstance(ops[0].type, ScalarType),
             "seed must be a u32/u64 scalar")
        need(ops[1].dtype == D.uint32, "offset must be u32")
    if op.regions and c not in ("for", "while", "if"):
        _fail(op, "only for, while and if have regions")
