"""Codegen of a tile ring fed by TMA boxes (the facts of newt/passes/tc/ring_tma.py): attention's K
and V tiles copied by one thread, completing on one mbarrier per ring buffer.

Where it sits: codegen helpers for dot_loads.py (the ring's prologue and its copies of later
iterations), dot.py and dot_loop.py (the first dot's wait). The ring keeps plan_prefetch's
schedule (passes/tc/dot_loads.py) and replaces only how a tile lands:

    before the loop   fence.proxy.async (tiles staged before the loop by st.shared, Q, are
                      read by wgmma), thread 0 initialises R mbarriers (count 1), barrier;
                      the copies of the first `ahead` iterations
    copies of it      thread 0: arm buffer b = ((it - lb) / step) % R with both tiles' bytes
                      (mbarrier.arrive.expect_tx), one box per 128-byte panel of each tile
    the first dot     every thread waits for its iteration's buffer, phase
                      ((it - lb) / step / R) & 1, instead of cp.async.wait_group, the proxy
                      fence and (with late copies, where a second barrier guards the buffers)
                      the block barrier

Out-of-bounds rows read 0 and count towards the bytes, so the masked key tail needs no code.
A buffer is rewritten only after the barrier that follows every warp's wgmma wait on it, as
with cp.async: both proxies' ordering is the wgmma wait plus that barrier.
"""
from __future__ import annotations

from .dot import dot_tiles, own_region
from .dot_ptx import add_helpers
from .dot_tma import map_param
from ...ir.schedule import tile_boxes
from .tma import TMA_HELPERS, load_nd_helper


def _helpers_for(em, pre):
    add_helpers(em, ("newt_tma_helpers", TMA_HELPERS))
    for rb in pre.attrs["tma"]:
        rank = 2 + len(rb.coords)
        if rank > 2:
            add_helpers(em, (f"newt_tma_load_{rank}d", load_nd_helper(rank)))


def _stage(em, pre, it):
    loop = pre.attrs["loop"].x
    lb, step = em.name(loop.operands[0]), em.name(loop.operands[2])
    R = pre.attrs["loads"].x[0].attrs["tile"].dot.attrs["tile_ring"]
    j = f"((({it}) - {lb}) / {step})"
    return f"({em.state(pre)['bars']} + 8u * (u32)({j} % {R}))", f"(u32)(({j} / {R}) & 1)"


def prologue(em, pre):
    """Before the loop (after dot_tile_prefetch's barrier): the ring's mbarriers."""
    _helpers_for(em, pre)
    R = pre.attrs["loads"].x[0].attrs["tile"].dot.attrs["tile_ring"]
    # R mbarriers in a region of their own (passes/tc/regions.py)
    sym = em.fresh("ring_bar")
    em.emit(f"const u32 {sym} = {own_region(em, pre.attrs['smem'])};")
    em.state(pre)["bars"] = sym
    em.emit("newt_fence_proxy_async();   // staged tiles (st.shared) are read by wgmma")
    em.emit(f"if (tid == 0) {{ for (int s = 0; s < {R}; ++s) "
            f"newt_mbar_init({em.state(pre)['bars']} + 8u * s, 1); newt_fence_mbar_init(); }}")
    em.barrier()


def issue(em, pre, it):
    """Thread 0 copies both tiles of the iteration whose induction variable is `it`."""
    bar, _ = _stage(em, pre, it)
    loads = pre.attrs["loads"].x
    nbytes = sum(rb.rows * rb.cols * rb.esize for rb in pre.attrs["tma"])
    with em.scope("if (tid == 0)"):
        em.emit(f"const u32 fb = {bar};")
        em.emit(f"newt_mbar_expect_tx(fb, {nbytes}u);")
        for ld, rb in zip(loads, pre.attrs["tma"]):
            dot = ld.attrs["tile"].dot
            _, tb, _ = dot_tiles(em, dot, dot.attrs["dot_plan"], it)
            row = _row(em, rb, it)
            outer = "".join(f", (int){em.name(u)}" for u in rb.coords)
            rank = 2 + len(rb.coords)
            _, boxes = tile_boxes(rb.rows, rb.cols, rb.esize)
            for inner, soff in boxes:
                em.emit(f"newt_tma_load_{rank}d({tb.base} + {soff}u, &{map_param(rb.map_index)}, "
                        f"{rb.col0 + inner}, {row}{outer}, fb);")
    em.emit("__syncwarp();   // warp 0 converged again before the next .aligned wgmma")


def _row(em, rb, it):
    step = f"({it})" if rb.row_c == 1 else f"({it}) * {rb.row_c}"
    if rb.row_c == 0:
        step = "0"
    if rb.row_rest is None:
        return f"(int)({step})"
    rest = str(rb.row_rest) if isinstance(rb.row_rest, int) else em.name(rb.row_rest)
    return f"(int)({rest} + {step})"


def wait(em, pre, it, guard=None):
    """Every thread waits until the tiles of iteration `it` have landed (if `guard`, a C
    condition, holds: an iteration the loop may not have)."""
    bar, parity = _stage(em, pre, it)
    w = f"newt_mbar_wait({bar}, {parity});"
    em.emit(f"if ({guard}) {w}" if guard else w)
