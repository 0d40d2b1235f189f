"""Store TMA pass: a dot's epilogue tile leaves by TMA boxes instead of per-thread stores.

Where it sits: after frag_cast (which moves the epilogue's cast in front of `dot_acc_out`, so
the value leaving the fragment layout is already 16- or 8-bit) and before smem. On sm_90a, for a dot
whose ring arrives by TMA (passes/tc/dot_tma.py), the masked store of the epilogue

    store(P + rows[:, None] * s + cols[None, :], dot_acc_out(x), (rows < X) & (cols < Y))
    (P may carry `+ u * s'` terms, u a non-negative scalar: a batch, one more map dimension)
    rows = r0 + arange(BM), cols = c0 + arange(BN)      P a 16-byte aligned pointer parameter,
                                                        s a parameter divisible by 16, X and Y
                                                        parameters or constants; without a
                                                        mask, X = 2^31 - 1 and Y = s (the
                                                        launch's tensor bounds the store, as
                                                        passes/tc/dot_tma.py's loads)

becomes: dot_acc_out writes the fragments into the idle ring in the box format (panels of BM
rows x 128 bytes: 64 16-bit or 128 8-bit columns, 128-byte swizzle), and the store, a
`tma_store` op, has one thread copy each panel out as a box of a map of P with extents X rows
and Y columns. A box writes exactly the elements whose coordinates lie in [0, X) x [0, Y):
the store's mask, as long as r0 and c0 are non-negative and X and Y positive. The kernel
tests that at run time (one comparison per CTA) and otherwise stores the staged tile element
by element under the user's mask, so the two forms agree for every argument.

What goes away (measured as a hand transformation of the generated code on the H200,
2026-12-01, benchmarks/lab/matmul_variants.py `tmastore`): the read-back of padded rows into the
group-cyclic layout, 128 address and mask computations per thread and 16 vector stores; the
tile's bytes are the same. fp16 2048^3 591 -> 601 TFLOP/s, 8192^3 637 -> 642, bf16 2048^3 603
-> 622 (best of four configs each, one process).

Facts recorded: `dot_acc_out.attrs["tma_store"]` and the store's opcode `tma_store` with
attrs["tma_store"] (a StoreBox), one more recipe in fn.attrs["tma_maps"]
(optional: the kernel reads the map only after its run-time test, so arguments no map can
describe, such as a negative row stride, get a placeholder map instead of a launch error). A
TMA-ring dot whose store the pass cannot prove keeps the per-thread stores, with the reason in
the acc_out's attrs["tma_store_why"] (printed IR).
"""
from __future__ import annotations

from ...ir.index_forms import (NoMatch, arange_index, ge0_term, launch_value, lt_term,
                               mask_terms, ptr_terms, same)
from ...ir.schedule import StoreBox, tile_boxes
from .dot_tma import TMA_KIND
from .fragment_epilogue import NARROW_FLOATS
from .tma_terms import BIG, nonneg, scalar_base, tma_stride, uncast

# ops that may sit between the staging and the store: scalar and index math that codegen
# emits without shared memory (a layout change through the scratch arena could overwrite the
# staged tile, which lives in the ring's region)
_QUIET = {"constant", "binary", "unary", "cast", "arange", "splat", "program_id", "select",
          "addptr", "num_programs"}
_MOVES = {"reshape", "broadcast", "expand_dims"}


def _store_of(fn, out):
    """The one op reading `out` (a dot_acc_out's result): a masked store of it, in its block."""
    uses = fn.body.uses().get(out.result.id, [])
    if len(uses) != 1 or uses[0].opcode != "store" or uses[0].parent is not out.parent:
        raise NoMatch("the epilogue's value has uses other than one store")
    st = uses[0]
    if st.operands[1] is not out.result or st.operands[0] is out.result:
        raise NoMatch("the epilogue's value is not what the store writes")
    if st.attrs.get("volatile"):
        raise NoMatch("the store is volatile")
    block = out.parent.ops
    for op in block[block.index(out) + 1:block.index(st)]:
        quiet = op.opcode in _QUIET or (op.opcode in _MOVES and op.attrs.get("movement")
                                        in ("none", "recompute"))
        if not quiet or op.regions:
            raise NoMatch(f"a {op.opcode} between the epilogue and its store may use shared memory")
    return st


def _box(fn, out, st):
    """(StoreBox without its map index, map recipe, the extents as printed when they come
    from the launch) of the store, or raise NoMatch."""
    ptr = st.operands[0]
    mask = st.operands[2] if st.attrs.get("has_mask") else None
    R, C = out.result.shape
    kind = TMA_KIND.get(out.result.dtype.name)
    es = out.result.dtype.bits // 8
    if kind is None or out.result.dtype.name not in NARROW_FLOATS:
        raise NoMatch(f"{out.result.dtype.name} tiles are stored per thread (16- and 8-bit "
                      "floats only)")
    if (C * es) % 128 or R > 256:
        raise NoMatch("the tile is not whole 128-byte panels of at most 256 rows")
    terms = []
    base = ptr_terms(ptr, (R, C), terms)
    if base is None:
        raise NoMatch("the pointer block is not `16-byte aligned pointer parameter + offsets`")
    P, uterms = scalar_base(fn, base)
    outer = []
    for u, us in uterms:     # a batch: an outer map dimension (passes/tc/dot_tma.py)
        if not u.dtype.is_int() or uncast(u).dtype.bits > 32 or not nonneg(fn, u, []):
            raise NoMatch("an offset index of the base pointer is not a non-negative 32-bit "
                          "scalar")
        outer.append((u, tma_stride(fn, us, es, "an offset stride of the base pointer")))
    if len(outer) > 3:
        raise NoMatch("more than three index * stride terms in the base pointer (TMA rank <= 5)")
    by_axis = {t[0]: t for t in terms}
    if sorted(by_axis) != [0, 1] or len(terms) != 2 or by_axis[1][2] != 1:
        raise NoMatch("the offsets are not rows * stride + contiguous columns")
    stride = by_axis[0][2]
    stride_src = tma_stride(fn, stride, es, "the row stride")
    idx = []
    for ax, n in ((0, R), (1, C)):
        got = arange_index(by_axis[ax][1])
        if got is None or got[1] != n or got[2] is not None:
            raise NoMatch("an axis index is not `start + arange` (a wrap cannot be a box)")
        idx.append(got)
    conj, bounds = [], {}
    if mask is not None:
        mask_terms(mask, conj)
    for t in conj:
        low = ge0_term(t, (R, C))
        if low is not None and same(low[1], idx[low[0]][3]):
            # `index >= 0` (a descriptor's offset not provably non-negative): the box path runs
            # only for non-negative tile coordinates, where it holds; the fallback keeps it
            continue
        got = lt_term(t, (R, C))
        if got is None or got[0] in bounds or not same(got[1], idx[got[0]][3]):
            raise NoMatch("the mask is not `rows < X` and `cols < Y`")
        bounds[got[0]] = got[2]
    if mask is None:
        # no mask: the extents come from the launch, as a ring load's (passes/tc/dot_tma.py):
        # every element written lies in the tensor, rows of at most the row stride
        ext = [("const", BIG), stride_src]
        bounds = {0: BIG, 1: stride}
        told = f"rows < 2^31-1 (no mask), cols < {_name(stride_src)} (no mask: the row stride)"
    elif sorted(bounds) != [0, 1]:
        raise NoMatch("the mask does not bound both axes")
    else:
        ext = [launch_value(fn, bounds[ax], "a mask bound") for ax in (0, 1)]
        told = None
    box, _ = tile_boxes(R, C, es)
    recipe = dict(ptr=P.index, ptr_name=P.name, kind=kind, rows=ext[0], cols=ext[1],
                  row_stride=stride_src, box_inner=box.inner, box_outer=box.outer,
                  swizzle=box.swizzle, esize=es, optional=True)
    if outer:
        recipe["outer"] = [dict(extent=["const", BIG], stride=list(st)) for _, st in outer]
    sb = StoreBox(-1, R, C, es, idx[0][0], idx[1][0], base, stride, bounds[0], bounds[1],
                  [u for u, _ in outer])
    return sb, recipe, told


def _name(src) -> str:
    return str(src[1]) if src[0] == "const" else src[2]


def plan_store_tma(fn, options):
    if not (options.arch.startswith("sm_9") and options.arch.endswith("a")):
        return fn
    for out in [op for op in fn.walk() if op.opcode == "dot_acc_out"]:
        ring = out.attrs.get("ring")
        if ring is None or not getattr(ring, "tma", None) or out.attrs["dot_plan"].swap:
            continue
        try:
            if out.operands[0].attrs.get("layout") == out.result.attrs.get("layout"):
                raise NoMatch("the value does not leave the fragment layout")
            st = _store_of(fn, out)
            sb, recipe, told = _box(fn, out, st)
            if ring.stages * ring.stage_bytes < sb.rows * sb.cols * sb.esize:
                raise NoMatch("the ring is smaller than the tile")
        except NoMatch as e:
            out.attrs["tma_store_why"] = str(e)
            continue
        maps = fn.attrs.setdefault("tma_maps", [])
        if recipe not in maps:          # (the halves of a split tile share their map)
            maps.append(recipe)
        sb.map_index = maps.index(recipe)
        out.attrs["tma_store"] = sb
        st.opcode = "tma_store"
        st.attrs["tma_store"] = sb
        if told:
            st.attrs["tma_box"] = told
    return fn
