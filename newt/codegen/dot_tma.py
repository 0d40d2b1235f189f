"""Codegen of a dot ring fed by TMA boxes (the facts of newt/passes/dot_tma.py).

Where it sits: called by dot_ring.py for a RingPlan with `tma` set. The ring keeps its S stages
of [A tile | B tile]; behind them sit S "full" and S "empty" mbarriers. Per iteration i, with
D = S - 2 (ring.defer):

    producer (thread 0)   wait empty[i % S] for tile i-S (every warp released it); arm full[i % S]
                          with the stage's bytes; one cp.async.bulk.tensor per box of tile i
    consumer (every warp) c = i - D: wait full[c % S]; wgmma over the stage; wait_group 1 (tile
                          c-1's wgmma retired); lane 0 of each warp arrives on empty[(c-1) % S]
    last iteration        consume the remaining tiles, wait for every wgmma, barrier

No CTA barrier is left in the loop and one thread issues all copies: the per-thread address
and mask work of the cp.async ring is gone (DESIGN.md, Hopper). Why D = S-2: thread 0 waits at
iteration i for releases made at iteration i-1 at the latest, which every warp -- thread 0's
own included -- has passed, so nothing waits on itself. The same schedule as the standalone
kernel of wgmma.py (tma=True), measured there at Triton's speed.

The kernel takes one `const __grid_constant__ newt_tmap` per operand (nt_tmap<k>, after the
user's parameters); the launcher encodes them from the call's arguments
(newt/runtime/tensormap.py, recipes in fn.attrs["tma_maps"]).
"""
from __future__ import annotations

from .dot import _helpers, _region
from .tma import TMA_HELPERS, tile_boxes


def map_param(k: int) -> str:
    return f"nt_tmap{k}"


def _bars(ring):
    st = ring.state
    full = f"({st['base']} + {ring.stages * ring.stage_bytes}u)"
    return full, f"({full} + {8 * ring.stages}u)"


def emit_producer(em, op, ring, it: str, before_loop):
    """At the ring's first load: (once) the region, its barriers' initialisation before the
    loop; then this iteration's boxes (thread 0)."""
    st = ring.state
    _helpers(em, ("newt_tma_helpers", TMA_HELPERS))
    S = ring.stages
    if "base" not in st:
        st["base"] = _region(em, S * ring.stage_bytes + 16 * S)
        full, empty = _bars(ring)
        # before the loop: the barriers exist before any copy or wait (a declaration of the
        # region's symbol goes first: _region emitted it inside the loop body)
        nwarps = em.T // 32
        before_loop("extern __shared__ __align__(16) unsigned char nt_dot_smem[];")
        before_loop(f"if (tid == 0) {{ for (int s = 0; s < {S}; ++s) {{ "
                    f"newt_mbar_init({full} + 8u * s, 1); "
                    f"newt_mbar_init({empty} + 8u * s, {nwarps}); }} newt_fence_mbar_init(); }}")
        before_loop("__syncthreads();")
    full, empty = _bars(ring)
    ta, tb = ring.tma
    nbytes = sum(t.rows * t.cols * t.esize for t in (ta, tb))
    with em.scope("if (tid == 0)"):
        em.emit(f"const int s = {it} % {S};")
        em.emit(f"if ({it} >= {S}) newt_mbar_wait({empty} + 8u * s, (({it} / {S}) - 1) & 1);")
        em.emit(f"const u32 fb = {full} + 8u * s;")
        em.emit(f"const u32 st = {st['base']} + (u32)s * {ring.stage_bytes}u;")
        em.emit(f"newt_mbar_expect_tx(fb, {nbytes}u);")
        for t, off in ((ta, 0), (tb, ring.a_bytes)):
            x, y = t.coords(em, it)
            _, boxes = tile_boxes(t.rows, t.cols, t.esize)
            for inner, soff in boxes:
                em.emit(f"newt_tma_load_2d(st + {off + soff}u, &{map_param(t.map_index)}, "
                        f"{x} + {inner}, {y}, fb);")
    em.emit("__syncwarp();   // warp 0 converged again before the .aligned wgmma")


def emit_consumer(em, ring, consume, it: str, last: str):
    """The dot's side: consume tile it - D (release the one before it), and at the last
    iteration the remaining tiles. `consume(index_expr, wait)` emits one tile's wgmma."""
    S, D = ring.stages, ring.defer
    full, empty = _bars(ring)
    with em.scope(f"if ({it} >= {D})"):
        em.emit(f"const int c = {it} - {D};")
        em.emit(f"newt_mbar_wait({full} + 8u * (c % {S}), (c / {S}) & 1);")
        consume("c", 1)
        em.emit("__syncwarp();")
        em.emit(f"if (c >= 1 && lane == 0) newt_mbar_arrive({empty} + 8u * ((c - 1) % {S}));")
    with em.scope(f"if ({last})"):
        with em.scope(f"for (int ring_c = max({it} - {D} + 1, 0); ring_c <= {it}; ++ring_c)"):
            em.emit(f"newt_mbar_wait({full} + 8u * (ring_c % {S}), (ring_c / {S}) & 1);")
            consume("ring_c", 0)
        em.emit("newt_wgmma_wait<0>();")
        # the epilogue may stage through the ring (dot_epilogue.py): generic-proxy writes after
        # the async proxy's
        em.emit("newt_fence_proxy_async();")
        em.barrier()
