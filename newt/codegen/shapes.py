"""Shape ops: broadcast, reshape, permute and convert_layout, as the layout pass decided
(op.attrs["movement"]):

  none       the result has the source's layout and element order: the same C array
  recompute  the source is index-computable: each slot evaluates the element it needs from
             arange / program ids / scalars (value_at); no data moves
  smem       through the scratch arena: every thread writes its valid slots at their flat
             index, a barrier, every thread reads the source elements its slots need

value_at(em, v, coords) is the recomputation: the C expression of element `coords` of an
index-computable value, built by walking its defining ops down to arange and scalars.
"""
from __future__ import annotations

from ..ir.core import is_block
from ..ir.layouts import coords_of, flat_of
from .elementwise import expr_of
from .emitter import handles


def source_coords(op, coords: list[str]) -> list[str]:
    """Coordinates in the operand of shape op `op` of the result element at `coords`."""
    c, x, r = op.opcode, op.operands[0], op.results[0]
    if c == "broadcast":
        return ["0" if sd == 1 and rd != 1 else cc
                for cc, sd, rd in zip(coords, x.shape, r.shape)]
    if c == "reshape":
        return coords_of(flat_of(coords, r.shape), x.shape)
    if c == "permute":
        src = [None] * len(coords)
        for i, o in enumerate(op.attrs["order"]):
            src[o] = coords[i]
        return src
    return list(coords)          # convert_layout


def value_at(em, v, coords: list[str]) -> str:
    if not is_block(v.type):
        return em.name(v)
    op = v.owner
    c = op.opcode
    if c == "arange":
        return f"({op.attrs['start']} + {coords[0]})" if op.attrs["start"] else coords[0]
    if c == "splat":
        return em.name(op.operands[0])
    if c in ("broadcast", "reshape", "permute", "convert_layout"):
        return value_at(em, op.operands[0], source_coords(op, coords))
    if c == "dot_frag_icomp":     # a layout change of index math: the same element
        return value_at(em, op.operands[0], coords)
    return expr_of(em, op, [value_at(em, o, coords) for o in op.operands])


@handles("broadcast", "reshape", "permute", "convert_layout")
def _shape_op(em, op):
    x, r = op.operands[0], op.result
    how = op.attrs.get("movement", "smem")
    if how == "none":
        em.alias(r, x)
        return
    lay = r.attrs["layout"]
    if how == "recompute":
        em.elementwise(op, lambda s: value_at(em, r, coords_of(lay.flat("tid", s), r.shape)))
        return
    exchange(em, op, x, r, lambda coords: source_coords(op, coords))


def exchange(em, op, x, r, src_coords_fn):
    """Move data through the scratch arena: result slot s gets the source element at
    src_coords_fn(coords of s)."""
    ct = em.ctype(x)
    buf = em.fresh("xch")
    if op.attrs.get("sync_first"):
        em.barrier()
    em.emit(f"{ct}* {buf} = {em.smem(op, ct)};")
    xl, rl = x.attrs["layout"], r.attrs["layout"]
    with em.slots(xl.nslots) as s:
        v = xl.valid("tid", s)
        st = f"{buf}[{xl.flat('tid', s)}] = {em.at(x, s)};"
        em.emit(f"if ({v}) {st}" if v else st)
    em.barrier()
    n = em.declare(r)
    with em.slots(rl.nslots) as s:
        src = flat_of(src_coords_fn(coords_of(rl.flat("tid", s), r.shape)), x.shape)
        v = None if getattr(rl, "fill_all_lanes", False) else rl.valid("tid", s)
        rd = f"{buf}[{src}]"
        em.emit(f"{n}[{s}] = {f'{v} ? {rd} : ({ct})0' if v else rd};")
