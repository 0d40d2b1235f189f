"""Codegen of `dot_tile_load` (newt/passes/tc/dot_loads.py): global memory -> a synchronous dot's
shared-memory tile, 16 bytes at a time, addresses and masks from index math.

Where it sits: codegen. Consumes the load's pointer (and mask) blocks, both index-computable,
and the tile the dot will read (dot.dot_tiles: same region, swizzle and orientation); defines
no value (the dot reads the tile after `cp.async.wait_group 0` and a barrier).

Chunks are the tile's 16-byte pieces: tile row tr, chunk cc; thread t copies chunks t, t + T,
... (consecutive threads take consecutive chunks of a row: coalesced along the tile's
contiguous dimension). Per chunk, at run time:
    consecutive (known statically or tested), 16-byte aligned, every element unmasked
        -> one cp.async of 16 bytes
    otherwise -> element-wise gather (masked-off elements are 0), one 16-byte st.shared
The barrier first: the region was last read by an earlier dot (the two dots of attention share
it, passes/smem.py).

Tile rings (passes/tc/dot_loads.py, plan_prefetch): both tiles of iteration i + ahead are issued
by the body's first dot while its mma runs (emit_ahead_tiles: the induction variable replaced
by iv + ahead * step in the index math, the tiles into that iteration's ring buffers), those of
the first `ahead` iterations by `dot_tile_prefetch` before the loop. A ring whose tiles are
TMA boxes (passes/tc/ring_tma.py: prefetch attrs "tma") is copied by ring_tma.py instead.
"""
from __future__ import annotations

from ...ir.pointers import axis_stride, chunk_divisor, uniform_along
from . import ring_tma
from .dot import OPAQUE_TID, Tile, dot_tiles, opaque_thread
from .dot_ptx import add_helpers
from .dot_masks import group_mask
from .dot_ptx import PRELUDE
from ..emitter import handles


@handles("dot_tile_load")
def _tile_load(em, op):
    if op.attrs.get("prefetch") == "ahead":  # copied by an earlier iteration (or the
        return                               # prologue): see emit_ahead_tiles
    em.barrier()                        # the region's previous reader is done with it
    emit_tile_copy(em, op)


def in_range(em, loop, it):
    """C condition: the loop has an iteration whose induction variable is `it`."""
    ub, step = em.name(loop.operands[1]), em.name(loop.operands[2])
    return f"{step} > 0 ? {it} < {ub} : {it} > {ub}"


@handles("dot_tile_prefetch")
def _prefetch(em, op):
    """Before the loop: the tiles of the first `ahead` iterations, one commit group each
    (empty for an iteration the loop does not have: the body's waits count groups)."""
    loop = op.attrs["loop"].x
    lb, step = em.name(loop.operands[0]), em.name(loop.operands[2])
    ahead = op.attrs["ahead"]
    tma = op.attrs.get("tma")           # the tiles arrive by TMA (passes/tc/ring_tma.py)
    if tma:
        ring_tma.prologue(em, op)       # (its barrier is this one)
    else:
        em.barrier()
        for load in op.attrs["loads"].x:
            _declare_ring_pointers(em, load, lb)
    for t in range(ahead):
        it = f"({lb} + {t} * {step})" if t else lb
        with em.scope(f"if ({in_range(em, loop, it)})"):
            if tma:
                ring_tma.issue(em, op, it)
            for load in op.attrs["loads"].x if not tma else ():
                emit_tile_copy(em, load, it)
        if not tma:
            em.emit("newt_cp_async_commit();")
    first = op.attrs["loads"].x[0].attrs["tile"].dot
    if first.attrs.get("rotate"):       # the first dot of iteration 0, before the loop
        from .dot_loop import declare_rotated, emit_rotated, staged_a_desc
        declare_rotated(em, first)
        staged_a_desc(em, first)        # (declared here, before the loop's header exists)
        with em.scope(f"if ({in_range(em, loop, lb)})"):
            if tma:
                ring_tma.wait(em, op, lb)
            else:
                em.emit(f"newt_cp_async_wait<{ahead - 1}>();")
                em.emit("newt_fence_proxy_async();")
                em.barrier()
            emit_rotated(em, first, lb, "cur")
            em.emit("newt_wgmma_wait<0>();")


@handles("dot_async_wait")
def _async_wait(em, op):
    """After a loop whose last wgmma was left in flight (plan_prefetch's "wg_defer"); in a
    rotated loop's body, before the carried accumulator is read: the previous iteration's
    second dot and this iteration's early first dot. (Waiting for the second dot alone,
    wait_group 1, makes ptxas serialize every wgmma of the kernel: it does not count the
    groups in flight across the loop's back edge.)"""
    em.emit("newt_wgmma_wait<0>();")


def emit_ahead_tiles(em, loads, loop):
    """In the body's first dot: the tiles of iteration i + ahead, if there is one; one commit
    group either way."""
    iv = em.name(loop.regions[0].args[0])
    step = em.name(loop.operands[2])
    pre = ring_prefetch(loop)
    ahead = pre.attrs["ahead"]
    nxt = f"({iv} + {ahead} * {step})" if ahead != 1 else f"({iv} + {step})"
    with em.scope(f"if ({in_range(em, loop, nxt)})"):
        if pre.attrs.get("tma"):
            ring_tma.issue(em, pre, nxt)
            return
        for load in loads:
            emit_tile_copy(em, load, nxt)
    em.emit("newt_cp_async_commit();")


def ring_prefetch(loop):
    """The dot_tile_prefetch op of a tile ring's loop."""
    return next(op for op in loop.parent.ops if op.opcode == "dot_tile_prefetch"
                and op.attrs["loop"].x is loop)


def _geometry(em, op):
    """(plan, tile, transposed, elements per chunk, chunks per row, chunks) of a tile load; a
    ring's tile is the buffer of the iteration being copied (the induction variable's name
    may stand for iv + k * step there: emit_tile_copy)."""
    ref = op.attrs["tile"]
    dot = ref.dot
    plan = dot.attrs["dot_plan"]
    iv = em.name(op.parent.args[0]) if dot.attrs.get("tile_ring") else None
    ta, tb, b_kmajor = dot_tiles(em, dot, plan, iv)
    tile = ta if ref.role == "a" else tb
    epc = 16 // plan.esize
    cpr = tile.cols // epc
    return plan, tile, ref.role == "b" and b_kmajor, epc, cpr, tile.rows * cpr


def _simple(em, op, transposed, epc):
    """Every chunk 16-byte aligned by construction and the mask one bit per chunk."""
    ptr = op.operands[0]
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    cax = 0 if transposed else 1
    return axis_stride(ptr, cax) == 1 and chunk_divisor(em.fn, ptr, cax, epc) >= 16 and \
        (mask is None or uniform_along(mask, cax))


def _chunk(em, j, epc, cpr, transposed):
    """Declare c, tr, cc of this thread's j-th chunk; return its element coordinates."""
    em.emit(f"const int c = tid + {j * em.T};")
    em.emit(f"const int tr = (int)((u32)c / {cpr}u), cc = (int)((u32)c % {cpr}u);")
    col = f"(cc * {epc})"
    return [col, "tr"] if transposed else ["tr", col]


def _declare_ring_pointers(em, op, lb):
    """Before the loop: one pointer per 16-byte chunk of this thread at the loop's first
    iteration, and the per-iteration delta (the pass proved the pointer block moves by the
    same iv_slope everywhere); each copy then reads its pointer and advances it."""
    from ..shapes import value_at
    sl = op.attrs.get("iv_slope")
    plan, tile, transposed, epc, cpr, nchunks = _geometry(em, op)
    if sl is None or nchunks % em.T or not _simple(em, op, transposed, epc):
        return
    scalar, c = sl.x
    loop = op.parent.parent
    step = em.name(loop.operands[2])
    k = em.fresh("rp")
    names = [f"{k}_{j}" for j in range(nchunks // em.T)]
    ptr = op.operands[0]
    delta = f"{k}_d"
    factor = f"(i64){em.name(scalar)} * " if scalar is not None else ""
    em.emit(f"const i64 {delta} = {factor}(i64)({c}) * (i64){step};")
    offs = [f"{k}_s{j}" for j in range(len(names))]
    # The thread index as read by a volatile instruction NVRTC cannot repeat inside the loop:
    # each chunk's place in its tile (row, swizzle) is the same every iteration and stays in a
    # register from here (from a plain read NVRTC may recompute it in the loop when registers
    # look scarce, a few instructions per chunk and key block).
    add_helpers(em, ("newt_tid_opaque", OPAQUE_TID))
    em.emit(f"const int {k}_t = newt_tid_opaque();")
    for n, o in zip(names, offs):
        em.emit(f"{em.ctype(ptr)} {n};")
        em.emit(f"u32 {o};")
    iv = op.parent.args[0]
    saved = em.names.get(iv.id)
    em.names[iv.id] = lb
    at0 = Tile(tile.rows, tile.cols, tile.esize, "0u")    # the tile's layout from offset 0
    for j, (n, o) in enumerate(zip(names, offs)):
        with em.scope(""):
            em.emit(f"const int tid = {k}_t;")
            coords = _chunk(em, j, epc, cpr, transposed)
            em.emit(f"{n} = {value_at(em, ptr, coords)};")
            em.emit(f"{o} = {at0.chunk_addr('tr', 'cc')};")
    em.names[iv.id] = saved
    em.state(op)["ring_ptrs"] = (names, delta, offs, f"{k}_t")


def emit_tile_copy(em, op, iv_expr=None):
    """The copies of dot_tile_load `op`; with iv_expr, for the loop iteration whose induction
    variable is iv_expr (the pass checked that the index math reads no other body value)."""
    if iv_expr is None:
        return _copy(em, op)
    body = op.parent
    iv = body.args[0]
    saved = em.names.get(iv.id)
    em.names[iv.id] = iv_expr
    try:
        _copy(em, op)
    finally:
        if saved is None:
            em.names.pop(iv.id, None)
        else:
            em.names[iv.id] = saved


def _copy(em, op):
    from ..shapes import value_at      # (shapes imports the passes: import late)
    if em.state(op).get("ring_ptrs"):
        return _ring_copy(em, op)
    add_helpers(em, ("newt_dot_prelude", PRELUDE))
    plan, tile, transposed, epc, cpr, nchunks = _geometry(em, op)
    ptr = op.operands[0]
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    es = plan.esize
    cax = 0 if transposed else 1        # the block axis along the tile's contiguous columns
    per = -(-nchunks // em.T)
    contig = axis_stride(ptr, cax) == 1
    u = {1: "u8", 2: "u16", 4: "u32"}[es]

    def coords(e):
        col = f"(cc * {epc} + {e})"
        return [col, "tr"] if transposed else ["tr", col]

    # every chunk 16-byte aligned by construction and the mask one bit per chunk: one
    # cp.async each, zero-filled (no bytes read) where masked off; no test, no branch
    simple = _simple(em, op, transposed, epc)
    em.emit("{")
    if op.attrs.get("recompute_index"):
        opaque_thread(em)
    em.emit("#pragma unroll")
    with em.scope(f"for (int j = 0; j < {per}; ++j)"):
        em.emit(f"const int c = tid + j * {em.T};")
        if nchunks % em.T:
            em.emit(f"if (c >= {nchunks}) break;")
        em.emit(f"const int tr = c / {cpr}, cc = c % {cpr};")
        em.emit(f"const u32 dst = {tile.chunk_addr('tr', 'cc')};")
        em.emit(f"const {em.ctype(ptr)} p0 = {value_at(em, ptr, coords(0))};")
        if simple:
            n = "16" if mask is None else f"({value_at(em, mask, coords(0))}) ? 16 : 0"
            em.emit(f"newt_cp_async16(dst, p0, {n});")
        else:
            _checked_copy(em, ptr, mask, coords, contig, epc, u)
    em.emit("}")


def _checked_copy(em, ptr, mask, coords, contig, epc, u):
    """One chunk tested at run time: cp.async where aligned and wholly unmasked, else an
    element-wise gather (0 where masked off) and one st.shared."""
    from ..shapes import value_at
    conds = ["(((u64)(p0)) & 15) == 0"]
    if not contig:
        conds += [f"({value_at(em, ptr, coords(e))} == p0 + {e})" for e in range(1, epc)]
    if mask is not None:
        conds += group_mask(em, mask, [coords(e) for e in range(epc)])
    with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
        em.emit("newt_cp_async16(dst, p0, 16);")
    with em.scope("else"):
        em.emit(f"union {{ uint4 v; {u} e[{epc}]; }} t;")
        for e in range(epc):
            p = f"p0 + {e}" if contig else value_at(em, ptr, coords(e))
            rd = f"*(const {u}*)({p})"
            m = value_at(em, mask, coords(e)) if mask is not None else None
            em.emit(f"t.e[{e}] = {f'({m}) ? {rd} : ({u})0' if m else rd};")
        em.emit("newt_st_shared_v4(dst, t.v);")


def _ring_copy(em, op):
    """The copies of a ring load with per-chunk pointers (_declare_ring_pointers): per chunk
    one zero-filling cp.async from its pointer, then the pointer moves to the next
    iteration."""
    from ..shapes import value_at
    names, delta, offs, tvar = em.state(op)["ring_ptrs"]
    plan, tile, transposed, epc, cpr, _ = _geometry(em, op)
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    em.emit("{")
    # the thread index read before the loop (_declare_ring_pointers), for the mask when there
    # is one; the chunk's place in the tile is its register from there too
    em.emit(f"const int tid = {tvar};")
    for j, (n, o) in enumerate(zip(names, offs)):
        with em.scope(""):
            size = "16"
            if mask is not None:
                coords = _chunk(em, j, epc, cpr, transposed)
                size = f"({value_at(em, mask, coords)}) ? 16 : 0"
            em.emit(f"newt_cp_async16({tile.base} + {o}, {n}, {size});")
            em.emit(f"{n} += {delta};")
    em.emit("}")
