"""Codegen of the deferred-consumption ring: `dot_ring_load` ops and the ring form of `dot`.

Where it sits: codegen, for IR rewritten by newt/passes/tc/dot_pipeline.py (RingPlan in attrs).
The ring is S stages of [A tile | B tile] in dynamic shared memory (same tile formats as
dot.py). Per loop iteration i (the loop's own induction variable gives i = (iv - lb) / step),
with D = S - 1:

    first ring load   if i >= D: cp.async.wait_group D-1 (tile i-D landed for this thread);
                      fence.proxy.async; barrier (landed for everyone; with mma.sync, every
                      warp is also past the consumption that last read stage i % S);
                      wgmma: consume tile i-D here (fence, mma_async..., commit, wait_group 1:
                      tile i-D stays in flight, tile i-D-1's retires), then a barrier: every
                      warp's tile i-D-1 retired, so its stage, i % S, is free for the copies
    each ring load    per 16-byte group of the pointer block's layout: consecutive, 16-byte
                      aligned and unmasked -> cp.async 16 into stage i % S; otherwise the
                      group is gathered element by element (masked-off elements are 0)
    dot               cp.async.commit_group; mma.sync: if i >= D: consume stage (i-D) % S
                      (ldmatrix + mma); at the last iteration: wait for all copies, consume
                      tiles max(0, i-D+1) .. i, wait for all wgmma, barrier (the ring is free)

The accumulator is the loop-carried value itself (the pass checked that nothing else reads it
inside the loop), so the in-flight wgmma group of one iteration may overlap the next
iteration's copies and barrier.
"""
from __future__ import annotations

import re

from ...ir.layouts import CyclicLayout, coords_of
from ...ir.pointers import split_ptr
from . import persistent
from .dot import Tile, own_region
from .dot_ptx import add_helpers
from .mma import emit_mma_sync, emit_wgmma
from .dot_loop import pin_registers, trip_count
from .dot_masks import group_mask
from .dot_ptx import PRELUDE
from .dot_tma import emit_consume, emit_drain, emit_producer, setup
from .ring_kmajor import kmajor_copies
from ..emitter import handles

try:   # the memory codegen's mask analysis: one test per group where masks are affine
    from ..memory import mask_all
except ImportError:  # pragma: no cover
    mask_all = None


class _Recompute(CyclicLayout):
    """The pointer block's own layout under another key: `em.at(v, s, this)` then evaluates
    index-computable values from their index math (shapes.value_at) instead of reading the
    arrays their ops materialize. Nothing reads those arrays any more, so NVRTC drops them:
    no per-element pointers or mask bits stay alive across the loop."""

    def __init__(self, lay):
        super().__init__(lay.numel, lay.num_threads, lay.vec)

    def key(self):
        return ("recompute",) + super().key()


def emit_before_loop(em, op, line: str):
    """Emit `line` (a declaration from loop-invariant values only) right before the header of
    the `for` loop holding op: NVRTC keeps a test it could not hoist (its pointer terms were
    hoisted instead: 2 registers each) inside the loop otherwise."""
    iv = re.escape(em.name(op.parent.args[0]))
    pat = re.compile(r"\s*for \(\w+ " + iv + " = ")
    for i in range(len(em.lines) - 1, -1, -1):
        if pat.match(em.lines[i]):
            ind = em.lines[i][:len(em.lines[i]) - len(em.lines[i].lstrip())]
            em.lines.insert(i, ind + line)
            return
    em.emit(line)


def _group_copies(em, op, ptr, mask, lay, tile, heads, C, epc, u, rd):
    """One 16-byte copy per layout group, addressed from the loop-invariant pointer array at
    the group's first slot plus the carried offset: only those heads stay alive across the
    loop (a pointer per 16 bytes, as in the standalone kernels), and the mask costs one test
    per group where the run-length facts allow (memory.mask_all)."""
    base, off = heads
    contig = base.attrs.get("contig", 1) >= epc
    o = em.name(off)
    # non-consecutive-by-construction pointers: the other slots of a group are recomputed from
    # index math (loop-invariant tests NVRTC hoists; the gather path only runs when taken)
    # instead of keeping every slot of the pointer array alive
    blay = _Recompute(lay) if base.attrs.get("icomp") else lay
    slot = (lambda j, g="g": em.at(base, f"{g} * {epc} + {j}" if j else f"{g} * {epc}", blay))
    consec = None
    if not contig:   # one loop-invariant flag for all groups (NVRTC hoists it out of the loop)
        consec = em.fresh("consec")
        terms = [f"({slot(j, g)} == {slot(0, g)} + {j})"
                 for g in range(lay.groups) for j in range(1, epc)]
        # `&`, not `&&`: one branch-free expression, which NVRTC hoists out of the loop whole
        emit_before_loop(em, op, f"const bool {consec} = {' & '.join(terms)};")
    # slow groups (tails, misaligned or strided rows) are gathered afterwards in a rolled loop
    # with addresses and masks recomputed from index math: kept out of the unrolled fast loop,
    # their temporaries do not compete with the accumulators for registers
    late = lay.groups <= 32 and base.attrs.get("icomp") and \
        (mask is None or mask.attrs.get("icomp"))
    need = em.fresh("need")
    if late:
        em.emit(f"u32 {need} = 0;")
    if late and lay.groups > 1 and not lay.valid("tid", "0"):
        _strided_copies(em, op, ptr, mask, lay, tile, base, o, C, epc, consec, need)
    else:
        _head_copies(em, ptr, mask, lay, tile, base, o, C, epc, u, rd, consec, late, need,
                     contig, slot)
    if not late:
        return
    _late_gather(em, ptr, mask, lay, tile, base, o, C, epc, u, rd, need)


def _strided_copies(em, op, ptr, mask, lay, tile, base, o, C, epc, consec, need):
    """The standalone kernels' copy loop: where a thread's group heads lie at one constant
    distance d from each other (every in-range tile of the tutorial: rows r0, r0 + 32, ...;
    one loop-invariant test decides it), each group's address is head0 + o + g * d: a pointer
    and a distance stay alive across the loop instead of a pointer per group. Otherwise every
    group takes the out-of-line gather (rows wrapped by `% M`: only edge tiles)."""
    rl = _Recompute(lay)
    h = lambda g: em.at(base, f"{g * epc}", rl)  # noqa: E731
    uni, d = em.fresh("uni"), em.fresh("dist")
    emit_before_loop(em, op, f"const long long {d} = (long long)({h(1)} - {h(0)});")
    terms = [f"({h(g)} == {h(0)} + {g} * {d})" for g in range(2, lay.groups)]
    terms.append(f"((({d}) * {tile.esize}) % 16 == 0)")
    if consec:
        terms.append(consec)
    emit_before_loop(em, op, f"const bool {uni} = {' & '.join(terms)};")
    step = _dst_step(lay, tile, C, epc)
    with em.scope(f"if ({uni})"):
        em.emit(f"const {em.ctype(ptr)} q0 = {h(0)} + {o};")
        em.emit("const bool al = (((u64)(q0)) & 15) == 0;")
        if step is not None:   # the shared-memory side steps by a constant too
            em.emit(f"const int fl0 = {lay.flat('tid', '0')}, rr0 = fl0 / {C}, cc0 = fl0 % {C};")
            em.emit(f"const u32 dst0 = {tile.chunk_addr('rr0', f'cc0 / {epc}')};")
        em.emit("#pragma unroll")
        with em.scope(f"for (int g = 0; g < {lay.groups}; ++g)"):
            first = f"g * {epc}"
            if step is not None:
                em.emit(f"const u32 dst = dst0 + (u32)g * {step}u;")
            else:
                em.emit(f"const int fl = {lay.flat('tid', first)}, rr = fl / {C}, cc = fl % {C};")
                em.emit(f"const u32 dst = {tile.chunk_addr('rr', f'cc / {epc}')};")
            conds = ["al"]
            if mask is not None:
                conds += group_mask(em, mask, [coords_of(rl.flat("tid", f"{first} + {j}"),
                                                         mask.shape) for j in range(epc)])
            with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
                em.emit(f"newt_cp_async16(dst, q0 + g * {d}, 16);")
            with em.scope("else"):
                em.emit(f"{need} |= 1u << g;")
    with em.scope("else"):
        em.emit(f"{need} = {(1 << lay.groups) - 1}u;")


def _dst_step(lay, tile, C, epc):
    """The byte distance between a thread's consecutive groups in the swizzled tile when it
    is the same for every thread and group (checked on the Python model), else None."""
    def off(t, g):
        fl = lay.py_flat(t, g * epc)
        return tile.py_chunk_off(fl // C, (fl % C) // epc)
    step = off(0, 1) - off(0, 0)
    if step < 0 or any(off(t, g) != off(t, 0) + g * step
                       for t in range(lay.num_threads) for g in range(lay.groups)):
        return None
    return step


def _group_head(em, lay, tile, C, epc) -> str:
    """Inside a loop over the layout's groups `g`: skip invalid groups and name the group's
    tile row rr, column cc and 16-byte chunk address dst. Returns the group's first slot."""
    first = f"g * {epc}"
    valid = lay.valid("tid", first)
    if valid:
        em.emit(f"if (!{valid}) continue;")
    em.emit(f"const int fl = {lay.flat('tid', first)}, rr = fl / {C}, cc = fl % {C};")
    em.emit(f"const u32 dst = {tile.chunk_addr('rr', f'cc / {epc}')};")
    return first


def _head_copies(em, ptr, mask, lay, tile, base, o, C, epc, u, rd, consec, late, need, contig,
                 slot):
    em.emit("#pragma unroll")
    with em.scope(f"for (int g = 0; g < {lay.groups}; ++g)"):
        first = _group_head(em, lay, tile, C, epc)
        em.emit(f"const {em.ctype(ptr)} p0 = {em.at(base, first)} + {o};")
        conds = ["(((u64)(p0)) & 15) == 0"]
        if consec:
            conds.append(consec)
        if mask is not None:
            conds += (mask_all(em, mask, lay, first, epc) if mask_all else
                      [em.at(mask, f"{first} + {j}") for j in range(epc)])
        with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
            em.emit("newt_cp_async16(dst, p0, 16);")
        with em.scope("else"):
            if late:
                em.emit(f"{need} |= 1u << g;")
            else:
                _gather(em, ptr, mask, lambda j: f"{slot(j)} + {o}" if not contig else f"p0 + {j}",
                        lambda j: em.at(mask, f"{first} + {j}"), epc, u, rd)


def _late_gather(em, ptr, mask, lay, tile, base, o, C, epc, u, rd, need):
    rl = _Recompute(lay)
    with em.scope(f"if ({need})"):
        em.emit("#pragma unroll 1")
        with em.scope(f"for (int g = 0; g < {lay.groups}; ++g)"):
            em.emit(f"if (!(({need} >> g) & 1u)) continue;")
            em.emit(f"const int fl = {lay.flat('tid', f'g * {epc}')}, rr = fl / {C}, cc = fl % {C};")
            em.emit(f"const u32 dst = {tile.chunk_addr('rr', f'cc / {epc}')};")
            _gather(em, ptr, mask, lambda j: f"{em.at(base, f'g * {epc} + {j}', rl)} + {o}",
                    lambda j: em.at(mask, f"g * {epc} + {j}", rl), epc, u, rd)


def _gather(em, ptr, mask, pj, mj, epc, u, rd):
    em.emit(f"union {{ uint4 v; {u} e[{epc}]; }} t;")
    for j in range(epc):
        m = mj(j) if mask is not None else None
        em.emit(f"t.e[{j}] = {f'{m} ? {rd(pj(j))} : ({u})0' if m else rd(pj(j))};")
    em.emit("newt_st_shared_v4(dst, t.v);")


def _loop_names(em, op):
    loop = op.parent.parent
    iv = op.parent.args[0]
    lb, ub, step = loop.operands[:3]
    return em.name(iv), em.name(lb), em.name(ub), em.name(step)


def _tiles(ring, plan, stage: str, b_kmajor: bool):
    ta = Tile(plan.M, plan.K, plan.esize, stage)
    bbase = f"({stage} + {ring.a_bytes}u)"
    tb = Tile(plan.N, plan.K, plan.esize, bbase) if b_kmajor else \
        Tile(plan.K, plan.N, plan.esize, bbase)
    return ta, tb


@handles("dot_ring_load")
def _ring_load(em, op):
    ring = op.attrs["ring"]
    st = em.state(ring)
    add_helpers(em, ("newt_dot_prelude", PRELUDE))
    if ring.tma is not None:   # boxes by TMA: the first load issues the whole stage
        if op.attrs.get("ring_first"):
            iv, lb, _, step = _loop_names(em, op)
            st["it"] = it = em.fresh("ring_it")
            em.emit(f"const int {it} = (int)(({iv} - {lb}) / {step});")
            if persistent.runs(em, ring):   # (setup: before the program loop)
                return persistent.consume_produce(
                    em, ring, lambda c, w: _consume(em, op, ring, c, w), it)
            setup(em, ring, op.attrs["smem"], lambda line: emit_before_loop(em, op, line))
            emit_consume(em, ring, lambda c, w: _consume(em, op, ring, c, w), it)
            emit_producer(em, ring, it)
        return
    if "base" not in st:
        st["base"] = own_region(em, op.attrs["smem"])   # (passes/tc/regions.py)
    iv, lb, _, step = _loop_names(em, op)
    if op.attrs.get("ring_first") or "it" not in st:
        it = em.fresh("ring_it")
        em.emit(f"const int {it} = (int)(({iv} - {lb}) / {step});")
        st["it"] = it
        if ring.defer > 0:
            with em.scope(f"if ({it} >= {ring.defer})"):
                em.emit(f"newt_cp_async_wait<{ring.defer - 1}>();")
                em.emit("newt_fence_proxy_async();")
                em.barrier()
                if ring.early:
                    _consume(em, op, ring, f"{it} - {ring.defer}", ring.wait_after)
                    em.barrier()      # every warp's previous wgmma retired: its stage is free
    it = st["it"]
    ptr = op.operands[0]
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    R, C = op.result.shape
    es = max(1, op.result.dtype.bits // 8)
    role = op.attrs["ring_role"]
    transpose = role == "b" and ring.b_kmajor
    stage = f"({st['base']} + (u32)({it} % {ring.stages}) * {ring.stage_bytes}u)"
    if role == "a":
        tile = Tile(R, C, es, stage)
    else:
        tile = Tile(C, R, es, f"({stage} + {ring.a_bytes}u)") if transpose else \
            Tile(R, C, es, f"({stage} + {ring.a_bytes}u)")
    lay = ptr.attrs["layout"]
    epc = 16 // es
    u = {1: "u8", 2: "u16", 4: "u32"}[es]
    rd = (lambda p: f"*(const {u}*)({p})")
    heads = split_ptr(ptr, op.parent)
    if (heads and not transpose and isinstance(lay, CyclicLayout) and lay.vec == epc
            and C % epc == 0 and (mask is None or mask.attrs["layout"] == lay)):
        _group_copies(em, op, ptr, mask, lay, tile, heads, C, epc, u, rd)
        return
    if op.attrs.get("ring_copy") == "k_runs":   # (passes/tc/ring_copies.py)
        return kmajor_copies(em, mask, tile, heads[0], em.name(heads[1]), R, C, es)
    if heads and transpose and es == 4 and (mask is None or mask.attrs.get("icomp")):
        _transposed_copies(em, ptr, mask, lay, tile, heads, R, C)
        return
    icomp = ptr.attrs.get("icomp") and (mask is None or mask.attrs.get("icomp"))
    if icomp and isinstance(lay, CyclicLayout):
        lay = _Recompute(lay)
    at = (lambda v, s: em.at(v, s, lay)) if icomp else (lambda v, s: em.at(v, s))
    if not transpose and isinstance(lay, CyclicLayout) and lay.vec == epc and C % epc == 0:
        # groups in a rolled loop when the addresses are recomputed: unrolled, NVRTC hoists
        # every group's loop-invariant address and mask terms and runs out of registers
        em.emit("#pragma unroll 1" if icomp else "#pragma unroll")
        with em.scope(f"for (int g = 0; g < {lay.groups}; ++g)"):
            first = _group_head(em, lay, tile, C, epc)
            em.emit(f"const {em.ctype(ptr)} p0 = {at(ptr, first)};")
            p0 = "p0"
            conds = [f"(((u64)({p0})) & 15) == 0"]
            if ptr.attrs.get("contig", 1) < epc:
                conds += [f"{at(ptr, f'{first} + {j}')} == {p0} + {j}" for j in range(1, epc)]
            if mask is not None:
                conds += (mask_all(em, mask, lay, first, epc) if mask_all else
                          [at(mask, f"{first} + {j}") for j in range(epc)])
            with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
                em.emit(f"newt_cp_async16(dst, {p0}, 16);")
            with em.scope("else"):
                em.emit(f"union {{ uint4 v; {u} e[{epc}]; }} t;")
                for j in range(epc):
                    pj = at(ptr, f"{first} + {j}")
                    mj = at(mask, f"{first} + {j}") if mask is not None else None
                    em.emit(f"t.e[{j}] = {f'{mj} ? {rd(pj)} : ({u})0' if mj else rd(pj)};")
                em.emit("newt_st_shared_v4(dst, t.v);")
        return
    # element by element (transposed B, other layouts)
    with em.slots(lay.nslots) as s:
        valid = lay.valid("tid", s)
        rr, cc = coords_of(lay.flat("tid", s), (R, C))
        row, col = (cc, rr) if transpose else (rr, cc)
        m = at(mask, s) if mask is not None else None
        val = f"{m} ? {rd(at(ptr, s))} : ({u})0" if m else rd(at(ptr, s))
        width = 8 * es
        cons = "h" if es == 2 else "r"
        ct = "u16" if es == 2 else "u32"
        store = (f'asm volatile("st.shared.{"u8" if es == 1 else "b" + str(width)} [%0], %1;" '
                 f':: "r"({tile.elem_addr(row, col)}), "{cons}"(({ct})({val})) : "memory");')
        em.emit(f"if ({valid}) {store}" if valid else store)


_CP4 = """// 4-byte asynchronous copy global -> shared; src_bytes = 0 zero-fills (masked off).
NEWT_DEV void newt_cp_async4(newt_u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\\n"
               :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
"""


def _transposed_copies(em, ptr, mask, lay, tile, heads, R, C):
    """A 4-byte operand stored transposed (tf32 B goes K-major into shared memory): one 4-byte
    cp.async per element into its transposed place, zero-filled where masked off, so the tile
    stays in the asynchronous ring (no register staging, no synchronous loads)."""
    add_helpers(em, ("newt_cp_async4", _CP4))
    base, off = heads
    o = em.name(off)
    blay = _Recompute(lay) if base.attrs.get("icomp") and isinstance(lay, CyclicLayout) else lay
    mlay = _Recompute(lay) if isinstance(lay, CyclicLayout) else lay
    with em.slots(lay.nslots) as s:
        valid = lay.valid("tid", s)
        rr, cc = coords_of(lay.flat("tid", s), (R, C))
        m = em.at(mask, s, mlay) if mask is not None else None
        cp = (f"newt_cp_async4({tile.elem_addr(cc, rr)}, {em.at(base, s, blay)} + {o}, "
              f"{f'({m}) ? 4 : 0' if m else '4'});")
        em.emit(f"if ({valid}) {cp}" if valid else cp)


def _ring_dot_of(load_op, ring):
    """The dot a ring load feeds (the op in the same loop body holding the same RingPlan)."""
    return next(o for o in load_op.parent.ops if o.opcode == "dot" and o.attrs.get("ring") is ring)


def _consume(em, op, ring, tile_index: str, wait: int):
    """The tensor-core products of ring tile `tile_index` into the dot's accumulator; `op` is
    the dot or one of its ring loads (early consumption)."""
    dot = op if op.opcode == "dot" else _ring_dot_of(op, ring)
    plan = dot.attrs["dot_plan"]
    lay = dot.result.attrs["layout"]
    b_kmajor = ring.b_kmajor and not plan.swap     # a swapped dot's B tile is an N-major box
    n = em.name(dot.operands[2])
    stage = f"({em.state(ring)['base']} + (u32)(({tile_index}) % {ring.stages}) * {ring.stage_bytes}u)"
    ta, tb = _tiles(ring, plan, stage, b_kmajor)
    if plan.swap:
        from .dot_swap import wgmma_swapped
        return wgmma_swapped(em, plan, lay, n, ta, tb, wait)
    if plan.wgmma:
        emit_wgmma(em, plan, lay, n, ta, tb, b_kmajor, wait=wait,
                   promote=dot.attrs.get("fp8_promote", False))
    else:
        emit_mma_sync(em, plan, lay, n, ta, tb, b_kmajor)


def emit_ring_dot(em, op, use_wg):
    ring = op.attrs["ring"]
    em.alias(op.result, op.operands[2])    # accumulate in place into the carried value
    it = em.state(ring)["it"]
    D = ring.defer
    if ring.tma is not None:
        assert use_wg and ring.early, "TMA rings are planned for wgmma, consumption first"
        return
    assert ring.early == use_wg, "the pass and codegen disagree on the dot engine"
    em.emit("newt_cp_async_commit();")
    if D > 0 and not ring.early:
        with em.scope(f"if ({it} >= {D})"):
            _consume(em, op, ring, f"{it} - {D}", ring.wait_after)


@handles("dot_ring_drain")
def _ring_drain(em, op):
    """After the loop (passes/tc/dot_pipeline.py): the tiles the body had not consumed yet, every
    wgmma retired, a barrier (the ring's region is free). After the loop rather than in its
    last iteration: with the drain inside the body, ptxas cannot count the wgmma groups in
    flight across the back edge and waits for all of them at the end of every iteration."""
    dot = op.attrs["dot"].x
    ring = dot.attrs["ring"]
    _, lb, ub, step = _loop_names(em, dot)
    # the ring's region was declared inside the loop body (own_region): declare its symbol here
    em.emit("extern __shared__ __align__(16) unsigned char nt_dot_smem[];")
    D = ring.defer
    n = em.fresh("ring_n")
    em.emit(f"const int {n} = {trip_count(lb, ub, step)};")
    use_wg = dot.attrs["dot_plan"].wgmma
    acc = em.name(dot.operands[2])
    nslots = dot.result.attrs["layout"].nslots
    # no `if (n > 0)` around it (the loops below run zero times then): ptxas would take the
    # path "the loop ran, the drain did not" and wait before every later read of the
    # accumulator, serializing every wgmma of the kernel
    if persistent.runs(em, ring):
        return persistent.drain(em, ring, lambda: pin_registers(em, acc, nslots))
    if ring.tma is not None:
        emit_drain(em, ring, lambda c, wait: _consume(em, dot, ring, c, wait), f"({n} - 1)",
                   lambda: pin_registers(em, acc, nslots))
        return
    em.emit("newt_cp_async_wait<0>();")
    em.emit("newt_fence_proxy_async();")
    em.barrier()
    with em.scope(f"for (int ring_c = max({n} - {D}, 0); ring_c < {n}; ++ring_c)"):
        _consume(em, dot, ring, "ring_c", 0)
    if use_wg:
        em.emit("newt_wgmma_wait<0>();")
        pin_registers(em, acc, nslots)
    em.barrier()

