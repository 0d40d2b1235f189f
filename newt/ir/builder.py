"""Builder: creates IR ops with the right result types and appends them at an insertion point.

Used by the frontend (newt/frontend/) and by backend tests that build IR by hand. It does no
implicit conversion: operands must already obey the invariants of core.py (the frontend's
semantic layer inserts splat/broadcast/cast first). Result types follow ops.py.

    b = Builder.for_function("add", [("x", pointer_type(float32)), ("n", int32)])
    x, n = b.func.body.args
    offs = b.arange(0, 1024)
    ...
    loop = b.for_(lb, ub, step, [acc0])           # loop.regions[0].args = (iv, acc)
    with b.at(loop.regions[0]):
        b.yield_([acc1])
"""
from __future__ import annotations

import contextlib
from typing import Optional, Sequence

import torch

from .. import dtypes as D
from .core import Block, BlockType, Function, Loc, Op, Param, ScalarType, Value
from .ops import COMPARISONS


def type_like(t, dtype=None, shape=None):
    """A type with `t`'s shape (or `shape`) and `t`'s dtype (or `dtype`). shape () -> scalar."""
    dtype = t.dtype if dtype is None else dtype
    shape = t.shape if shape is None else tuple(shape)
    return BlockType(dtype, shape) if shape else ScalarType(dtype)


class Builder:
    def __init__(self, block: Optional[Block] = None, loc: Optional[Loc] = None):
        self.block = block
        self.loc = loc          # attached to every op created (the frontend updates it per node)
        self.func: Optional[Function] = None

    # ------------------------------------------------------------------ setup / insertion point
    @classmethod
    def for_function(cls, name: str, params: Sequence, loc: Optional[Loc] = None) -> "Builder":
        """A builder positioned in the body of a new Function. `params` is a list of
        (name, dtype) or of ir.Param; each param's Value is a block argument of the body."""
        ps = []
        for i, p in enumerate(params):
            ps.append(p if isinstance(p, Param) else Param(p[0], p[1], i))
        body = Block([ScalarType(p.dtype) for p in ps])
        for p, v in zip(ps, body.args):
            p.value = v
            v.name = p.name
            if p.divisible_by_16:
                v.attrs["divisible_by_16"] = True
            if p.large:
                v.attrs["large"] = True
        b = cls(body, loc)
        b.func = Function(name, ps, body, loc)
        return b

    @contextlib.contextmanager
    def at(self, block: Block):
        """Temporarily append to `block` (a region of a for/while/if op)."""
        old = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = old

    def create(self, opcode: str, operands=(), result_types=(), attrs=None, regions=(),
               loc: Optional[Loc] = None) -> Op:
        op = Op(opcode, operands, result_types, attrs, regions, loc or self.loc)
        self.block.append(op)
        return op

    def _one(self, opcode, operands, t, attrs=None) -> Value:
        return self.create(opcode, operands, [t], attrs).result

    # ------------------------------------------------------------------ creation
    def constant(self, value, dtype: D.dtype) -> Value:
        if dtype.is_floating():
            # the value the dtype can hold (a weak `h * 0.1` multiplies by fp16(0.1), as in
            # Triton and the interpreter), so codegen never sees more precision than the type
            value = float(value)
            if dtype.bits < 32 and value == value:
                value = torch.tensor(value, dtype=dtype.to_torch()).item()
        elif dtype.is_bool():
            value = bool(value)
        else:
            value = int(value)
        return self._one("constant", [], ScalarType(dtype), {"value": value})

    def program_id(self, axis: int) -> Value:
        return self._one("program_id", [], ScalarType(D.int32), {"axis": axis})

    def num_programs(self, axis: int) -> Value:
        return self._one("num_programs", [], ScalarType(D.int32), {"axis": axis})

    def arange(self, start: int, end: int) -> Value:
        return self._one("arange", [], BlockType(D.int32, (end - start,)),
                         {"start": start, "end": end})

    # ------------------------------------------------------------------ shapes
    def splat(self, x: Value, shape) -> Value:
        return self._one("splat", [x], BlockType(x.dtype, tuple(shape)))

    def broadcast(self, x: Value, shape) -> Value:
        return self._one("broadcast", [x], BlockType(x.dtype, tuple(shape)))

    def reshape(self, x: Value, shape) -> Value:
        return self._one("reshape", [x], type_like(x.type, shape=shape))

    def permute(self, x: Value, order) -> Value:
        order = tuple(order)
        return self._one("permute", [x], BlockType(x.dtype, tuple(x.shape[i] for i in order)),
                         {"order": order})

    def cast(self, x: Value, dtype: D.dtype, bitcast: bool = False) -> Value:
        attrs = {"bitcast": bitcast}
        if dtype.is_floating() and not bitcast:
            attrs["fp_rounding"] = "rtne"
        return self._one("cast", [x], type_like(x.type, dtype), attrs)

    # ------------------------------------------------------------------ elementwise
    def binary(self, op: str, a: Value, b: Value) -> Value:
        t = type_like(a.type, D.int1) if op in COMPARISONS else a.type
        return self._one("binary", [a, b], t, {"op": op})

    def unary(self, op: str, x: Value) -> Value:
        return self._one("unary", [x], x.type, {"op": op})

    def select(self, cond: Value, x: Value, y: Value) -> Value:
        return self._one("select", [cond, x, y], x.type)

    def fma(self, x: Value, y: Value, z: Value) -> Value:
        return self._one("fma", [x, y, z], x.type)

    def addptr(self, ptr: Value, offset: Value) -> Value:
        return self._one("addptr", [ptr, offset], ptr.type)

    # ------------------------------------------------------------------ memory
    def load(self, ptr: Value, mask: Optional[Value] = None, other: Optional[Value] = None,
             cache: str = "", evict: str = "", volatile: bool = False) -> Value:
        ops = [ptr] + ([mask] if mask is not None else []) + ([other] if other is not None else [])
        attrs = {"has_mask": mask is not None, "has_other": other is not None,
                 "cache": cache, "evict": evict, "volatile": volatile}
        return self._one("load", ops, type_like(ptr.type, ptr.dtype.element_ty), attrs)

    def store(self, ptr: Value, value: Value, mask: Optional[Value] = None, cache: str = "",
              evict: str = "") -> Op:
        ops = [ptr, value] + ([mask] if mask is not None else [])
        return self.create("store", ops, [], {"has_mask": mask is not None, "cache": cache,
                                              "evict": evict})

    def atomic(self, kind: str, ptr: Value, val: Value, mask: Optional[Value] = None,
               cmp: Optional[Value] = None, sem: str = "acq_rel", scope: str = "gpu") -> Value:
        if kind == "cas":
            ops = [ptr, cmp, val]
        else:
            ops = [ptr, val] + ([mask] if mask is not None else [])
        attrs = {"kind": kind, "sem": sem, "scope": scope,
                 "has_mask": mask is not None and kind != "cas"}
        return self._one("atomic", ops, type_like(ptr.type, ptr.dtype.element_ty), attrs)

    # ------------------------------------------------------------------ reductions, dot
    def reduce(self, x: Value, kind: str, axis: int) -> Value:
        shape = tuple(s for i, s in enumerate(x.shape) if i != axis)
        dt = D.int32 if kind in ("argmax", "argmin") else x.dtype
        return self._one("reduce", [x], type_like(x.type, dt, shape), {"kind": kind, "axis": axis})

    def scan(self, x: Value, kind: str, axis: int, reverse: bool = False) -> Value:
        return self._one("scan", [x], x.type, {"kind": kind, "axis": axis, "reverse": reverse})

    def dot(self, a: Value, b: Value, acc: Value, input_precision: str = "tf32",
            out_dtype: Optional[D.dtype] = None) -> Value:
        return self._one("dot", [a, b, acc], acc.type,
                         {"input_precision": input_precision, "out_dtype": out_dtype or acc.dtype})

    # ------------------------------------------------------------------ control flow
    def for_(self, lb: Value, ub: Value, step: Value, inits: Sequence[Value] = (),
             num_stages: Optional[int] = None) -> Op:
        body = Block([lb.type] + [v.type for v in inits])
        return self.create("for", [lb, ub, step, *inits], [v.type for v in inits],
                           {"num_stages": num_stages}, [body])

    def while_(self, inits: Sequence[Value]) -> Op:
        types = [v.type for v in inits]
        return self.create("while", list(inits), types, {}, [Block(types), Block(types)])

    def if_(self, cond: Value, result_types: Sequence = ()) -> Op:
        return self.create("if", [cond], list(result_types), {}, [Block(), Block()])

    def yield_(self, values: Sequence[Value] = ()) -> Op:
        return self.create("yield", list(values))

    def condition(self, c: Value) -> Op:
        return self.create("condition", [c])

    def ret(self) -> Op:
        return self.create("return")

    # ------------------------------------------------------------------ debugging, misc
    def assert_(self, cond: Value, msg: str, loc: Optional[Loc] = None) -> Op:
        loc = loc or self.loc
        return self.create("assert", [cond], [], {
            "msg": msg, "file": loc.file if loc else "", "line": loc.line if loc else 0,
            "func": loc.func if loc else ""})

    def print_(self, prefix: str, values: Sequence[Value] = (), hex: bool = False) -> Op:
        return self.create("print", list(values), [], {"prefix": prefix, "hex": hex})

    def barrier(self) -> Op:
        return self.create("barrier")

    def philox(self, seed: Value, offset: Value, n_rounds: int = 10) -> list:
        t = type_like(offset.type, D.uint32)
        return self.create("philox", [seed, offset], [t] * 4, {"n_rounds": n_rounds}).results
