"""Scalar facts the TMA passes share: a tile's base pointer as `P + u1 * s1 + ...` (each u a
coordinate of an outer map dimension: a head, a batch), strides TMA can take, and the proof
that a coordinate is never negative (a negative one reads zeros where the pointer program reads
before the tensor).

Where it sits: used by passes/tc/dot_tma.py (a matmul's operand tiles), ring_tma.py
(attention's K / V tiles) and store_tma.py (the epilogue's tile); it decides nothing itself.
"""
from __future__ import annotations

from ... import dtypes as D
from ...ir.core import Block, Op
from ...ir.index_forms import NoMatch, binop_of, index_constant, op_of, param_of
from .dot_loads import op_inside

BIG = (1 << 31) - 1      # extent of an axis nothing bounds: every int32 coordinate is inside


def tma_stride(fn, v, es, what):
    """("const", n) / ("param", index, name) of a stride in elements (a Value or an int) whose
    bytes TMA can take."""
    c = v if isinstance(v, int) else index_constant(v)
    if c is not None:
        if c <= 0 or (c * es) % 16:
            raise NoMatch(f"{what} ({c} elements) is not a positive multiple of 16 bytes")
        return ("const", int(c))
    p = param_of(fn, uncast(v))
    if p is None or not p.divisible_by_16 or p.dtype not in (D.int32, D.int64):
        raise NoMatch(f"{what} is not a parameter divisible by 16")
    return ("param", p.index, p.name)


def uncast(v):
    o = op_of(v, "cast")
    while o is not None and v.dtype.is_int() and o.operands[0].dtype.is_int():
        v = o.operands[0]
        o = op_of(v, "cast")
    return v


def nonneg(fn, v, positive) -> bool:
    """v >= 0 whenever the parameters in `positive` (added here) are >= 1."""
    v = uncast(v)
    o = op_of(v)
    if o is None:
        return False
    if o.opcode == "program_id":
        return True
    c = index_constant(v)
    if c is not None:
        return c >= 0
    k = o.attrs.get("op") if o.opcode == "binary" else None
    if k in ("add", "mul"):
        return all(nonneg(fn, x, positive) for x in o.operands)
    if k in ("idiv", "mod"):
        a, b = o.operands
        return nonneg(fn, a, positive) and at_least_one(fn, b, positive)
    return False


def at_least_one(fn, v, positive) -> bool:
    """v >= 1 whenever the parameters in `positive` (added here) are >= 1: a constant, a
    parameter, or `cdiv(p, d)` as people spell it, `(p + c) // d` with c >= d - 1 (the number of
    blocks of a launch's extent, a divisor of batch and tile indices)."""
    v = uncast(v)
    c = index_constant(v)
    if c is not None:
        return c >= 1
    p = param_of(fn, v)
    if p is not None:
        positive.append(("param", p.index, p.name))
        return True
    q = binop_of(v, "idiv")
    d = index_constant(q.operands[1]) if q is not None else None
    if d is None or d < 1:
        return False
    x, extra = q.operands[0], 0
    while True:                       # x = p + constants
        o = op_of(x)
        k = o.attrs.get("op") if o is not None and o.opcode == "binary" else None
        cs = [index_constant(y) for y in o.operands] if k in ("add", "sub") else [None, None]
        if k == "add" and (cs[0] is not None or cs[1] is not None):
            extra += cs[1] if cs[1] is not None else cs[0]
            x = o.operands[0] if cs[1] is not None else o.operands[1]
        elif k == "sub" and cs[1] is not None:
            extra -= cs[1]
            x = o.operands[0]
        else:
            break
    return extra >= d - 1 and at_least_one(fn, x, positive)


def offset_products(fn, v, out):
    """Split a scalar element offset into (coordinate, stride) products."""
    a = binop_of(v, "add")
    if a is not None:
        return all(offset_products(fn, x, out) for x in a.operands)
    m = binop_of(v, "mul")
    if m is None:
        raise NoMatch("the base pointer's offset is not a sum of index * stride products")
    x, y = m.operands
    # the stride is the parameter (or constant) side; with two parameters, the one divisible
    # by 16
    def is_stride(w):
        p = param_of(fn, uncast(w))
        return index_constant(w) is not None or (p is not None and p.divisible_by_16)
    if is_stride(x) and not is_stride(y):
        x, y = y, x
    elif not is_stride(y):
        raise NoMatch("a term of the base pointer's offset has no stride that is a parameter "
                      "divisible by 16 or a constant")
    out.append((x, y))
    return True


def scalar_base(fn, ptr):
    """(pointer parameter, [(coordinate, stride)]) of P + u1 * s1 + ... (through addptr)."""
    terms = []
    while True:
        o = op_of(ptr, "addptr")
        if o is None:
            break
        offset_products(fn, o.operands[1], terms)
        ptr = o.operands[0]
    p = param_of(fn, ptr)
    if p is None or not p.divisible_by_16:
        raise NoMatch("the base pointer is not a 16-byte aligned parameter")
    return p, terms


def before_loop(v, body) -> bool:
    """v is defined outside the loop body `body` (and is not a block argument inside it)."""
    o = v.owner
    if isinstance(o, Block):
        return o is not body and not (isinstance(o.parent, Op) and op_inside(o.parent, body))
    return o is None or not op_inside(o, body)
