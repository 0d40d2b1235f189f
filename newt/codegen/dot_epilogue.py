"""Codegen of a dot epilogue's store: `dot_store`, the masked store of a value computed from a
loop's dot accumulator.

Where it sits: codegen. newt/codegen/dot_ring.py's `dot_acc_out` handler (which moves the
accumulator out of the fragment layout) renames the stores that consume it to `dot_store`
(see `claim_stores`), after the layout pass has planned them as ordinary stores: same operands
(ptr, value[, mask]) and layouts, so the layout pass's vector widths and run-length facts hold.

Why not the generic store: it materializes one 64-bit pointer (and one mask bit) per element
slot before the first store and tests every group before any is written, so all of them are
alive at once: 128 pointers per thread (256 registers) at a 256x128 tile, which spills. Here
each 16-byte group recomputes its address and mask from the index math at the moment it is
stored (the pointer block is index-computable), decides vector-or-scalar on its own, and
nothing per-slot but the values outlives its group.
"""
from __future__ import annotations

from ..ir.core import Op, is_block
from ..passes.layouts import CyclicLayout
from .emitter import handles
from .memory import _bits, _mask_all, _pack_store, _utype, to_bits

_CHAIN = {"cast", "binary", "unary", "select", "fma", "convert_layout"}


def _derives_from(v, src, depth=0) -> bool:
    """v is computed from src through elementwise ops (the epilogue: activation, cast)."""
    if v is src:
        return True
    op = v.owner
    if depth > 32 or not isinstance(op, Op) or op.opcode not in _CHAIN:
        return False
    return any(is_block(o.type) and _derives_from(o, src, depth + 1) for o in op.operands)


def claim_stores(out_op):
    """Rename to `dot_store` the stores after `out_op` (a dot_acc_out) in its block whose
    value derives from it and whose pointer / mask are index-computable in a group-cyclic
    layout shared with the value."""
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
        op.opcode = "dot_store"


class _Recompute(CyclicLayout):
    """The same geometry under another key: em.at() then evaluates index-computable values from
    their index math where they are used instead of reading their materialized arrays."""

    def __init__(self, lay):
        super().__init__(lay.numel, lay.num_threads, lay.vec)

    def key(self):
        return ("recompute",) + super().key()


@handles("dot_store")
def _dot_store(em, op):
    ptr, val = op.operands[0], op.operands[1]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    dt = val.dtype
    lay = ptr.attrs["layout"]
    rl = _Recompute(lay)
    size = max(1, dt.bits // 8)
    b = _bits(dt)
    ut = _utype(b)
    vec = lay.vec
    width = min(16, vec * size)
    per = vec * size // width
    contig = ptr.attrs.get("contig", 1) >= vec
    em.emit("#pragma unroll")
    with em.scope(f"for (int g = 0; g < {lay.groups}; ++g)"):
        first = "g * %d" % vec
        v = lay.valid("tid", first)
        if v:
            em.emit(f"if (!{v}) continue;")
        raw = em.fresh("raw")
        em.emit(f"{ut} {raw}[{vec}];")
        for j in range(vec):
            em.emit(f"{raw}[{j}] = ({ut})({to_bits(dt, em.at(val, f'{first} + {j}'))});")
        p0 = em.fresh("p0")
        em.emit(f"{em.ctype(ptr)} {p0} = {em.at(ptr, first, rl)};")
        conds = [f"((u64)({p0}) & {width - 1}) == 0"] if vec > 1 else []
        if not contig and vec > 1:
            conds += [f"{em.at(ptr, f'{first} + {j}', rl)} == {p0} + {j}" for j in range(1, vec)]
        if mask is not None:
            conds += _mask_all(em, mask, rl, first, vec)
        if vec > 1:
            with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
                for a in range(per):
                    k = width // size
                    em.emit(_pack_store(p0, a * width, width, size,
                                        [f"{raw}[{a * k + e}]" for e in range(k)]))
            em.emit("else")
        with em.scope(""):
            for j in range(vec):
                pj = f"{p0} + {j}" if contig else em.at(ptr, f"{first} + {j}", rl)
                mj = em.at(mask, f"{first} + {j}", rl) if mask is not None else "true"
                em.emit(f"nt_stp{b}({pj}, {mj}, {raw}[{j}]);")
