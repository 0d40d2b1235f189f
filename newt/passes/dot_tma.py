"""Dot TMA pass: ring loads whose tiles are boxes of a 2-D tensor arrive by TMA.

Where it sits: inside the dot pipeline pass (dot_pipeline.pipeline_dots), after the ring is
planned; it only adds facts. On sm_90a with wgmma, a ring's two operand loads become copies of
one box each (cp.async.bulk.tensor, one thread issuing them, completing on an mbarrier) when
the pass can prove that a box computes exactly what the pointer block and mask compute:

    pointer  = P + rows[:, None] * s + cols[None, :]        P a 16-byte aligned pointer
                                                            parameter, s a row stride whose
                                                            bytes are a multiple of 16
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

Facts recorded: `ring.tma = [TmaOperand(A), TmaOperand(B)]` and fn.attrs["tma_maps"], the
recipes the launcher builds CUtensorMaps from (newt/runtime/tensormap.py): one per operand, in
the order of the kernel's extra `__grid_constant__` parameters. Codegen: codegen/dot_tma.py.
A ring the pass cannot prove stays on cp.async, with the reason in ring.tma_why (printed IR).
"""
from __future__ import annotations

import dataclasses

from .. import dtypes as D
from ..codegen.tma import tile_boxes
from ..ir.core import Op
from .dot import SwappedAccLayout
from .dot_loads import k_contiguous

# attrs that make two ops compute different things (the rest are analysis facts)
_SEMANTIC_ATTRS = ("op", "value", "start", "end", "axis", "bitcast", "fp_rounding", "kind", "order")
_KIND = {"float16": "f16", "bfloat16": "bf16", "float8e4nv": "u8", "float8e5": "u8",
         "int8": "u8"}


@dataclasses.dataclass
class TmaOperand:
    role: str                 # "a" or "b"
    map_index: int            # which extra kernel parameter holds this operand's map
    rows: int                 # the tile (= the box set) in elements
    cols: int
    esize: int
    row0: object              # scalar Value or int: the tile's first row / column at iteration 0
    col0: object
    adv_axis: int             # the axis the loop advances (0 rows, 1 cols)
    adv: int                  # elements per iteration along adv_axis

    def coords(self, em, it: str) -> tuple[str, str]:
        """C expressions of the tile's (first column, first row) at ring iteration `it`."""
        c = [_c(em, self.row0), _c(em, self.col0)]
        c[self.adv_axis] = f"({c[self.adv_axis]} + {it} * {self.adv})"
        return c[1], c[0]


def _c(em, v) -> str:
    return str(v) if isinstance(v, int) else f"(int){em.name(v)}"


def _op(v, *opcodes):
    o = v.owner
    return o if isinstance(o, Op) and (not opcodes or o.opcode in opcodes) else None


def _binop(v, name):
    o = _op(v, "binary")
    return o if o is not None and o.attrs.get("op") == name else None


def _const(v):
    """The value of integer index math built from constants (a parameter specialized as 1 is
    one: the frontend makes it a typed constant), else None."""
    o = _op(v, "constant", "binary", "cast")
    if o is None:
        return None
    if o.opcode == "constant":
        return o.attrs["value"]
    if o.opcode == "cast":
        return _const(o.operands[0]) if o.result.dtype.is_int() else None
    x, y = (_const(w) for w in o.operands)
    if x is None or y is None:
        return None
    return {"mul": x * y, "add": x + y, "sub": x - y}.get(o.attrs["op"])


def same(a, b) -> bool:
    """a and b compute the same value: the same SSA value, or ops with the same opcode,
    semantic attrs, result type and (recursively) operands."""
    if a is b:
        return True
    oa, ob = _op(a), _op(b)
    if oa is None or ob is None or oa.opcode != ob.opcode or a.type != b.type \
            or oa.regions or ob.regions or oa.opcode in ("load", "atomic", "philox"):
        return False
    if any(oa.attrs.get(k) != ob.attrs.get(k) for k in _SEMANTIC_ATTRS):
        return False
    return len(oa.operands) == len(ob.operands) and all(
        same(x, y) for x, y in zip(oa.operands, ob.operands))


def _peel(v):
    """Through broadcasts and rank-changing reshapes of a value along one axis."""
    while True:
        o = _op(v, "broadcast", "reshape", "convert_layout")
        if o is None:
            return v
        v = o.operands[0]


def _axis_of(v, shape):
    """The one axis of `shape` along which v (a broadcast/reshape of a 1-D value) varies."""
    s = v.shape
    if len(s) != 2:
        return None
    if s[0] == shape[0] and s[1] == 1:
        return 0
    if s[0] == 1 and s[1] == shape[1]:
        return 1
    return None


def _terms(v, shape, out):
    """Split a [R, C] integer offset block into per-axis terms (axis, 1-D index, stride),
    stride an int or a scalar Value. False when it has another form."""
    o = _op(v)
    if o is None:
        return False
    if o.opcode == "binary" and o.attrs["op"] == "add":
        return _terms(o.operands[0], shape, out) and _terms(o.operands[1], shape, out)
    if o.opcode in ("broadcast", "convert_layout") and o.operands[0].shape != v.shape:
        return _terms(o.operands[0], shape, out)
    if o.opcode == "convert_layout":
        return _terms(o.operands[0], shape, out)
    if o.opcode == "binary" and o.attrs["op"] == "mul":
        for x, y in (o.operands, o.operands[::-1]):
            sp = _op(y, "splat")
            if sp is not None:
                inner = []
                if not _terms(x, shape, inner) or len(inner) != 1 or inner[0][2] != 1:
                    return False
                s = sp.operands[0]
                c = _const(s)
                out.append((inner[0][0], inner[0][1], c if c is not None else s))
                return True
        return False
    if o.opcode == "reshape" and len(o.operands[0].shape) == 1:
        ax = _axis_of(v, shape)
        if ax is None:
            return False
        out.append((ax, o.operands[0], 1))
        return True
    return False


def _ptr_terms(v, shape, out):
    """The scalar pointer P of `P + offsets + offsets ...` (through broadcasts), with the
    offsets' per-axis terms added to `out`; None for other forms."""
    o = _op(v)
    if o is None:
        return None
    if o.opcode == "splat":
        return o.operands[0]
    if o.opcode in ("broadcast", "convert_layout"):
        return _ptr_terms(o.operands[0], shape, out)
    if o.opcode == "addptr":
        if not _terms(o.operands[1], shape, out):
            return None
        return _ptr_terms(o.operands[0], shape, out)
    return None


def _index(v):
    """(start, n, wrap, unwrapped) of a 1-D index `start + arange(0, n)` (start an int or a
    scalar Value), optionally `% splat(W)` (wrap = W; unwrapped is the index before it), else
    None."""
    wrap = None
    m = _binop(v, "mod")
    if m is not None:
        sp = _op(m.operands[1], "splat")
        if sp is None:
            return None
        wrap, v = sp.operands[0], m.operands[0]
    o = _op(v)
    if o is not None and o.opcode == "arange":
        return o.attrs["start"], o.attrs["end"] - o.attrs["start"], wrap, v
    a = _binop(v, "add")
    if a is None:
        return None
    for x, y in (a.operands, a.operands[::-1]):
        ar, sp = _op(x, "arange"), _op(y, "splat")
        if ar is not None and sp is not None and ar.attrs["start"] == 0:
            return sp.operands[0], ar.attrs["end"], wrap, v
    return None


def _iv_affine(v, iv):
    """(rest, c) with v == rest + iv * c: rest a Value (None for 0), c an int; (v, 0) when no
    such split is seen (callers then require `rest` itself to be a known loop-invariant)."""
    if v is iv:
        return None, 1
    sp = _op(v, "splat")
    if sp is not None:
        r = _iv_affine(sp.operands[0], iv)
        if r[0] is None:
            return r
    m = _binop(v, "mul")
    if m is not None:
        for x, y in (m.operands, m.operands[::-1]):
            if x is iv and _const(y) is not None:
                return None, _const(y)
    for name, sign in (("add", 1), ("sub", -1)):
        b = _binop(v, name)
        if b is None:
            continue
        x, y = b.operands
        r = _iv_affine(y, iv)
        if r is not None and r[0] is None:
            return x, sign * r[1]
        if name == "add":
            r = _iv_affine(x, iv)
            if r is not None and r[0] is None:
                return y, r[1]
    return v, 0


def _mask_terms(m, out):
    """The conjuncts of a mask block (through `&` and broadcasts)."""
    o = _op(m)
    if o is not None and o.opcode == "binary" and o.attrs["op"] == "and":
        return _mask_terms(o.operands[0], out) and _mask_terms(o.operands[1], out)
    if o is not None and o.opcode in ("broadcast", "convert_layout") and \
            o.operands[0].shape != m.shape and _op(o.operands[0], "binary") is not None \
            and _op(o.operands[0]).attrs["op"] == "and":
        return _mask_terms(o.operands[0], out)
    out.append(m)
    return True


def _lt_term(t, shape):
    """(axis, 1-D left side, bound scalar) of a mask conjunct `left < bound` along one axis
    (`left[:, None] < bound`, `(left < bound)[None, :]`, through broadcasts), else None."""
    v, ax = t, None
    while True:
        o = _op(v)
        if o is None:
            return None
        if len(v.shape) == 2 and _axis_of(v, shape) is not None:
            ax = _axis_of(v, shape)
        if o.opcode not in ("broadcast", "convert_layout", "reshape"):
            break
        v = o.operands[0]
    lt = _binop(v, "lt")
    if lt is None or ax is None:
        return None
    left, right = _peel(lt.operands[0]), _op(_peel(lt.operands[1]), "splat")
    if right is None or len(left.shape) != 1:
        return None
    return ax, left, right.operands[0]


class _No(Exception):
    pass


def _param(fn, v):
    for p in fn.params:
        if p.value is v:
            return p
    return None


def _source(fn, v, what):
    """A launch-time value: ("const", int) or ("param", index among the Python function's
    parameters) of a scalar the launcher can read from the call's arguments."""
    c = _const(v)
    if c is not None:
        return ("const", int(c))
    p = _param(fn, v)
    if p is None or p.dtype not in (D.int32, D.int64):
        raise _No(f"{what} is not a kernel parameter")
    return ("param", p.index, p.name)


def _operand(fn, loop, ld, role, it_step, tf32=False, k_major_b=False):
    """TmaOperand + map recipe of one ring load, or raise _No(reason).

    The operand's tile lands in the order of memory: rows of the box set are the block's axis
    whose stride is the row stride, columns the contiguous one. That is the block's own order,
    except for a B operand contiguous along K (axis 0; k_major_b), whose ring tile is K-major:
    its box set is [N][K], the transposed block, in the TmaOperand's coordinates (rows N,
    columns K, advancing along the columns)."""
    from ..codegen.dot_ring import _split_ptr
    ptr = ld.operands[0]
    R, C = ld.result.shape
    kind = _KIND.get(ld.result.dtype.name)
    if kind is None and tf32 and ld.result.dtype.name == "float32":
        kind = "f32"        # tf32 products read fp32 bits (wgmma ignores the low 13)
    if kind is None:
        raise _No(f"{ld.result.dtype.name} tiles stay on cp.async")
    es = ld.result.dtype.bits // 8
    split = _split_ptr(ptr, ld.parent)
    if split is None:
        raise _No("the pointer is not loop-invariant plus a carried offset")
    base, off = split
    terms = []
    P = _ptr_terms(base, (R, C), terms)
    if P is None:
        raise _No("the pointer block is not `pointer parameter + offsets`")
    P = _param(fn, P)
    if P is None or not P.divisible_by_16:
        raise _No("the base pointer is not a 16-byte aligned parameter")
    if sorted(t[0] for t in terms) != [0, 1]:
        raise _No("the offsets are not rows * stride + cols")
    by_axis = {t[0]: t for t in terms}
    cax = 0 if k_major_b else 1          # the axis that must be contiguous
    if by_axis[cax][2] != 1:
        raise _No("B is not contiguous along K" if k_major_b else "the columns are not contiguous")
    rax = 1 - cax
    stride = by_axis[rax][2]
    if isinstance(stride, int):
        if (stride * es) % 16:
            raise _No("the row stride is not a multiple of 16 bytes")
        stride_src = ("const", stride)
    else:
        sp = _param(fn, stride)
        if sp is None or not sp.divisible_by_16:
            raise _No("the row stride is not a parameter divisible by 16")
        stride_src = ("param", sp.index, sp.name)
    idx = {}
    for ax in (0, 1):
        got = _index(by_axis[ax][1])
        if got is None or got[1] != (R, C)[ax]:
            raise _No("an axis index is not `start + arange`")
        idx[ax] = got
    # the carried offset advances by adv * (stride of one axis) per iteration
    s = it_step
    c = _const(s)
    adv_axis = adv = None
    if c is not None:
        adv_axis, adv = cax, int(c)
    else:
        m = _binop(s, "mul")
        if m is not None:
            for x, y in (m.operands, m.operands[::-1]):
                if _const(x) is not None and not isinstance(stride, int) and same(y, stride):
                    adv_axis, adv = rax, int(_const(x))
    if adv_axis is None and isinstance(stride, int) and c is not None and c % stride == 0:
        adv_axis, adv = rax, int(c) // stride
    if adv_axis is None:
        raise _No("the per-iteration pointer step is not a constant number of rows or columns")
    if idx[adv_axis][2] is not None:
        raise _No("the advancing axis wraps")
    lb, _, step = loop.operands[:3]
    iv = loop.regions[0].args[0]
    # extents: from the mask's terms, or the wrap
    extent = {0: None, 1: None}
    if ld.attrs.get("has_mask"):
        conj = []
        _mask_terms(ld.operands[1], conj)
        for t in conj:
            got = _lt_term(t, (R, C))
            if got is None:
                raise _No("a mask term is not `index < bound` along one axis")
            ax, left, bound = got
            if extent[ax] is not None or idx[ax][2] is not None:
                raise _No("an axis has two bounds")
            lrest, lc = _iv_affine(left, iv)
            brest, bc = _iv_affine(bound, iv)
            if lrest is None or not same(lrest, idx[ax][3]) or brest is None:
                raise _No("a mask term does not bound the loaded index")
            k = lc - bc     # the mask reads: index + iv * k < bound
            want = adv if ax == adv_axis else 0
            if k:
                if _const(lb) != 0 or _const(step) is None or _const(step) * k != want:
                    raise _No("a mask bound does not follow the loop")
            elif want:
                raise _No("a mask bound does not follow the loop")
            extent[ax] = _source(fn, brest, "a mask bound")
    wraps = {}
    for ax in (0, 1):
        if extent[ax] is None:
            if idx[ax][2] is None:
                raise _No("an axis has neither a mask nor a wrap: its extent is unknown")
            extent[ax] = _source(fn, idx[ax][2], "a wrap bound")
            wraps[ax] = (idx[ax][0], idx[ax][2])
    shape = (R, C)
    box, _ = tile_boxes(shape[rax], shape[cax], es)
    recipe = dict(ptr=P.index, ptr_name=P.name, kind=kind, rows=extent[rax], cols=extent[cax],
                  row_stride=stride_src, box_inner=box.inner, box_outer=box.outer,
                  swizzle=box.swizzle, esize=es)
    t = TmaOperand(role, -1, shape[rax], shape[cax], es, idx[rax][0], idx[cax][0],
                   0 if adv_axis == rax else 1, adv)
    return t, recipe, wraps


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
    _mask_terms(mask, conj)
    for t in conj:
        got = _lt_term(t, shape)
        if got is None or got[0] != axis or not same(got[2], wrap):
            continue
        i = _index(got[1])
        if i is not None and i[2] is None and (i[0] == start if isinstance(start, int)
                                               else not isinstance(i[0], int)
                                               and same(i[0], start)):
            return True
    return False


def _carried_step(ld, body, yld):
    """The per-iteration step s of a ring load's carried offset (its update `o + cast(s)` in
    the loop's yield; passes/dot_pipeline.py wrote it), or None."""
    from ..codegen.dot_ring import _split_ptr
    split = _split_ptr(ld.operands[0], body)
    if split is None or split[1] not in body.args[1:]:
        return None
    upd = _binop(yld.operands[body.args.index(split[1]) - 1], "add")
    if upd is None or upd.operands[0] is not split[1]:
        return None
    s = upd.operands[1]
    c = _op(s, "cast")
    return c.operands[0] if c is not None else s


def plan_tma(fn, loop, ring, dot, loads, acc_out, num_threads):
    """Decide TMA for one ring (loads = (A load, B load)); record the facts or the reason.

    A B contiguous along K (x @ W.T) is described as transposed boxes: they land as the K-major
    [N][K] tile (ring.b_kmajor), which every input type's wgmma reads.

    tf32 with B contiguous along N: wgmma reads a 4-byte B from shared memory only K-major, and
    a box lands N-major. The dot is then computed swapped, C^T = B^T A^T (plan.swap,
    SwappedAccLayout): A's K-major tile is wgmma's B, B^T's fragments are read from B's tile
    into registers (codegen/dot_swap.py)."""
    body = loop.regions[0]
    yld = body.ops[-1]
    plan = dot.attrs["dot_plan"]
    # a B contiguous along K lands K-major by itself (transposed boxes): no swap needed
    kcontig = k_contiguous(loads[1].operands[0])
    swap = plan.kind == "tf32" and not kcontig
    steps = []
    for ld in loads:
        steps.append(_carried_step(ld, body, yld))
    try:
        if any(s is None for s in steps):
            raise _No("a pointer does not advance by a loop-invariant step")
        k_major_b = ring.b_kmajor and not swap
        if k_major_b and not kcontig:
            # the ring's B tile is K-major (8-bit inputs) and a box along N lands N-major
            raise _No("a B contiguous along N is copied transposed into the K-major tile")
        if swap and not SwappedAccLayout.fits(plan.M, plan.N, num_threads):
            raise _No("tf32 needs the swapped accumulator: N a multiple of 16 * num_warps")
        ops = []
        for role, ld, s in zip("ab", loads, steps):
            # B's boxes land in the order of the ring's B tile: K-major ([N][K]) ones are
            # the transposed block
            ops.append(_operand(fn, loop, ld, role, s, plan.kind == "tf32",
                                role == "b" and k_major_b))
        (ta, ra, wa), (tb, rb, wb) = ops
        # A's wrapped rows are the result's rows; B's wrapped columns the result's columns
        dead = [(0, *wa[0])] if 0 in wa else []
        dead += [(1, *wb[1])] if 1 in wb else []
        if 1 in wa or 0 in wb:
            raise _No("the K axis wraps")
        for axis, start, wrap in dead:
            if acc_out is None or not _rows_dead(fn, acc_out, axis, start, wrap):
                raise _No("a wrapped axis (`% W`) reaches more than stores masked by `< W`")
    except _No as e:
        ring.tma_why = str(e)
        return False
    maps = fn.attrs.setdefault("tma_maps", [])
    for t, r in ((ta, ra), (tb, rb)):
        t.map_index = len(maps)
        maps.append(r)
    ring.tma = [ta, tb]
    plan.swap = swap
    return True

