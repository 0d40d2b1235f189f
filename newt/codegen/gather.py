"""gather and histogram: elements read from anywhere in a block, through the scratch arena
(op.attrs["smem"], sized by passes/scratch.py).

gather: every thread writes its valid source slots at their flat index, a barrier, then every
result slot reads the source element whose coordinates are its own with the `axis` coordinate
replaced by its index (an index outside the axis reads 0, where Triton leaves it undefined).
A scalar index into a 1-D source gives a scalar, read by every thread.

histogram: the bins are zeroed, a barrier, each valid slot (in range, mask true) adds one with a
shared-memory atomicAdd, a barrier, each result slot reads its bin.
"""
from __future__ import annotations

from ..ir.core import is_block
from ..ir.layouts import coords_of, flat_of
from .emitter import handles


def stage(em, op, x, buf: str):
    """Write block `x` into `buf` at flat indices (after a barrier when the region may still be
    read by the previous user), then a barrier."""
    if op.attrs.get("sync_first"):
        em.barrier()
    xl = x.attrs["layout"]
    with em.slots(xl.nslots) as s:
        v = xl.valid("tid", s)
        st = f"{buf}[{xl.flat('tid', s)}] = {em.at(x, s)};"
        em.emit(f"if ({v}) {st}" if v else st)
    em.barrier()


def unstage(em, r, buf: str, zero: str):
    """Read the result `r` back from the shared buffer `buf` (flat, in `r`'s shape) into its
    register layout; padding slots take `zero`."""
    rl = r.attrs["layout"]
    out = em.declare(r)
    with em.slots(rl.nslots) as s:
        v = rl.valid("tid", s)
        rd = f"{buf}[{rl.flat('tid', s)}]"
        em.emit(f"{out}[{s}] = {f'{v} ? {rd} : {zero}' if v else rd};")


@handles("gather")
def _gather(em, op):
    src, idx = op.operands
    r, axis = op.result, op.attrs["axis"]
    ct = em.ctype(src)
    n = src.shape[axis]
    buf = em.fresh("gbuf")
    em.emit(f"{ct}* {buf} = {em.smem(op, ct)};")
    stage(em, op, src, buf)
    if not is_block(r.type):
        i = em.name(idx)
        em.declare(r, f"((u32)({i}) < {n}u ? {buf}[{i}] : ({ct})0)")
        return
    rl = r.attrs["layout"]
    out = em.declare(r)
    with em.slots(rl.nslots) as s:
        coords = coords_of(rl.flat("tid", s), r.shape)
        k = em.fresh("k")
        em.emit(f"i32 {k} = {em.at(idx, s, rl)};")
        coords[axis] = k
        ok = f"(u32){k} < {n}u"
        v = rl.valid("tid", s)
        cond = f"{v} && {ok}" if v else ok
        em.emit(f"{out}[{s}] = {cond} ? {buf}[{flat_of(coords, src.shape)}] : ({ct})0;")


@handles("histogram")
def _histogram(em, op):
    x = op.operands[0]
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    r, nb = op.result, op.attrs["num_bins"]
    bins = em.fresh("bins")
    if op.attrs.get("sync_first"):
        em.barrier()
    em.emit(f"i32* {bins} = {em.smem(op, 'i32')};")
    em.emit(f"for (int i = tid; i < {nb}; i += {em.T}) {bins}[i] = 0;")
    em.barrier()
    xl = x.attrs["layout"]
    with em.slots(xl.nslots) as s:
        conds = [c for c in (xl.valid("tid", s), mask is not None and em.at(mask, s, xl)) if c]
        val = em.fresh("hv")
        em.emit(f"u64 {val} = (u64)(i64)({em.at(x, s)});")
        conds.append(f"{val} < {nb}u")
        em.emit(f"if ({' && '.join(conds)}) atomicAdd(&{bins}[{val}], 1);")
    em.barrier()
    unstage(em, r, bins, "0")
