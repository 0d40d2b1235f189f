"""Codegen of tensor-core dots inside loops: what is declared once before the loop, the
rotated first dot of a tile ring, and the register pin after a wgmma wait.

Where it sits: codegen helpers for newt/codegen/tc/dot.py (emit_dot), dot_loads.py (the ring's
prologue) and dot_ring.py (the drain after a K loop). The decisions are the passes'
(newt/passes/tc/dot_loads.py, plan_prefetch: attr "rotate"); the C names of the rotated
scores and of a staged A descriptor are codegen's own (Emitter.state), not IR facts.
"""
from __future__ import annotations

from .dot import dot_tiles, opaque_thread
from .dot_ptx import add_helpers
from .mma import a_tile_desc, emit_wgmma


def in_loop(op) -> bool:
    """`op` sits directly in the body of a `for` loop."""
    p = op.parent.parent if op.parent is not None else None
    return getattr(p, "opcode", None) == "for"


def staged_a_desc(em, op, ta=None):
    """For a dot in a loop whose A tile was staged before it (dot_stage_a): the A descriptor
    declared once before the loop (2 uniform registers: it comes from the shuffled warp index,
    dot._WARP_UNIFORM) instead of rebuilt every iteration from the thread index (about 15
    instructions on the path to the wgmma). Before the loop's header exists (the ring's
    prologue) it is declared where the call is."""
    from .dot_ring import emit_before_loop
    d = em.state(op).get("a_desc")
    if d is None:
        if ta is None:
            ta, _, _ = dot_tiles(em, op, op.attrs["dot_plan"])
        d = em.state(op)["a_desc"] = em.fresh("adesc")
        emit_before_loop(em, op, f"const newt_u64 {d} = {a_tile_desc(em, ta, op.result.attrs['layout'])};")
    return d


def trip_count(lb: str, ub: str, step: str) -> str:
    """C expression of the iterations of `for (i = lb; i < ub (step > 0) or > ub; i += step)`,
    for the ring's drain (dot_ring.py) and a persistent kernel's copies (persistent.py)."""
    return (f"{step} > 0 ? ({ub} > {lb} ? ({ub} - {lb} + {step} - 1) / {step} : 0)"
            f" : ({lb} > {ub} ? ({lb} - {ub} - {step} - 1) / (-{step}) : 0)")


def pin_registers(em, name, nslots):
    """An empty asm reading and writing every slot of register array `name`, right after a
    wgmma wait: the wait is an asm statement with no register operands, so without it NVVM
    may move reads of the accumulator (an epilogue's conversions) above the wait, and ptxas
    then serializes every wgmma of the kernel (C7514)."""
    add_helpers(em, ("newt_pin", _PIN))
    with em.slots(nslots) as s:
        em.emit(f"newt_pin({name}[{s}]);")


# (the CPU emulator of generated code compiles the same text: no register constraint there)
_PIN = """NT_INLINE void newt_pin(float& x) {
#ifdef __CUDA_ARCH__
  asm volatile("" : "+f"(x));
#endif
}
NT_INLINE void newt_pin(int& x) {   // int8 products accumulate in int32
#ifdef __CUDA_ARCH__
  asm volatile("" : "+r"(x));
#endif
}
"""


def declare_rotated(em, op):
    """The two register arrays of a rotated dot (passes/tc/dot_loads.py, plan_prefetch): the
    current iteration's result and the next one's, in flight."""
    lay = op.result.attrs["layout"]
    names = (em.fresh("rot_cur"), em.fresh("rot_next"))
    for nm in names:
        em.emit(f"float {nm}[{lay.nslots}];")
    em.state(op)["rotated"] = names


def emit_rotated(em, op, iv, which):
    """Issue the rotated dot `op` (acc zero, A the staged tile) for the iteration whose
    induction variable is the C expression iv, into its "cur" or "next" array; commit, no
    wait."""
    plan = op.attrs["dot_plan"]
    lay = op.result.attrs["layout"]
    n = em.state(op)["rotated"][which == "next"]
    ta, tb, b_kmajor = dot_tiles(em, op, plan, iv)
    with em.scope(""):
        if op.attrs.get("recompute_index"):
            opaque_thread(em)
        # no zero-fill of n: a register write between the wgmma fence and the wgmma makes
        # ptxas serialize every wgmma of the kernel
        emit_wgmma(em, plan, lay, n, ta, tb, b_kmajor, wait=None, zero=True,
               a_desc=staged_a_desc(em, op, ta))


def emit_rotated_dot(em, op):
    """A rotated dot in its loop body: wait for the next iteration's tiles, barrier, issue the
    next iteration's dot (left in flight), copy the tiles `ahead` iterations on; the result
    of this iteration is the array the previous iteration (or the prologue) filled."""
    from .dot_loads import in_range, emit_ahead_tiles
    loop = op.parent.parent
    cur = em.state(op)["rotated"][0]
    em.names[op.result.id] = cur
    nxt = f"({em.name(loop.regions[0].args[0])} + {em.name(loop.operands[2])})"
    rt = op.attrs.get("ring_tma")
    if rt is not None:          # TMA boxes (passes/tc/ring_tma.py): wait for the next tiles
        from . import ring_tma
        ring_tma.wait(em, rt.x, nxt, guard=in_range(em, loop, nxt))
    else:
        em.emit(f"newt_cp_async_wait<{op.attrs['cp_wait']}>();")
        em.emit("newt_fence_proxy_async();")
    em.barrier()                # (buffer i - 1 is free for the copies below)
    with em.scope(f"if ({in_range(em, loop, nxt)})"):
        emit_rotated(em, op, nxt, "next")
    emit_ahead_tiles(em, op.attrs["ring_issue"].x, loop)
