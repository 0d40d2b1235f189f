"""Dot TMA pass: ring loads whose tiles are boxes of a 2-D tensor arrive by TMA.

Where it sits: the `dot_tma` entry of PASSES (newt/passes/__init__.py), after the ring is
planned; it only adds facts. On sm_90a with wgmma, a ring's two operand loads become copies of
one box each (cp.async.bulk.tensor, one thread issuing them, completing on an mbarrier) when
the pass can prove that a box computes exactly what the pointer block and mask compute:

    pointer  = P + u1 * s1 + ...                           P a 16-byte aligned pointer
               + rows[:, None] * s + cols[None, :]          parameter, s a row stride whose
                                                            bytes are a multiple of 16; each u
                                                            a non-negative scalar computed
                                                            before the loop (a batch: the grid's
                                                            axis 2), its stride like s (k <= 3)
    rows     = r0 + arange(R)     or  (r0 + arange(R)) % W  (same for cols); the loop advances
                                                            one axis by a constant per iteration
    mask     = per-axis terms `axis_index < bound`, one per axis at most, where the bound is a
               parameter X (minus the loop's advance): out-of-bounds box elements read 0, as
               the masked load's `other=0` does. The tensor map's extent on that axis is X.

An axis wrapped by `% W` (the tutorial's `offs_am % M`) and not masked gets extent W. A box
cannot wrap: rows past W read 0 instead of rows 0, 1, ... That changes only the dot result's
rows (columns, for B) past W, and the pass accepts the wrap only when every use of the dot
result is elementwise and ends in a store whose mask has the conjunct `r0 + arange < W` on that
axis: those rows are never written, so what they hold does not matter.

An axis neither masked nor wrapped takes its extent from the launch without reading anything
more than the call's packed values: every element the load reads lies in the tensor (reading
past it is undefined behaviour), and the map's extent decides only which reads return 0, so any
extent at least the largest index read gives the same tile. The rows get 2^31 - 1 (every int32
coordinate); the contiguous columns get the row stride: the map is a matrix of rows that do not
overlap, as the driver requires (a view whose rows overlap, read past the row stride without a
mask, is read as zeros there: docs/language.md). The u terms get 2^31 - 1 likewise. A launch
therefore builds no more maps than the masked form: the same cache key per tensor and stride.

Facts recorded: the ring's `tma = [TmaOperand(A), TmaOperand(B)]` (a new RingPlan: facts.py) and
fn.attrs["tma_maps"], the
recipes the launcher builds CUtensorMaps from (newt/runtime/tensormap.py): one per operand, in
the order of the kernel's extra `__grid_constant__` parameters. Codegen: codegen/tc/dot_tma.py.
A ring the pass cannot prove stays on cp.async, with the reason in ring.tma_why (printed IR).
"""
from __future__ import annotations

import dataclasses

from ...ir.core import is_block
from ...ir.layouts import SwappedAccLayout
from ...ir.index_forms import (NoMatch, arange_index, binop_of, ge0_term, index_constant,
                               iv_affine, launch_value, lt_term, mask_terms, op_of, param_of,
                               ptr_terms, same)
from ...ir.pointers import k_contiguous, split_ptr
from ...ir.schedule import TmaOperand, tile_boxes
from .facts import replace_fact
from .tma_terms import BIG, before_loop, nonneg, scalar_base, tma_stride, uncast

TMA_KIND = {"float16": "f16", "bfloat16": "bf16", "float8e4nv": "u8", "float8e5": "u8",
         "int8": "u8"}


def _operand(fn, loop, ld, role, it_step, positive, tf32=False, k_major_b=False):
    """(TmaOperand, map recipe, wraps, extents as printed) of one ring load, or raise
    NoMatch(reason). `positive` collects the parameters a coordinate divides by (the launcher
    checks them).

    The operand's tile lands in the order of memory: rows of the box set are the block's axis
    whose stride is the row stride, columns the contiguous one. That is the block's own order,
    except for a B operand contiguous along K (axis 0; k_major_b), whose ring tile is K-major:
    its box set is [N][K], the transposed block, in the TmaOperand's coordinates (rows N,
    columns K, advancing along the columns)."""
    ptr = ld.operands[0]
    R, C = ld.result.shape
    kind = TMA_KIND.get(ld.result.dtype.name)
    if kind is None and tf32 and ld.result.dtype.name == "float32":
        kind = "f32"        # tf32 products read fp32 bits (wgmma ignores the low 13)
    if kind is None:
        raise NoMatch(f"{ld.result.dtype.name} tiles stay on cp.async")
    es = ld.result.dtype.bits // 8
    split = split_ptr(ptr, ld.parent)
    if split is None:
        raise NoMatch("the pointer is not loop-invariant plus a carried offset")
    base, off = split
    terms = []
    P = ptr_terms(base, (R, C), terms)
    if P is None:
        raise NoMatch("the pointer block is not `pointer parameter + offsets`")
    P, uterms = scalar_base(fn, P)
    if len(uterms) > 3:
        raise NoMatch("more than three index * stride terms in the base pointer (TMA rank <= 5)")
    if sorted(t[0] for t in terms) != [0, 1]:
        raise NoMatch("the offsets are not rows * stride + cols")
    by_axis = {t[0]: t for t in terms}
    cax = 0 if k_major_b else 1          # the axis that must be contiguous
    if by_axis[cax][2] != 1:
        raise NoMatch("B is not contiguous along K" if k_major_b else "the columns are not contiguous")
    rax = 1 - cax
    stride = by_axis[rax][2]
    if isinstance(stride, int):
        if (stride * es) % 16:
            raise NoMatch("the row stride is not a multiple of 16 bytes")
        stride_src = ("const", stride)
    else:
        sp = param_of(fn, stride)
        if sp is None or not sp.divisible_by_16:
            raise NoMatch("the row stride is not a parameter divisible by 16")
        stride_src = ("param", sp.index, sp.name)
    body = loop.regions[0]
    outer = []
    for u, us in uterms:
        if not u.dtype.is_int() or uncast(u).dtype.bits > 32 or not before_loop(u, body):
            raise NoMatch("an offset index of the base pointer is not a 32-bit scalar computed "
                          "before the loop")
        if not nonneg(fn, u, positive):
            raise NoMatch("an offset index of the base pointer is not provably non-negative")
        outer.append((u, tma_stride(fn, us, es, "an offset stride of the base pointer")))
    idx = {}
    for ax in (0, 1):
        got = arange_index(by_axis[ax][1])
        if got is None or got[1] != (R, C)[ax]:
            raise NoMatch("an axis index is not `start + arange`")
        idx[ax] = got
    # the carried offset advances by adv * (stride of one axis) per iteration
    s = it_step
    c = index_constant(s)
    adv_axis = adv = None
    if c is not None:
        adv_axis, adv = cax, int(c)
    else:
        m = binop_of(s, "mul")
        if m is not None:
            for x, y in (m.operands, m.operands[::-1]):
                if index_constant(x) is not None and not isinstance(stride, int) and same(y, stride):
                    adv_axis, adv = rax, int(index_constant(x))
    if adv_axis is None and isinstance(stride, int) and c is not None and c % stride == 0:
        adv_axis, adv = rax, int(c) // stride
    if adv_axis is None:
        raise NoMatch("the per-iteration pointer step is not a constant number of rows or columns")
    if idx[adv_axis][2] is not None:
        raise NoMatch("the advancing axis wraps")
    lb, _, step = loop.operands[:3]
    iv = loop.regions[0].args[0]
    # extents: from the mask's terms, or the wrap
    extent = {0: None, 1: None}
    outer_extent = {}
    if ld.attrs.get("has_mask"):
        conj = []
        mask_terms(ld.operands[1], conj)
        for t in conj:
            ob = _outer_bound(t, outer)
            if ob is not None:       # `u < B` of a base coordinate (a batch of one element):
                j, bound = ob        # the map's extent along that dimension; TMA fills zeros
                outer_extent[j] = launch_value(fn, bound, "a mask bound")
                continue
            low = ge0_term(t, (R, C))
            if low is not None:
                # `index >= 0` (a descriptor's offset not provably non-negative): a box reads
                # zeros at negative coordinates too, so the term only has to test the loaded
                # index itself, iteration by iteration
                ax, left = low
                lrest, lc = iv_affine(left, iv)
                if lrest is None or not same(lrest, idx[ax][3]) or idx[ax][2] is not None:
                    raise NoMatch("a mask term `>= 0` does not bound the loaded index")
                _follows_loop(lc, adv if ax == adv_axis else 0, lb, step)
                continue
            got = lt_term(t, (R, C))
            if got is None:
                raise NoMatch("a mask term is not `index < bound` or `index >= 0` along one axis")
            ax, left, bound = got
            if extent[ax] is not None or idx[ax][2] is not None:
                raise NoMatch("an axis has two bounds")
            lrest, lc = iv_affine(left, iv)
            brest, bc = iv_affine(bound, iv)
            if lrest is None or not same(lrest, idx[ax][3]) or brest is None:
                raise NoMatch("a mask term does not bound the loaded index")
            # the mask reads: index + iv * (lc - bc) < bound
            _follows_loop(lc - bc, adv if ax == adv_axis else 0, lb, step)
            extent[ax] = launch_value(fn, brest, "a mask bound")
    wraps, said = {}, {}
    for ax in (0, 1):
        if extent[ax] is not None:
            said[ax] = f"< {_src(extent[ax])} (mask)"
        elif idx[ax][2] is not None:
            extent[ax] = launch_value(fn, idx[ax][2], "a wrap bound")
            wraps[ax] = (idx[ax][0], idx[ax][2])
            said[ax] = f"< {_src(extent[ax])} (wrap)"
        elif ax == cax:
            # unbounded: the launch's tensor bounds it (module docstring)
            extent[ax] = stride_src
            said[ax] = f"< {_src(stride_src)} (no mask: the row stride)"
        else:
            extent[ax] = ("const", BIG)
            said[ax] = "< 2^31-1 (no mask)"
    shape = (R, C)
    box, _ = tile_boxes(shape[rax], shape[cax], es)
    recipe = dict(ptr=P.index, ptr_name=P.name, kind=kind, rows=extent[rax], cols=extent[cax],
                  row_stride=stride_src, box_inner=box.inner, box_outer=box.outer,
                  swizzle=box.swizzle, esize=es)
    if outer:
        recipe["outer"] = [dict(extent=list(outer_extent.get(j, ("const", BIG))), stride=list(st))
                           for j, (_, st) in enumerate(outer)]
    t = TmaOperand(role, -1, shape[rax], shape[cax], es, idx[rax][0], idx[cax][0],
                   0 if adv_axis == rax else 1, adv, [u for u, _ in outer])
    told = f"rows {said[rax]}, cols {said[cax]}" + "".join(
        f", then a dimension of stride {_src(st)} at a {u.name or 'uniform'} index"
        + (f" < {_src(outer_extent[j])} (mask)" if j in outer_extent else "")
        for j, (u, st) in enumerate(outer))
    return t, recipe, wraps, told


def _follows_loop(k, want, lb, step):
    """A mask term that moves by `k` per unit of the loop variable tests the loaded index only
    if the load's axis moves by the same: `want` elements per iteration (0 off the advancing
    axis), the loop counting from 0 by a constant step."""
    if k:
        if index_constant(lb) != 0 or index_constant(step) is None or index_constant(step) * k != want:
            raise NoMatch("a mask bound does not follow the loop")
    elif want:
        raise NoMatch("a mask bound does not follow the loop")


def _outer_bound(t, outer):
    """(j, bound) when mask conjunct `t` is the same bool for the whole tile, `u < bound` (a
    splat of it, through broadcasts) of the base coordinate u of outer[j] = (u, stride); else
    None."""
    v = t
    while is_block(v.type):
        o = op_of(v, "broadcast", "splat", "convert_layout", "reshape")
        if o is None:
            return None
        v = o.operands[0]
    lt = binop_of(v, "lt")
    if lt is None:
        return None
    for j, (u, st) in enumerate(outer):
        if same(uncast(lt.operands[0]), uncast(u)):
            return j, lt.operands[1]
    return None


def _src(src) -> str:
    """A recipe's launch value as the printed IR names it."""
    return str(src[1]) if src[0] == "const" else src[2]


_ELEMENTWISE = {"cast", "binary", "unary", "select", "fma", "convert_layout"}


def _rows_dead(fn, out_value, axis, start, wrap):
    """Every use of `out_value` (a dot result) is elementwise and ends in stores masked by
    `start + arange < wrap` along `axis`: what the result holds past `wrap` is never written."""
    uses = fn.body.uses()
    todo, seen = [out_value], set()
    while todo:
        v = todo.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        for op in uses.get(v.id, []):
            if op.opcode in _ELEMENTWISE and not op.regions:
                todo.extend(op.results)
            elif op.opcode in ("store", "atomic") and op.attrs.get("has_mask") \
                    and _store_masked(op, v, axis, start, wrap):
                continue
            else:
                return False
    return True


def _store_masked(op, v, axis, start, wrap) -> bool:
    mask = op.operands[-1]
    if mask is v:
        return False
    shape = mask.shape
    conj = []
    mask_terms(mask, conj)
    for t in conj:
        got = lt_term(t, shape)
        if got is None or got[0] != axis or not same(got[2], wrap):
            continue
        i = arange_index(got[1])
        if i is not None and i[2] is None and (i[0] == start if isinstance(start, int)
                                               else not isinstance(i[0], int)
                                               and same(i[0], start)):
            return True
    return False


def _carried_step(ld, body, yld):
    """The per-iteration step s of a ring load's carried offset (its update `o + cast(s)` in
    the loop's yield; passes/tc/dot_pipeline.py wrote it), or None."""
    split = split_ptr(ld.operands[0], body)
    if split is None or split[1] not in body.args[1:]:
        return None
    upd = binop_of(yld.operands[body.args.index(split[1]) - 1], "add")
    if upd is None or upd.operands[0] is not split[1]:
        return None
    s = upd.operands[1]
    c = op_of(s, "cast")
    return c.operands[0] if c is not None else s


def plan_tma(fn, loop, ring, dot, loads, acc_out, num_threads):
    """Decide TMA for one ring (loads = (A load, B load)); record the facts or the reason.

    A B contiguous along K (x @ W.T) is described as transposed boxes: they land as the K-major
    [N][K] tile (ring.b_kmajor), which every input type's wgmma reads.

    tf32 with B contiguous along N: wgmma reads a 4-byte B from shared memory only K-major, and
    a box lands N-major. The dot is then computed swapped, C^T = B^T A^T (plan.swap,
    SwappedAccLayout): A's K-major tile is wgmma's B, B^T's fragments are read from B's tile
    into registers (codegen/tc/dot_swap.py)."""
    body = loop.regions[0]
    yld = body.ops[-1]
    plan = dot.attrs["dot_plan"]
    # a B contiguous along K lands K-major by itself (transposed boxes): no swap needed
    kcontig = k_contiguous(loads[1].operands[0])
    swap = plan.kind == "tf32" and not kcontig
    steps = []
    for ld in loads:
        steps.append(_carried_step(ld, body, yld))
    positive = []
    try:
        if any(s is None for s in steps):
            raise NoMatch("a pointer does not advance by a loop-invariant step")
        k_major_b = ring.b_kmajor and not swap
        if k_major_b and not kcontig:
            # the ring's B tile is K-major (8-bit inputs) and a box along N lands N-major
            raise NoMatch("a B contiguous along N is copied transposed into the K-major tile")
        if swap and (plan.col_groups > 1
                     or not SwappedAccLayout.fits(plan.M, plan.N, num_threads)):
            raise NoMatch("tf32 needs the swapped accumulator: N a multiple of 16 * num_warps "
                          "and M rows covering every warp")
        ops = []
        for role, ld, s in zip("ab", loads, steps):
            # B's boxes land in the order of the ring's B tile: K-major ([N][K]) ones are
            # the transposed block
            ops.append(_operand(fn, loop, ld, role, s, positive, plan.kind == "tf32",
                                role == "b" and k_major_b))
        (ta, ra, wa, _), (tb, rb, wb, _) = ops
        # A's wrapped rows are the result's rows; B's wrapped columns the result's columns
        dead = [(0, *wa[0])] if 0 in wa else []
        dead += [(1, *wb[1])] if 1 in wb else []
        if 1 in wa or 0 in wb:
            raise NoMatch("the K axis wraps")
        for axis, start, wrap in dead:
            if acc_out is None or not _rows_dead(fn, acc_out, axis, start, wrap):
                raise NoMatch("a wrapped axis (`% W`) reaches more than stores masked by `< W`")
    except NoMatch as e:
        replace_fact(fn, ring, tma_why=str(e))
        return False
    maps = fn.attrs.setdefault("tma_maps", [])
    boxes = []
    for t, r in ((ta, ra), (tb, rb)):
        if positive:
            r["positive"] = [list(p) for p in dict.fromkeys(map(tuple, positive))]
        boxes.append(dataclasses.replace(t, map_index=len(maps)))
        maps.append(r)
    for ld, op in zip(loads, ops):
        ld.attrs["tma_box"] = op[3]      # the map's extents, as decided (printed IR)
    replace_fact(fn, ring, tma=boxes)
    replace_fact(fn, plan, swap=swap)
    return True

