"""Codegen of `dot` (the hook newt/codegen/__init__.py calls): acc + a @ b on tensor cores.

Where it sits: codegen, after the passes. Consumes a `dot` op whose operands are register
blocks in any layout and whose plan (op.attrs["dot_plan"], newt/passes/tc/dot.py) names the engine;
defines op.result as a register array in the accumulator layout (AccLayout) or, for the "fma"
engine, in the default layout.

Tensor-core schedule (synchronous form):
    barrier                      the previous user of the tile region is done with it
    a, b -> shared memory        swizzled tiles, 16-byte st.shared per group where the
                                 operand's layout holds 16 consecutive bytes; skipped for an
                                 operand the passes already placed (attrs a_src / b_src:
                                 "staged" once before the loop by dot_stage_a, "loaded" by its
                                 dot_tile_load's cp.async, then wait_group 0 here) or that is
                                 read from registers ("regs": A fragments packed from a 16-bit
                                 value in the accumulator layout: mma.sync, or on sm_90a
                                 wgmma.mma_async with A in registers, `emit_wgmma_rs`)
    fence.proxy.async; barrier   (wgmma reads shared memory through the async proxy)
    sm_90a, num_warps % 4 == 0, 16-bit/tf32/fp8/int8 inputs:
        wgmma.mma_async per warpgroup, per 64-row sub-tile, per <=256-column chunk, per
        32-byte k-step; commit; wait 0
    otherwise: per warp, per k-step ldmatrix A (x4) and B (x4, .trans for 16-bit MN-major B),
        mma.sync m16n8k{16,8,32} into the fragment
Ring form (a loop's two dots whose tiles come through a ring of buffers, attention's; the
pass is newt/passes/tc/dot_loads.py, plan_prefetch): the first dot waits for this iteration's
tiles, crosses the iteration's one barrier and issues the copies of a later iteration while
its mma runs; the second skips the wait and the barrier, and with wgmma is left in flight,
accumulating in place into the carried accumulator (attrs cp_wait, ring_issue, ring_ready,
wg_defer, rotate).
Tile formats and swizzles (class Tile below): rows of
SW = min(128, row bytes) bytes, chunk c of row r at (c ^ (r / (128/SW)) % (SW/16)) * 16, which is
wgmma's 128/64/32-byte swizzle mode for SW = 128/64/32. B is MN-major ([K][N], ldmatrix.trans /
wgmma transposed B) for 16-bit inputs and K-major ([N][K]) for tf32, fp8 and int8, and for 16-bit B
loaded along K (attrs["b_kmajor"], newt/passes/tc/dot_loads.py). Regions come from the
shared-memory pass (attrs["smem"], in the dot area, shared by liveness; passes/tc/regions.py).
The pipelined form (cp.async ring with deferred consumption) is dot_ring.py's, for loops the
pipeline pass rewrote (newt/passes/tc/dot_pipeline.py).
"""
from __future__ import annotations

from ...ir.layouts import AccLayout, CyclicLayout, coords_of
from ...ir.pointers import b_tile_kmajor
from ...ir.schedule import a_tile_bytes, b_tile_bytes
from ..emitter import handles
from .dot_ptx import PRELUDE, add_helpers
from .mma import emit_mma_sync, emit_wgmma, emit_wgmma_rs

_ST = {1: "u8", 2: "u16", 4: "u32"}


class Tile:
    """A swizzled shared-memory tile of `rows` x `cols` elements (cols contiguous)."""

    def __init__(self, rows, cols, esize, base: str):
        self.rows, self.cols, self.esize, self.base = rows, cols, esize, base
        self.sw = min(128, cols * esize)
        self.cpl = self.sw // 16            # chunks per panel row
        self.rpl = 128 // self.sw           # rows sharing one 128-byte line
        self.nbytes = rows * cols * esize

    def chunk_addr(self, row: str, chunk: str) -> str:
        panel = f"(({chunk}) / {self.cpl}) * {self.rows * self.sw}u + " if self.cols * self.esize > 128 else ""
        x = f"((({row}) / {self.rpl}) % {self.cpl})" if self.rpl > 1 else f"(({row}) % {self.cpl})"
        return (f"({self.base} + {panel}(u32)({row}) * {self.sw}u + "
                f"(u32)(((({chunk}) % {self.cpl}) ^ {x}) * 16))")

    def py_chunk_off(self, row: int, chunk: int) -> int:
        """chunk_addr's byte offset from the base, in Python (for linearity checks)."""
        panel = (chunk // self.cpl) * self.rows * self.sw if self.cols * self.esize > 128 else 0
        x = (row // self.rpl) % self.cpl if self.rpl > 1 else row % self.cpl
        return panel + row * self.sw + ((chunk % self.cpl) ^ x) * 16

    def elem_addr(self, row: str, col: str) -> str:
        epc = 16 // self.esize
        return f"({self.chunk_addr(row, f'({col}) / {epc}')} + (u32)((({col}) % {epc}) * {self.esize}))"


def own_region(em, region) -> str:
    """The shared-space address (a C expression) of a region of its own (placed by the
    shared-memory pass: newt/passes/tc/regions.py), after the declaration of the symbol it is
    addressed through."""
    em.emit("extern __shared__ __align__(16) unsigned char nt_dot_smem[];")
    return own_base(region)


def own_base(region) -> str:
    """C expression: a region of its own's address (its anchor rounded up to 1024 at run time;
    needs nt_dot_smem declared in scope)."""
    return f"((newt_smem_addr(nt_dot_smem) + {region.anchor}u + 1023u) & ~1023u)"


def planned_base(em, region) -> str:
    """C expression: the shared-space address of a region of the dot area (nt_smem is the
    kernel's dynamic shared memory, declared at its top; the area's start is aligned to 1024
    at run time, hence the 1024 bytes of slack in the size)."""
    return (f"(((newt_smem_addr(nt_smem) + {region.anchor}u + 1023u) & ~1023u) + "
            f"{region.offset}u)")


OPAQUE_TID = """NT_INLINE int newt_tid_opaque() {
#ifdef __CUDA_ARCH__
  int t; asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t)); return t;
#else
  return threadIdx.x;
#endif
}
"""


def opaque_thread(em):
    """Shadow `tid`, `lane` and `warp` in the current scope with copies NVRTC cannot hoist out
    of the enclosing loop (a volatile read of %tid.x). Inside a loop around a dot, every value
    computed from the thread index alone is loop-invariant: NVRTC hoists them all (per-slot mask
    terms, per-fragment swizzled addresses) and keeps each in a register next to the
    accumulators. Recomputed, they cost a few integer instructions per iteration instead
    (decided by the dot-rows pass: attrs["recompute_index"])."""
    add_helpers(em, ("newt_tid_opaque", OPAQUE_TID))
    em.emit("const int tid = newt_tid_opaque(), lane = tid & 31, warp = tid >> 5;")
    em.emit("(void)lane; (void)warp;")


def _bits(dt_name: str, x: str) -> str:
    return {"float16": f"(u32)nt_f2h({x})", "bfloat16": f"(u32)nt_f2b({x})",
            "float32": f"newt_f32_to_tf32({x})", "int8": f"(u32)(u8)({x})"}[dt_name]


def stage_tile(em, v, tile: Tile, transpose: bool):
    """Store register block v ([R, C]) into `tile` (transpose: element (r, c) goes to tile row c,
    column r). 16-byte stores per layout group where the group is one tile chunk."""
    lay = v.attrs["layout"]
    R, C = v.shape
    es = tile.esize
    epc = 16 // es
    dn = v.dtype.name
    if (not transpose and isinstance(lay, CyclicLayout) and lay.vec == epc and C % epc == 0):
        with em.slots(lay.groups, "g"):
            valid = lay.valid("tid", f"g * {epc}")
            if valid:
                em.emit(f"if (!{valid}) continue;")
            flat = lay.flat("tid", f"g * {epc}")
            em.emit(f"const int fl = {flat}, rr = fl / {C}, cc = fl % {C};")
            words = []
            per = 4 // es
            for w in range(4):
                parts = []
                for k in range(per):
                    e = w * per + k
                    b = _bits(dn, em.at(v, f"g * {epc} + {e}"))
                    parts.append(f"({b} << {8 * es * k})" if k else b)
                words.append(" | ".join(parts))
            em.emit(f"newt_st_shared_v4({tile.chunk_addr('rr', f'cc / {epc}')}, "
                    f"make_uint4({', '.join(words)}));")
        return
    with em.slots(lay.nslots) as s:
        valid = lay.valid("tid", s)
        rc = coords_of(lay.flat("tid", s), (R, C))
        row, col = (rc[1], rc[0]) if transpose else (rc[0], rc[1])
        st = (f'asm volatile("st.shared.{"b" + str(8 * es)} [%0], %1;" :: "r"({tile.elem_addr(row, col)}), '
              f'"{"h" if es == 2 else "r"}"(({"u16" if es == 2 else "u32"})({_bits(dn, em.at(v, s))})) : "memory");')
        if es == 1:
            st = (f'asm volatile("st.shared.u8 [%0], %1;" :: "r"({tile.elem_addr(row, col)}), '
                  f'"r"((u32)({_bits(dn, em.at(v, s))})) : "memory");')
        em.emit(f"if ({valid}) {st}" if valid else st)


@handles("dot")
def emit_dot(em, op):
    a, b, acc = op.operands[:3]
    r = op.result
    plan = op.attrs["dot_plan"]       # (every dot has one: passes/tc/dot.py, the layout pass)
    if plan.engine == "fma":
        return _emit_fma(em, op)
    lay = r.attrs["layout"]
    assert isinstance(lay, AccLayout) or plan.swap, lay
    a_src, b_src = op.attrs.get("a_src"), op.attrs.get("b_src")
    use_wg = plan.wgmma                 # (passes/tc/dot.py: record_instructions)
    add_helpers(em, ("newt_dot_prelude", PRELUDE))
    if op.attrs.get("ring") is not None:
        from .dot_ring import emit_ring_dot
        return emit_ring_dot(em, op, use_wg)
    # operand sources (passes/tc/dot_rows.py, dot_loads.py): None = staged here from registers,
    # "regs" = A fragments from registers, "staged" = A tile staged before the loop,
    # "loaded" = copied into the tile by its dot_tile_load
    if op.attrs.get("rotate"):
        from .dot_loop import emit_rotated_dot
        return emit_rotated_dot(em, op)
    defer = op.attrs.get("wg_defer")
    if defer is not None:      # in flight across the loop's back edge: accumulate in place
        em.alias(r, defer.x)   # into the carried value (passes/tc/dot_loads.py)
        n = em.name(r)
    else:
        n = em.declare(r)
    zero = bool(op.attrs.get("zero_acc"))     # (passes/tc/walk_ring.py)
    if not zero:            # (else the first k-step ignores n: no register write to order
        _acc_in(em, op, acc, lay, n)    # against a wgmma in flight)
    ta, tb, b_kmajor = dot_tiles(em, op, plan)
    if a_src is None or b_src is None:
        em.barrier()                         # the previous reader of the region is done
    if a_src is None:
        stage_tile(em, a, ta, False)
    if b_src is None:
        stage_tile(em, b, tb, b_kmajor)
    # a tile ring (passes/tc/dot_loads.py, plan_prefetch): the first dot waits for this
    # iteration's tiles and copies those of a later one while its mma runs; the second finds
    # its tile landed and visible
    cp_wait = op.attrs.get("cp_wait")
    rt = op.attrs.get("ring_tma")       # the ring's tiles are TMA boxes (passes/tc/ring_tma.py)
    if not op.attrs.get("ring_ready"):
        if rt is not None:
            from . import ring_tma
            ring_tma.wait(em, rt.x, em.name(op.parent.args[0]))
        elif cp_wait is not None:
            em.emit(f"newt_cp_async_wait<{cp_wait}>();")
        elif "loaded" in (a_src, b_src):
            em.emit("newt_cp_async_commit();")
            em.emit("newt_cp_async_wait<0>();")
        # (with TMA: passes/tc/ring_tma.py says whether the fence and the barrier stay)
        if use_wg and (rt is None or op.attrs["ring_fence"]):
            em.emit("newt_fence_proxy_async();")
        if rt is None or op.attrs["ring_barrier"]:
            em.barrier()
    elif op.attrs.get("a_sync"):    # A staged above from registers other warps wrote
        if use_wg:                  # (passes/tc/dot_loads.py: _a_sync)
            em.emit("newt_fence_proxy_async();")
        em.barrier()
    # what runs while the mma is in flight: the ring's copies of a later iteration (first
    # dot), or, after a rotated first dot, its next iteration's scores (retired by the
    # dot_async_wait before this dot) becoming the current ones
    issue, rot = op.attrs.get("ring_issue"), op.attrs.get("rotate_from")

    def copies():
        if issue is not None:
            from .dot_loads import emit_ahead_tiles
            emit_ahead_tiles(em, issue.x, op.parent.parent)
        if rot is not None:
            cur, nxt = em.state(rot.x)["rotated"]
            with em.slots(rot.x.result.attrs["layout"].nslots) as s:
                em.emit(f"{cur}[{s}] = {nxt}[{s}];")
    # left in flight until a later dot's wait (passes/tc/walk_ring.py: wg_defer, wg_wait_at)
    wait = None if defer is not None or op.attrs.get("wg_wait_at") is not None else 0
    # late copies (passes/tc/dot_loads.py): after the mma's wait and a barrier, every warp is
    # done with the buffer the copies overwrite
    late = op.attrs.get("late_copies")
    during = None if late else copies
    with em.scope(""):
        if op.attrs.get("recompute_index"):
            opaque_thread(em)
        if use_wg and a_src == "regs":
            emit_wgmma_rs(em, plan, lay, n, a, tb, b_kmajor, during, wait)
        elif use_wg:
            from .dot_loop import in_loop, staged_a_desc
            ad = staged_a_desc(em, op, ta) if a_src == "staged" and in_loop(op) else None
            emit_wgmma(em, plan, lay, n, ta, tb, b_kmajor, during, wait, a_desc=ad,
                       promote=op.attrs.get("fp8_promote", False), zero=zero)
        else:       # (copies after the mma: its fragments are dead by then)
            emit_mma_sync(em, plan, lay, n, ta, tb, b_kmajor, a_regs=a if a_src == "regs" else None,
                          rolled=bool(op.attrs.get("ksteps_rolled")))
        if late:
            assert wait == 0, "late copies follow a waited mma"
            em.barrier()
        if late or not use_wg:
            copies()
    retired = op.attrs.get("retires")
    if retired is not None:          # dots this wait completed: read after it, not before
        from .dot_loop import pin_registers
        for x in retired.x:
            pin_registers(em, em.name(x.result), x.result.attrs["layout"].nslots)
    rnd = {"float16": "nt_rh", "bfloat16": "nt_rb"}.get(r.dtype.name)
    if rnd:
        with em.slots(lay.nslots) as s:
            em.emit(f"{n}[{s}] = {rnd}({n}[{s}]);")


def _acc_in(em, op, acc, lay, n):
    """n[] (layout lay) = acc. Index-computable or same-layout accumulators are read in place;
    others (e.g. a block loaded from memory) move through shared memory (the region the
    shared-memory pass gave them: attrs["smem_acc"], passes/tc/regions.py)."""
    if op.attrs.get("smem_acc") is None:
        with em.slots(lay.nslots) as s:
            em.emit(f"{n}[{s}] = {em.at(acc, s, lay)};")
        return
    src = acc.attrs["layout"]
    ct = em.ctype(acc)
    base = own_region(em, op.attrs["smem_acc"])
    buf = em.fresh("accin")
    em.emit(f"{ct}* {buf} = ({ct}*)(nt_dot_smem + ({base} - newt_smem_addr(nt_dot_smem)));")
    em.barrier()
    with em.slots(src.nslots) as s:
        v = src.valid("tid", s)
        st = f"{buf}[{src.flat('tid', s)}] = {em.at(acc, s)};"
        em.emit(f"if ({v}) {st}" if v else st)
    em.barrier()
    with em.slots(lay.nslots) as s:
        em.emit(f"{n}[{s}] = {buf}[{lay.flat('tid', s)}];")


def dot_tiles(em, op, plan, iv=None):
    """(A tile, B tile, B K-major?) of a synchronous tensor-core dot, in its planned region. B is K-major as passes/tc/dot_loads.py's `b_tile_kmajor` says: for 4- and
    1-byte inputs, and where the dot-loads pass found it (attrs["b_kmajor"]). A ring of R B tiles (attrs["tile_ring"]) gives
    the buffer of the loop iteration whose induction variable is the C expression `iv`
    (default: the dot's own iteration): iteration i uses buffer i % R."""
    M, N, K, es = plan.M, plan.N, plan.K, plan.esize
    b_kmajor = b_tile_kmajor(es) or bool(op.attrs.get("b_kmajor"))
    base = planned_base(em, op.attrs["smem"])      # (passes/tc/regions.py)
    a_bytes = a_tile_bytes(op, plan)
    if op.attrs.get("a_src") == "staged":
        ta = Tile(M, K, es, planned_base(em, op.attrs["smem_a"]))
    else:
        ta = Tile(M, K, es, base)
    tb_base = f"({base} + {a_bytes}u)"
    ring = op.attrs.get("tile_ring")
    if ring:
        loop = op.parent.parent
        lb, step = em.name(loop.operands[0]), em.name(loop.operands[2])
        iv = iv or em.name(op.parent.args[0])
        tb_base = (f"({base} + {a_bytes}u + (u32)(((({iv}) - {lb}) / {step}) % {ring}) * "
                   f"{b_tile_bytes(plan)}u)")
    tb = Tile(N, K, es, tb_base) if b_kmajor else Tile(K, N, es, tb_base)
    return ta, tb, b_kmajor


# fp32 pair -> one fragment register (lo = first element). Written against the header's
# conversions off the device, so the CPU emulator of generated code runs it too.
def _emit_fma(em, op):
    """Exact products in the result's default layout: operands through shared memory as
    register values, each thread sums K products per result slot."""
    a, b, acc = op.operands[:3]
    r = op.result
    (M, K), N = a.shape, b.shape[1]
    ct = em.ctype(r)
    at, bt = em.ctype(a), em.ctype(b)
    rb = 8 if "64" in ct or ct == "double" else 4     # (the region's size: passes/tc/regions.py)
    base = own_region(em, op.attrs["smem"])
    add_helpers(em, ("newt_dot_prelude", PRELUDE))
    pa, pb = em.fresh("fa"), em.fresh("fb")
    em.emit(f"{at}* {pa} = ({at}*)(nt_dot_smem + ({base} - newt_smem_addr(nt_dot_smem)));")
    em.emit(f"{bt}* {pb} = ({bt}*)((unsigned char*){pa} + {M * K * rb});")
    em.barrier()
    for v, p in ((a, pa), (b, pb)):
        lay = v.attrs["layout"]
        with em.slots(lay.nslots) as s:
            valid = lay.valid("tid", s)
            st = f"{p}[{lay.flat('tid', s)}] = {em.at(v, s)};"
            em.emit(f"if ({valid}) {st}" if valid else st)
    em.barrier()
    lay = r.attrs["layout"]
    n = em.declare(r)
    fl = r.dtype.is_floating()
    with em.slots(lay.nslots) as s:
        rr, cc = coords_of(lay.flat("tid", s), (M, N))
        valid = lay.valid("tid", s)
        em.emit(f"{ct} t = {em.at(acc, s, lay)};")
        if valid:
            em.emit(f"if ({valid})")
        em.emit("#pragma unroll 4")
        with em.scope(f"for (int k = 0; k < {K}; ++k)"):
            x, y = f"({ct}){pa}[{rr} * {K} + k]", f"({ct}){pb}[k * {N} + {cc}]"
            em.emit(f"t = fma({x}, {y}, t);" if fl else f"t += {x} * {y};")
        rnd = {"float16": "nt_rh", "bfloat16": "nt_rb"}.get(r.dtype.name)
        em.emit(f"{n}[{s}] = {rnd + '(t)' if rnd else 't'};")
