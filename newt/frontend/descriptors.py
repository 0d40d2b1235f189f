"""Tensor descriptors and block pointers in the frontend: newt/descriptors.py's lowering, over
IR-building operations (part of the semantic layer, beside memory.py).

`nl.make_tensor_descriptor`, `nl.make_block_ptr`, `nl.advance`, and `nl.load` / `nl.store` of a
block pointer become blocks of pointers and masks here, so everything after the frontend (passes,
codegen) sees only the ordinary pointer + mask form.
"""
from __future__ import annotations

from .. import descriptors as DS
from . import memory, semantic, shapes


def ops_for(b) -> DS.Ops:
    return DS.Ops(
        arange=lambda n: shapes.arange(b, 0, n),
        load=lambda p, m, o: memory.load(b, p, m, o if m is not None else None),
        store=lambda p, v, m: memory.store(b, p, v, m),
        atomic_add=lambda p, v, m: memory.atomic(b, "add", p, v, m),
        error=semantic.error,
        is_float=lambda t: t.dtype.element_ty.is_floating(),
        nonneg=lambda t: nonneg(t.v))


def nonneg(v, depth=0) -> bool:
    """Is IR value `v` >= 0 in every lane, by construction? Non-negative constants, program
    ids, aranges, their sums, products, quotients and minimums (a maximum needs one such
    operand, a remainder a non-negative dividend), int casts and shape ops of them, and the induction variable of a loop
    counting up from such a value. False when unsure."""
    from ..ir.core import Block
    o = v.owner
    if depth > 12 or o is None:
        return False
    if isinstance(o, Block):
        loop = o.parent
        if loop is None or loop.opcode != "for" or v.index != 0:
            return False
        step = loop.operands[2].owner
        return (nonneg(loop.operands[0], depth + 1) and getattr(step, "opcode", "") ==
                "constant" and step.attrs["value"] > 0)
    k = o.opcode
    if k in ("program_id", "num_programs", "arange"):
        return True
    if k == "constant":
        return o.attrs["value"] >= 0
    if k in ("splat", "broadcast", "reshape") or (k == "cast" and v.dtype.is_int()
                                                  and o.operands[0].dtype.is_int()
                                                  and not o.attrs.get("bitcast")):
        return nonneg(o.operands[0], depth + 1)
    if k == "binary" and o.attrs["op"] in ("add", "mul", "minimum", "idiv"):
        # (`//` of non-negative values: a zero divisor is undefined on the GPU anyway)
        return all(nonneg(x, depth + 1) for x in o.operands)
    if k == "binary" and o.attrs["op"] == "mod":   # truncating: the dividend's sign
        return nonneg(o.operands[0], depth + 1)
    if k == "binary" and o.attrs["op"] == "maximum":
        return any(nonneg(x, depth + 1) for x in o.operands)
    return False


def _base(base, what):
    from .values import Tensor
    if not isinstance(base, Tensor) or not base.dtype.is_ptr() or base.is_block():
        semantic.error(f"{what} needs a scalar pointer (a tensor argument) as its base, "
                       f"got {base!r}")
    return base


def make_tensor_descriptor(b, base, shape, strides, block_shape, padding_option="zero"):
    return DS.TensorDescriptor(ops_for(b), _base(base, "make_tensor_descriptor"), shape,
                               strides, block_shape, padding_option)


def _descriptor(desc, what):
    if not isinstance(desc, DS.TensorDescriptor):
        semantic.error(f"{what} needs a tensor descriptor, got {desc!r}")
    return desc


def make_block_ptr(b, base, shape, strides, offsets, block_shape, order=None):
    return DS.make_block_ptr(ops_for(b), _base(base, "make_block_ptr"), shape, strides, offsets,
                             block_shape, order)


def load(b, pointer, mask=None, other=None, boundary_check=(), padding_option="",
         cache_modifier="", eviction_policy="", volatile=False):
    if isinstance(pointer, DS.BlockPointer):
        if mask is not None or other is not None:
            semantic.error("load of a block pointer takes boundary_check and padding_option, "
                           "not mask / other")
        return pointer.load(boundary_check, padding_option)
    return memory.load(b, pointer, mask, other, boundary_check, padding_option, cache_modifier,
                       eviction_policy, volatile)


def store(b, pointer, value, mask=None, boundary_check=(), cache_modifier="",
          eviction_policy=""):
    if isinstance(pointer, DS.BlockPointer):
        if mask is not None:
            semantic.error("store through a block pointer takes boundary_check, not a mask")
        return pointer.store(value, boundary_check)
    return memory.store(b, pointer, value, mask, boundary_check, cache_modifier,
                        eviction_policy)


def parameter(name, sig, spec: dict, signature: dict, specialization: dict, index: int,
              next_index: int):
    """(the kernel-side descriptor, its IR Params) of a descriptor parameter (see
    newt/descriptors.py, "as a parameter"). Its ints are numbered from next_index on."""
    from .. import dtypes as D
    from ..ir.core import Param
    elem, block, padding = DS.parse_signature(sig)
    base = Param(name, D.pointer_type(D.from_signature(elem)), index,
                 divisible_by_16=bool(spec.get("divisible_by_16")), large=bool(spec.get("large")))
    params, ints = [base], []
    for k, sub in enumerate(DS.part_names(name, len(block))):
        dt = signature.get(sub, "i64" if base.large else "i32")
        dt = D.from_signature(dt) if isinstance(dt, str) else dt
        s = specialization.get(sub) or {}
        if s.get("equal_to_1"):
            ints.append(("one", dt))
            continue
        params.append(Param(sub, dt, next_index + k,
                            divisible_by_16=bool(s.get("divisible_by_16"))))
        ints.append(("param", params[-1]))
    return base, params, ints, block, padding


def descriptor_value(b, base, ints, block, padding):
    """The descriptor a kernel sees, once the Builder has made the Params' values."""
    from .values import Tensor
    vals = [Tensor(b.constant(1, x), b) if kind == "one" else Tensor(x.value, b)
            for kind, x in ints]
    rank = len(block)
    return DS.TensorDescriptor(ops_for(b), Tensor(base.value, b), vals[:rank], vals[rank:],
                               list(block), padding)


IMPLS = {
    "make_tensor_descriptor": make_tensor_descriptor,
    "load_tensor_descriptor": lambda b, desc, offsets:
        _descriptor(desc, "load_tensor_descriptor").load(offsets),
    "store_tensor_descriptor": lambda b, desc, offsets, value:
        _descriptor(desc, "store_tensor_descriptor").store(offsets, value),
    "make_block_ptr": make_block_ptr,
    "advance": lambda b, base, offsets: DS.advance(ops_for(b), base, offsets),
    "load": load, "store": store,
}
