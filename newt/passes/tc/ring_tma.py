"""Ring TMA pass: the two tiles of a tile ring (attention's K and V, passes/tc/dot_loads.py,
plan_prefetch) arrive as TMA boxes on mbarriers instead of per-thread cp.async copies.

Where it sits: the `ring_tma` entry of PASSES, right after `prefetch`; it only adds facts. On
sm_90a with wgmma, a ring load becomes boxes of an N-D tensor map when the pass can prove that
the boxes read exactly what the pointer block and mask read:

    pointer = P + u1 * s1 + ... + uk * sk       P a 16-byte aligned pointer parameter; each
              + rows[:, None] * s + cols[None, :]   u a non-negative 32-bit scalar computed
                                                    before the loop (a head, a batch), each s
                                                    (and the row stride s) a parameter
                                                    divisible by 16 or a constant whose bytes
                                                    are a multiple of 16 (k <= 3)
    rows    = iv + arange(R)     the loop's induction variable plus an arange (either axis
                                 may be the rows: K loaded transposed has them on axis 1)
    cols    = c + arange(C)      c a constant; stride 1 (the tile's contiguous axis)
    mask    = none, or `rows < bound` with bound a parameter: rows past it read 0 (the TMA
              map's extent along rows), as the masked load's other=0 does

The map's dimensions, innermost first: cols (extent c + C), rows (extent: the bound, else
2^31 - 1), then one per u term (extent: H where u = x % H, else 2^31 - 1, with its stride).
A u term `x // H` or `x % H` is non-negative only for H >= 1: such parameters are listed in
the recipe and the launcher checks them (a LaunchError otherwise). Negative coordinates read
zeros where the pointer program would read before the tensor: the pass accepts only terms it
proves non-negative (program ids, constants, casts, sums, products, // and % of those).

What it buys (H200, 2026-12-01, attention B=4 H=32 N=4096 fp16, hand-transformed generated
code first, benchmarks/lab/attention_variants.py): D=64 404 -> 428 TFLOP/s, D=128 434 -> 469
(Triton 408 / 435): no per-thread address, predicate and copy instructions in the key loop,
no proxy fence, one block barrier fewer per key block at D=64.

Facts: prefetch op attrs "tma" = [RingBox per load] and fn.attrs["tma_maps"] recipes (the
launcher encodes them: runtime/tensormap.py); the first dot "ring_tma", and "ring_fence" /
"ring_barrier" (whether its wait keeps the proxy fence / the block barrier). Or "tma_why"
with the reason on the prefetch op (printed IR). Codegen: codegen/tc/ring_tma.py.
"""
from __future__ import annotations

from ... import dtypes as D
from ...ir.schedule import RingBox, tile_boxes, uses_wgmma
from ...ir.index_forms import (NoMatch, arange_index, binop_of, index_constant, iv_affine,
                               lt_term, mask_terms, param_of, ptr_terms, same)
from .dot_loads import IrRef
from .dot_tma import TMA_KIND
from .tma_terms import BIG, before_loop, nonneg, scalar_base, tma_stride, uncast


def _ring_box(fn, loop, ld, transposed, positive):
    """RingBox + map recipe of one ring load, or raise NoMatch."""
    body = loop.regions[0]
    iv = body.args[0]
    ptr = ld.operands[0]
    kind = TMA_KIND.get(ld.result.dtype.name)
    if kind is None:
        raise NoMatch(f"{ld.result.dtype.name} tiles stay on cp.async")
    es = ld.result.dtype.bits // 8
    shape = ld.result.shape
    terms = []
    P = ptr_terms(ptr, shape, terms)
    if P is None or sorted(t[0] for t in terms) != [0, 1]:
        raise NoMatch("the pointer block is not `pointer + rows * stride + cols`")
    by_axis = {t[0]: t for t in terms}
    cax = 0 if transposed else 1            # the tile's contiguous columns
    rax = 1 - cax
    if by_axis[cax][2] != 1:
        raise NoMatch("the tile's columns are not contiguous")
    row_stride = by_axis[rax][2]
    row_src = tma_stride(fn, row_stride, es, "the row stride")
    P, uterms = scalar_base(fn, P)
    if len(uterms) > 3:
        raise NoMatch("more than three index * stride terms in the base pointer (TMA rank <= 5)")
    ri, ci = arange_index(by_axis[rax][1]), arange_index(by_axis[cax][1])
    if ri is None or ci is None or ri[2] is not None or ci[2] is not None:
        raise NoMatch("an axis index is not `start + arange` (or wraps)")
    if not isinstance(ci[0], int) or ci[0] < 0:
        raise NoMatch("the first column is not a constant")
    rest, c = (None, 0) if isinstance(ri[0], int) else iv_affine(ri[0], iv)
    if isinstance(ri[0], int):
        rest = ri[0]
    elif rest is not None and not before_loop(rest, body):
        raise NoMatch("the first row is not the induction variable plus a loop invariant")
    if c == 0 and not isinstance(rest, int):
        raise NoMatch("the tile does not move with the loop")
    extent = ("const", BIG)
    if ld.attrs.get("has_mask"):
        conj = []
        mask_terms(ld.operands[1], conj)
        if len(conj) != 1:
            raise NoMatch("the mask is not one `rows < bound` term")
        got = lt_term(conj[0], shape)
        if got is None or got[0] != rax or not same(got[1], ri[3]):
            raise NoMatch("the mask does not bound the rows")
        b = got[2]
        cb = index_constant(b)
        bp = param_of(fn, uncast(b))
        if cb is not None:
            extent = ("const", max(int(cb), 0))
        elif bp is not None and bp.dtype in (D.int32, D.int64):
            extent = ("param", bp.index, bp.name)
        else:
            raise NoMatch("the rows' bound is not a parameter")
    outer = []
    for u, s in uterms:
        if not u.dtype.is_int() or uncast(u).dtype.bits > 32 or not before_loop(u, body):
            raise NoMatch("an offset index is not a 32-bit scalar computed before the loop")
        if not nonneg(fn, u, positive):
            raise NoMatch("an offset index is not provably non-negative")
        m = binop_of(uncast(u), "mod")
        mp = param_of(fn, uncast(m.operands[1])) if m is not None else None
        ext = ("param", mp.index, mp.name) if mp is not None else ("const", BIG)
        outer.append((ext, tma_stride(fn, s, es, "an offset stride")))
    R, C = shape[rax], shape[cax]
    box, _ = tile_boxes(R, C, es)
    recipe = dict(ptr=P.index, ptr_name=P.name, kind=kind, rows=extent,
                  cols=("const", ci[0] + C), row_stride=row_src, box_inner=box.inner,
                  box_outer=box.outer, swizzle=box.swizzle, esize=es,
                  outer=[dict(extent=list(e), stride=list(s)) for e, s in outer])
    rb = RingBox(-1, R, C, es, ci[0], rest, c, [u for u, _ in uterms])
    return rb, recipe


def plan_ring_tma(fn, options):
    """Decide TMA for every tile ring of plan_prefetch (dot_tile_prefetch ops)."""
    if not (options.arch.startswith("sm_9") and options.arch.endswith("a")):
        return
    for pre in [op for op in fn.walk() if op.opcode == "dot_tile_prefetch"]:
        loads = pre.attrs["loads"].x
        loop = pre.attrs["loop"].x
        dots = [ld.attrs["tile"].dot for ld in loads]
        positive = []
        try:
            if not all(uses_wgmma(options.arch, options.num_threads, d.attrs["dot_plan"],
                                  d.attrs.get("a_src")) for d in dots):
                raise NoMatch("the dots are not wgmma")
            boxes = []
            for ld, d in zip(loads, dots):
                # (ring buffers are B tiles, each at a 1024-byte aligned offset: codegen/tc/dot.py)
                if ld.attrs["tile"].role != "b":
                    raise NoMatch("a ring tile is not a dot's B")
                rb, recipe = _ring_box(fn, loop, ld, bool(d.attrs.get("b_kmajor")), positive)
                boxes.append((rb, recipe))
        except NoMatch as e:
            pre.attrs["tma_why"] = str(e)
            continue
        maps = fn.attrs.setdefault("tma_maps", [])
        for rb, recipe in boxes:
            if positive:
                recipe["positive"] = [list(p) for p in dict.fromkeys(map(tuple, positive))]
            if recipe in maps:          # the same tensor in another ring (causal attention)
                rb.map_index = maps.index(recipe)
            else:
                rb.map_index = len(maps)
                maps.append(recipe)
        pre.attrs["tma"] = [rb for rb, _ in boxes]
        dots[0].attrs["ring_tma"] = IrRef(pre)
        # the first dot's wait for its tiles: each thread's mbarrier wait publishes them; a
        # tile it stages itself (st.shared) still needs the proxy fence and the barrier, and
        # the barrier stays where the copies issued during the mma rely on it to free their
        # buffer (not with late copies: their own barrier follows the mma's wait)
        staged_here = dots[0].attrs.get("a_src") is None or dots[0].attrs.get("b_src") is None
        dots[0].attrs["ring_fence"] = staged_here
        dots[0].attrs["ring_barrier"] = staged_here or not dots[0].attrs.get("late_copies")
