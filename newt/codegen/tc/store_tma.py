"""Codegen of an epilogue tile stored by TMA boxes (the facts of newt/passes/tc/store_tma.py).

Where it sits: dot_epilogue.py's dot_acc_out of a 16- or 8-bit float calls `stage` instead of
its padded-row staging; the store that passes/tc/store_tma.py renamed `tma_store` is emitted
here.

Staging: each thread's column pairs (one 32- or 16-bit word) go into the ring's idle region in
the box format: panel c / n of the tile (n = 64 16-bit or 128 8-bit columns: 128 bytes), row
r at r * 128 bytes in it, its 16-byte chunk k at k ^ (r % 8) (128-byte swizzle; the region is
1024-byte aligned, where the TMA unit's swizzle pattern starts). A warp's 8 rows x 4 pairs
then hit 32 (16-bit) or 16 (8-bit) different banks. The generic writes are made visible to the
async proxy (fence.proxy.async) before the barrier.

Store: one thread issues one cp.async.bulk.tensor per panel (a bulk group) and waits until the
copies have read shared memory (wait_group.read), so the region outlives them. A box clips at
the map's extents, which are the mask's bounds: exact for non-negative tile coordinates,
positive bounds and a column bound that ends a 16-byte group (the hardware writes whole
groups). The kernel tests those once per CTA; when they fail (never for the
tutorial's grids) every thread stores the staged elements one by one under the user's mask.
"""
from __future__ import annotations

from . import persistent
from .dot_ptx import add_helpers
from .dot_tma import map_param
from ..emitter import handles

STORE_HELPERS = r"""
// the box at coordinates (c0 innermost, c1) of the map's tensor <- shared memory at src
NEWT_DEV void newt_tma_store_2d(const newt_tmap* map, int c0, int c1, newt_u32 src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               :: "l"((newt_u64)map), "r"(c0), "r"(c1), "r"(src) : "memory");
}
// the bulk copies issued so far by this thread have read their shared memory
NEWT_DEV void newt_bulk_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
"""


def _in_panel(r: str, c: str, es: int) -> str:
    """Byte offset of element (r, c) of a tile of `es`-byte elements inside its panel (of
    128 / es columns)."""
    n = 128 // es
    return (f"(u32)({r}) * 128u + (u32)((((({c}) % {n}) / {16 // es}) ^ (({r}) % 8)) * 16 + "
            f"(({c}) % {16 // es}) * {es})")


def _panel(c: str, es: int) -> str:
    return f"({c}) / {128 // es}"


def _offset(r: str, c: str, rows: int, es: int) -> str:
    """Byte offset of element (r, c) of a tile of `es`-byte elements in the box format."""
    return f"(u32)({_panel(c, es)}) * {rows * 128}u + {_in_panel(r, c, es)}"


def _scalar(em, v) -> str:
    return str(v) if isinstance(v, int) else em.name(v)


def _addr(em, tile: str, r: str, c: str, sb) -> str:
    """Shared-space address of element (r, c) of the staged tile: panels one after the other
    at `tile`, or where a persistent kernel puts them (codegen/tc/persistent.py)."""
    if persistent.plan_of(em) is None:
        return f"{tile} + {_offset(r, c, sb.rows, sb.esize)}"
    return f"{persistent.panel(em, _panel(c, sb.esize))} + {_in_panel(r, c, sb.esize)}"


def _exact(em, sb) -> str:
    """The box stores write what the masked store writes: non-negative tile coordinates,
    positive bounds (and row stride)."""
    r0, c0 = _scalar(em, sb.row0), _scalar(em, sb.col0)
    X, Y, s = _scalar(em, sb.bound_r), _scalar(em, sb.bound_c), _scalar(em, sb.stride)
    exact = [f"{r0} >= 0", f"{c0} >= 0", f"{X} > 0", f"{Y} > 0"]
    if not (isinstance(sb.bound_c, int) and sb.bound_c * sb.esize % 16 == 0):
        # a box's store writes whole 16-byte groups of a row: a last column that ends inside
        # one (fp16 N = 1500) would be followed by up to 15 bytes written past the bound
        # (measured on an H100: the 4 columns after N = 1500 of a padded view were zeroed)
        exact.append(f"({Y}) % {16 // sb.esize} == 0")
    if not isinstance(sb.stride, int):
        exact.append(f"{s} > 0")      # (the launcher's map is a placeholder otherwise)
    return " && ".join(f"({e})" for e in exact)


def store_nd_helper(rank: int) -> str:
    """The rank-D store of a box (the outer dimensions: one index each)."""
    cs = ", ".join(f"int c{i}" for i in range(rank))
    regs = ", ".join(f"%{i + 1}" for i in range(rank))
    ins = ", ".join(f'"r"(c{i})' for i in range(rank))
    return (f"NEWT_DEV void newt_tma_store_{rank}d(const newt_tmap* map, {cs}, newt_u32 src) "
            f"{{\n  asm volatile(\"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group "
            f"[%0, {{{regs}}}], [%{rank + 1}];\\n\"\n               :: \"l\"((newt_u64)map), "
            f"{ins}, \"r\"(src) : \"memory\");\n}}\n")


def _store_panel(em, sb, tile, q, r0, c0):
    src = persistent.panel(em, str(q)) if persistent.plan_of(em) is not None else \
        f"{tile} + {q * sb.rows * 128}u"
    rank = 2 + len(sb.outer)
    if rank > 2:
        add_helpers(em, (f"newt_tma_store_{rank}d", store_nd_helper(rank)))
    outer = "".join(f", (int){_scalar(em, u)}" for u in sb.outer)
    em.emit(f"newt_tma_store_{rank}d(&{map_param(sb.map_index)}, {c0} + {q * 128 // sb.esize}, "
            f"{r0}{outer}, {src});")


def stage(em, op, src, base, n, pack):
    """dot_acc_out of a TMA-stored value: fragment pairs -> the box format at `base` (`n`:
    slot -> the fragment's C expression)."""
    sb = op.attrs["tma_store"]
    tile = em.fresh("tile")
    em.emit(f"const u32 {tile} = {base};")
    if persistent.plan_of(em) is not None:
        persistent.before_staging(em)
    em.barrier()

    def write(lo, hi):
        em.emit("#pragma unroll")
        with em.scope(f"for (int p = {lo}; p < {hi}; ++p)"):
            row, col = src.row_col("tid", "2 * p")
            with em.scope(""):
                em.emit(f"const int r = {row}, c = {col};")
                # (a 16-bit st takes the low half of a 32-bit register)
                em.emit(f'asm volatile("st.shared.b{16 * sb.esize} [%0], %1;" :: "r"('
                        f'{_addr(em, tile, "r", "c", sb)}), "r"({pack}({n("2 * p")}, '
                        f'{n("2 * p + 1")})) : "memory");')
        em.emit("newt_fence_proxy_async();   // the writes above, before the TMA unit reads them")
        em.barrier()

    em.staged_tiles[op.result.id] = tile
    write(0, src.nslots // 2)


@handles("tma_store")
def _tma_store(em, op):
    sb = op.attrs["tma_store"]
    tile = em.staged_tiles[op.operands[1].id]
    add_helpers(em, ("newt_tma_store", STORE_HELPERS))
    R, C = sb.rows, sb.cols
    r0, c0 = _scalar(em, sb.row0), _scalar(em, sb.col0)
    X, Y, s = _scalar(em, sb.bound_r), _scalar(em, sb.bound_c), _scalar(em, sb.stride)
    persist = persistent.plan_of(em) is not None
    with em.scope(f"if ({_exact(em, sb)})"):
        with em.scope("if (tid == 0)"):
            for q in range(C * sb.esize // 128):
                _store_panel(em, sb, tile, q, r0, c0)
            # (a persistent kernel waits before the panels' next writers: persistent.py)
            em.emit("nt_pending = true;" if persist else "newt_bulk_wait_read();")
    with em.scope("else"):
        P = em.name(sb.ptr)
        em.emit("extern __shared__ __align__(16) unsigned char nt_dot_smem[];")
        with em.scope(f"for (int e = tid; e < {R * C}; e += {em.T})"):
            em.emit(f"const int r = e / {C}, c = e % {C};")
            with em.scope(f"if ({r0} + r < {X} && {c0} + c < {Y})"):
                ut = "u16" if sb.esize == 2 else "u8"
                em.emit(f"*({ut}*)({P} + (i32)((u32)({r0} + r) * (u32)({s})) + ({c0} + c)) = "
                        f"*(const {ut}*)(nt_dot_smem + ({_addr(em, tile, 'r', 'c', sb)} - "
                        "newt_smem_addr(nt_dot_smem)));")
        if persistent.plan_of(em) is not None:
            em.barrier()     # read before thread 0 refills the freed stage
