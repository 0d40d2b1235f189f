"""Codegen of a dot ring fed by TMA boxes (the facts of newt/passes/tc/dot_tma.py).

Where it sits: called by dot_ring.py for a RingPlan with `tma` set. The ring keeps its S stages
of [A tile | B tile]; behind them sit S "full" and S "empty" mbarriers. Per iteration i, with
D = S - 1 (ring.defer):

    consumer (every warp) c = i - D: wait full[c % S]; wgmma over the stage; wait_group 1 (tile
                          c-1's wgmma retired); lane 0 of each warp arrives on empty[(c-1) % S]
    producer (thread 0)   wait empty[i % S] for tile i-S (every warp released it); arm full[i % S]
                          with the stage's bytes; one cp.async.bulk.tensor per box of tile i
    last iteration        consume the remaining tiles, wait for every wgmma, barrier

No CTA barrier is left in the loop and one thread issues all copies: the per-thread address
and mask work of the cp.async ring is gone (DESIGN.md, Hopper). Why D = S-1 and the consumer
first: tile i-S, whose stage the copies of iteration i reuse, is released by the consumption of
tile i-S+1 = i-D in the same iteration, before thread 0 waits for it, so S-1 tiles are in
flight (Triton's depth for the same num_stages). Thread 0 then waits for every warp's wgmma of
the iteration to be issued and the one before retired; no warp waits for thread 0 inside the
iteration, so nothing waits on itself. (Producer first needs D = S-2: one tile fewer in
flight. Measured on the H200, 2026-11-29: the 3-stage configs ran 12-17% faster with D = S-1,
e.g. fp16 4096^3 at 128x256x64 553 -> 645-648 TFLOP/s.)

The kernel takes one `const __grid_constant__ newt_tmap` per operand (nt_tmap<k>, after the
user's parameters); the launcher encodes them from the call's arguments
(newt/runtime/tensormap.py, recipes in fn.attrs["tma_maps"]).
"""
from __future__ import annotations

from .dot import own_region
from .dot_ptx import add_helpers
from ...ir.schedule import tile_boxes
from .tma import TMA_HELPERS, load_nd_helper


def operand_coords(em, t, it: str) -> tuple[str, str]:
    """C expressions of TmaOperand t's tile (first column, first row) at ring iteration `it`."""
    c = [_c(em, t.row0), _c(em, t.col0)]
    c[t.adv_axis] = f"({c[t.adv_axis]} + {it} * {t.adv})"
    return c[1], c[0]


def _c(em, v) -> str:
    return str(v) if isinstance(v, int) else f"(int){em.name(v)}"


def map_param(k: int) -> str:
    return f"nt_tmap{k}"


def ring_barriers(em, ring):
    st = em.state(ring)
    full = f"({st['base']} + {st['bars']}u)"
    return full, f"({full} + {8 * ring.stages}u)"


def setup(em, ring, region, before_loop):
    """(once per ring) its region (passes/tc/regions.py: the stages or the epilogue's larger
    staging, then the 2 S mbarriers), and its barriers initialised before the loop."""
    st = em.state(ring)
    add_helpers(em, ("newt_tma_helpers", TMA_HELPERS))
    if "base" in st:
        return
    S = ring.stages
    st["base"] = own_region(em, region)
    st["bars"] = region.nbytes - 16 * S     # the region's last bytes (passes/tc/regions.py)
    full, empty = ring_barriers(em, ring)
    # a declaration of the region's symbol goes first: own_region emitted it inside the loop body
    nwarps = em.T // 32
    before_loop("extern __shared__ __align__(16) unsigned char nt_dot_smem[];")
    before_loop(f"if (tid == 0) {{ for (int s = 0; s < {S}; ++s) {{ "
                f"newt_mbar_init({full} + 8u * s, 1); "
                f"newt_mbar_init({empty} + 8u * s, {nwarps}); }} newt_fence_mbar_init(); }}")
    before_loop("__syncthreads();")


def emit_producer(em, ring, it: str):
    """This iteration's boxes (thread 0), into the stage tile it - S left."""
    with em.scope("if (tid == 0)"):
        issue_boxes(em, ring, it, it)
    em.emit("__syncwarp();   // warp 0 converged again before the .aligned wgmma")


def issue_boxes(em, ring, g: str, k: str, before_copies=()):
    """(thread 0) ring copy number `g` into stage g % S, once tile g - S left it: the boxes of
    k-step `k` (the loop's iteration; g itself unless the ring runs across programs,
    codegen/tc/persistent.py). `before_copies`: lines between the empty wait and the copies."""
    st = em.state(ring)
    S = ring.stages
    full, empty = ring_barriers(em, ring)
    ta, tb = ring.tma
    nbytes = sum(t.rows * t.cols * t.esize for t in (ta, tb))
    em.emit(f"const int s = {g} % {S};")
    em.emit(f"if ({g} >= {S}) newt_mbar_wait({empty} + 8u * s, (({g} / {S}) - 1) & 1);")
    for line in before_copies:
        em.emit(line)
    em.emit(f"const u32 fb = {full} + 8u * s;")
    em.emit(f"const u32 st = {st['base']} + (u32)s * {ring.stage_bytes}u;")
    em.emit(f"newt_mbar_expect_tx(fb, {nbytes}u);")
    for t, off in ((ta, 0), (tb, ring.a_bytes)):
        x, y = operand_coords(em, t, k)
        _, boxes = tile_boxes(t.rows, t.cols, t.esize)
        # a batch (the map's outer dimensions): one index each, the same for every box
        outer = "".join(f", {_c(em, u)}" for u in t.outer)
        rank = 2 + len(t.outer)
        if rank > 2:
            add_helpers(em, (f"newt_tma_load_{rank}d", load_nd_helper(rank)))
        for inner, soff in boxes:
            em.emit(f"newt_tma_load_{rank}d(st + {off + soff}u, &{map_param(t.map_index)}, "
                    f"{x} + {inner}, {y}{outer}, fb);")


def emit_consume(em, ring, consume, it: str):
    """Consume tile it - D; release the one before it (each warp's lane 0 arrives on its
    empty barrier once the warp's wgmma reading it retired)."""
    S, D = ring.stages, ring.defer
    full, empty = ring_barriers(em, ring)
    with em.scope(f"if ({it} >= {D})"):
        em.emit(f"const int c = {it} - {D};")
        em.emit(f"newt_mbar_wait({full} + 8u * (c % {S}), (c / {S}) & 1);")
        consume("c", 1)
        em.emit("__syncwarp();")
        em.emit(f"if (c >= 1 && lane == 0) newt_mbar_arrive({empty} + 8u * ((c - 1) % {S}));")


def emit_drain(em, ring, consume, last: str, pin):
    """After the loop (its last iteration was `last`): the tiles not consumed yet, then every
    wgmma retired (`pin()` keeps later reads of the accumulator after the wait)."""
    S, D = ring.stages, ring.defer
    full, _ = ring_barriers(em, ring)
    with em.scope(f"for (int ring_c = max({last} - {D} + 1, 0); ring_c <= {last}; ++ring_c)"):
        em.emit(f"newt_mbar_wait({full} + 8u * (ring_c % {S}), (ring_c / {S}) & 1);")
        consume("ring_c", 0)
    em.emit("newt_wgmma_wait<0>();")
    pin()
    # the epilogue may stage through the ring (dot_epilogue.py): generic-proxy writes after
    # the async proxy's
    em.emit("newt_fence_proxy_async();")
    em.barrier()
