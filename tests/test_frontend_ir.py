"""The IR tools the frontend ships for everyone: Builder (IR by hand), printer, verifier.

The verifier must reject each broken invariant of newt/ir/core.py with a message naming it.
"""
import pytest

from newt import dtypes as D
from newt.ir import Builder, VerifierError, format_function, verify
from newt.ir.core import Block, BlockType, Loc, ScalarType

F32P = D.pointer_type(D.float32)


def kernel():
    b = Builder.for_function("k", [("x", F32P), ("n", D.int32)])
    b.loc = Loc("k.py", 3, 4, "    x = 1", "k")
    return b, b.func.body.args


def test_builder_by_hand_verifies_and_prints():
    b, (x, n) = kernel()
    offs = b.arange(0, 128)
    mask = b.binary("lt", offs, b.splat(n, (128,)))
    ptrs = b.addptr(b.splat(x, (128,)), offs)
    v = b.load(ptrs, mask, b.splat(b.constant(0.0, D.float32), (128,)))
    loop = b.for_(b.constant(0, D.int32), n, b.constant(1, D.int32), [v])
    with b.at(loop.regions[0]):
        iv, acc = loop.regions[0].args
        b.yield_([b.binary("add", acc, v)])
    cond = b.if_(b.binary("gt", n, b.constant(0, D.int32)), [ScalarType(D.float32)])
    with b.at(cond.regions[0]):
        b.yield_([b.reduce(loop.result, "sum", 0)])
    with b.at(cond.regions[1]):
        b.yield_([b.constant(1.0, D.float32)])
    b.store(ptrs, loop.result, mask)
    b.atomic("add", x, cond.result)
    verify(b.func)
    text = format_function(b.func)
    assert "func k(%x.0: *fp32, %n.1: i32)" in text
    assert "for " in text and "yield" in text and "reduce.sum" in text
    assert "atomic.add" in text and "sem='acq_rel'" in text
    ptrs.attrs["vec"] = 4
    assert "{vec=4}" in format_function(b.func)


def _expect(b, match):
    with pytest.raises(VerifierError, match=match) as info:
        verify(b.func)
    assert "k.py:3:4" in str(info.value)


def test_rejects_mismatched_elementwise_types():
    b, (x, n) = kernel()
    a = b.arange(0, 16)
    b.create("binary", [a, b.cast(a, D.float32)], [a.type], {"op": "add"})
    _expect(b, "operand types differ")


def test_rejects_wrong_result_type():
    b, (x, n) = kernel()
    a = b.arange(0, 16)
    b.create("binary", [a, a], [a.type], {"op": "lt"})   # comparisons give i1
    _expect(b, "result type must be i1")


def test_rejects_use_outside_scope():
    b, (x, n) = kernel()
    loop = b.for_(b.constant(0, D.int32), n, b.constant(1, D.int32))
    with b.at(loop.regions[0]):
        inner = b.constant(1, D.int32)
        b.yield_()
    b.binary("add", inner, n)
    _expect(b, "before it is defined")


def test_rejects_missing_terminator_and_bad_yield():
    b, (x, n) = kernel()
    b.for_(b.constant(0, D.int32), n, b.constant(1, D.int32))
    _expect(b, "must end with `yield`")
    b, (x, n) = kernel()
    c = b.if_(b.binary("gt", n, n), [ScalarType(D.float32)])
    with b.at(c.regions[0]):
        b.yield_([n])
    with b.at(c.regions[1]):
        b.yield_([n])
    _expect(b, "yield types must match")


def test_rejects_bad_shapes_and_pointers():
    b, (x, n) = kernel()
    b.broadcast(b.arange(0, 16), (32,))
    _expect(b, "cannot broadcast")
    b, (x, n) = kernel()
    b.reshape(b.arange(0, 16), (4, 8))
    _expect(b, "numel")
    b, (x, n) = kernel()
    b.create("addptr", [x, b.constant(1.0, D.float32)], [x.type])
    _expect(b, "offset must be an int")
    b, (x, n) = kernel()
    b.create("load", [n], [ScalarType(D.int32)], {"has_mask": False, "has_other": False})
    _expect(b, "needs a pointer")


def test_rejects_non_scalar_if_condition_and_block_constants():
    b, (x, n) = kernel()
    m = b.binary("lt", b.arange(0, 16), b.splat(n, (16,)))
    op = b.if_(m)
    for r in op.regions:
        with b.at(r):
            b.yield_()
    _expect(b, "i1 scalar")
    b, (x, n) = kernel()
    b.create("constant", [], [BlockType(D.float32, (4,))], {"value": 0.0})
    _expect(b, "scalar")


def test_return_placement():
    b, (x, n) = kernel()
    c = b.if_(b.binary("gt", n, n))
    with b.at(c.regions[0]):
        b.ret()
        b.yield_()
    with b.at(c.regions[1]):
        b.yield_()
    verify(b.func)
    c.regions[0].ops.insert(1, b.constant(1, D.int32).owner)
    b.func.body.ops.pop()   # the constant was appended to the body too; keep it in the region
    _expect(b, "return must be the last op")


def test_unknown_opcode():
    b, (x, n) = kernel()
    b.block.append(type(b.func.body.ops[0])("frobnicate", [], [])) if b.func.body.ops else \
        b.create("frobnicate")
    _expect(b, "unknown opcode")


def test_region_block_type():
    assert isinstance(Builder.for_function("f", []).func.body, Block)
