"""Codegen of a persistent kernel (the facts of newt/passes/tc/persistent.py).

Where it sits: generate() (codegen/__init__.py) wraps the kernel body in the program loop
(`open_kernel` / `close_kernel`); dot_ring.py, dot_tma.py and store_tma.py call the hooks
below for the ring and the epilogue of the one dot the plan names.

    nt_grid                     hidden last parameter: the launch's grid x (programs)
    ring state, once per CTA    barriers; nt_c (next copy to consume), nt_g (next copy to
                                issue), the producer's program (nt_pti-th of this CTA) and
                                k-step (nt_pk) with its box coordinates (nt_co*)
    prologue                    copies 0 .. D-1 (D = S - 1)
    for nt_pid = blockIdx.x; nt_pid < nt_grid; nt_pid += gridDim.x:
        the body: per k-step, consume copy nt_c, release copy nt_c - 1, issue copy nt_c + D
        (the next program's first k-steps while this one's last are consumed)
        after the loop: wait for every wgmma, release the last copy; its stage is free
        epilogue: the C tile's panels in the freed stage (and the region `nt_extra`), one
        thread's TMA store, its wait deferred to the next reuse of either
    thread 0 waits for the last store's reads

The producer's coordinates come from a copy of the pid slice evaluated at its own program, once
per program: thread 0 issues copies on the consumers' critical path, and a division per copy
there cost 15% (passes/tc/persistent.py).
"""
from __future__ import annotations

import contextlib

from .dot import own_region
from .dot_ptx import add_helpers
from .dot_loop import trip_count
from .dot_ptx import PRELUDE
from .dot_tma import ring_barriers, issue_boxes, setup


def plan_of(em):
    return em.fn.attrs.get("persistent")


def runs(em, ring) -> bool:
    """`ring` runs on across the programs of a persistent kernel."""
    plan = plan_of(em)
    return plan is not None and plan.ring is ring


@contextlib.contextmanager
def renamed(em, names: dict):
    """Value id -> C name overrides for the ops emitted inside (restored after)."""
    saved = {i: em.names.get(i) for i in names}
    em.names.update(names)
    try:
        yield
    finally:
        for i, n in saved.items():
            if n is None:
                em.names.pop(i, None)
            else:
                em.names[i] = n


def clone_slice(em, ops, pid: str) -> dict:
    """Emit a copy of the scalar ops `ops` with fresh names and program id `pid` (axis 0);
    returns the value id -> name map of the copy (use it under renamed)."""
    names = {}
    saved_pid = em.pid_x
    em.pid_x = pid
    try:
        for op in ops:
            names[op.result.id] = em.fresh((op.result.name or "v") + "_p")
            with renamed(em, names):
                em.op(op)
    finally:
        em.pid_x = saved_pid
    return names


def open_kernel(em):
    """Before the body: the ring's barriers and counters, the trip count, the first D copies
    (D = ring.defer: S - 1 as planned, so each k-step refills the stage released in the same
    k-step); then the program loop's header."""
    plan = plan_of(em)
    ring, st = plan.ring, em.state(plan)
    S = ring.stages
    add_helpers(em, ("newt_dot_prelude", PRELUDE))    # (what the TMA helpers build on)
    region = next(o.attrs["smem"] for o in plan.loop.regions[0].ops
                  if o.opcode == "dot" and o.attrs.get("ring") is ring)
    setup(em, ring, region, em.emit)
    full, _ = ring_barriers(em, ring)
    # the panels beyond the ring's freed stage (passes/tc/regions.py)
    st["extra"] = own_region(em, plan.store.attrs["smem"]) if plan.extra_bytes else "0u"
    em.emit("int nt_c = 0, nt_g = 0, nt_pti = 0, nt_pk = 0, nt_free_slot = 0;")
    em.emit("bool nt_pending = false;   // thread 0's last TMA store may still read its panels")
    ncoord = sum(2 + len(t.outer) for t in ring.tma)
    em.emit(f"int {', '.join(f'nt_co{i} = 0' for i in range(ncoord))};")
    # the loop's trip count, the same for every program (the pass checked)
    lb, ub, step = plan.loop.operands[:3]
    with renamed(em, clone_slice(em, plan.bound_ops, "(i32)blockIdx.x")):
        em.emit(f"const int nt_nk = {trip_count(em.name(lb), em.name(ub), em.name(step))};")
    em.emit("const int nt_mine = nt_grid > (int)blockIdx.x ? (nt_grid - (int)blockIdx.x + "
            "(int)gridDim.x - 1) / (int)gridDim.x : 0;")
    em.emit("const int nt_steps = nt_mine * nt_nk;   // this CTA's copies")
    assert 1 <= ring.defer <= S - 1, ring.defer
    with em.scope(f"for (int nt_i = 0; nt_i < {ring.defer}; ++nt_i)"):
        produce(em)
    em.emit("for (i32 nt_pid = (i32)blockIdx.x; nt_pid < nt_grid; nt_pid += (i32)gridDim.x) {")
    em.ind += 1


def close_kernel(em):
    em.ind -= 1
    em.emit("}")
    em.emit("if (tid == 0 && nt_pending) newt_bulk_wait_read();")


def produce(em):
    """(thread 0) the next copy of this CTA's sequence, if any: its program's coordinates
    when it starts a program, the wait for the store that read the freed stage."""
    plan = plan_of(em)
    ring = plan.ring
    with em.scope("if (tid == 0 && nt_g < nt_steps)"):
        coords = [v for t in ring.tma for v in (t.row0, t.col0, *t.outer)]
        with em.scope("if (nt_pk == 0)"):
            names = clone_slice(em, plan.slice_ops,
                           "((i32)blockIdx.x + nt_pti * (i32)gridDim.x)")
            with renamed(em, names):
                for i, v in enumerate(coords):
                    if not isinstance(v, int):
                        em.emit(f"nt_co{i} = (int){em.name(v)};")
        co = {v.id: f"nt_co{i}" for i, v in enumerate(coords) if not isinstance(v, int)}
        with renamed(em, co):
            issue_boxes(em, ring, "nt_g", "nt_pk", before_copies=(
                "if (nt_pending && s == nt_free_slot) { newt_bulk_wait_read(); "
                "nt_pending = false; }",))
        em.emit("if (++nt_pk == nt_nk) { nt_pk = 0; ++nt_pti; }")
    em.emit("++nt_g;")


def consume_produce(em, ring, consume, it: str):
    """A k-step of the loop body: consume copy nt_c, release the one before it (not at a
    program's first k-step: the last one of the previous program was released after its
    loop), issue the copy D ahead (nt_g = nt_c + D: the prologue issued D)."""
    S = ring.stages
    full, empty = ring_barriers(em, ring)
    em.emit(f"newt_mbar_wait({full} + 8u * (nt_c % {S}), (nt_c / {S}) & 1);")
    consume("nt_c", 1)
    em.emit("__syncwarp();")
    em.emit(f"if ({it} >= 1 && lane == 0) newt_mbar_arrive({empty} + 8u * ((nt_c - 1) % {S}));")
    produce(em)
    em.emit("__syncwarp();   // warp 0 converged again before the .aligned wgmma")
    em.emit("++nt_c;")


def drain(em, ring, pin):
    """After the program's loop: every wgmma retired, the last copy released; its stage holds
    the epilogue's first panels."""
    S = ring.stages
    _, empty = ring_barriers(em, ring)
    em.emit("newt_wgmma_wait<0>();")
    pin()
    em.emit(f"if (nt_nk > 0 && lane == 0) newt_mbar_arrive({empty} + 8u * ((nt_c - 1) % {S}));")
    em.emit(f"nt_free_slot = nt_nk > 0 ? (nt_c - 1) % {S} : 0;")
    em.emit("newt_fence_proxy_async();")
    em.barrier()


def panel(em, q: str) -> str:
    """The shared-space address of C panel q (a C expression of q)."""
    plan = plan_of(em)
    ring, st = plan.ring, em.state(plan)
    free = f"({em.state(ring)['base']} + (u32)nt_free_slot * {ring.stage_bytes}u)"
    if plan.free_boxes == plan.n_boxes:
        return f"({free} + (u32)({q}) * {plan.box_bytes}u)"
    return (f"(({q}) < {plan.free_boxes} ? {free} + (u32)({q}) * {plan.box_bytes}u : "
            f"{st['extra']} + (u32)(({q}) - {plan.free_boxes}) * {plan.box_bytes}u)")


def before_staging(em):
    """Before the epilogue writes its panels: the previous program's store has read them."""
    em.emit("if (tid == 0 && nt_pending) { newt_bulk_wait_read(); nt_pending = false; }")
