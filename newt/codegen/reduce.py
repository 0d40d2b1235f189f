"""Reductions (sum, max, min, argmax, argmin) and scans (cumulative sum/max/min).

Reduce follows the plan the shared-memory pass made (passes/smem.py, ReducePlan), always over
the last axis of a block in a group-cyclic layout (the layout pass permutes other axes last):
  1. per thread: a pairwise tree over the `seg` slots of each partial (invalid slots hold the
     identity, so padding is never counted);
  2. per warp: a __shfl_xor_sync butterfly over `lanes` lanes (every lane ends with the result);
  3. across warps: one value per (partial, warp) in the scratch arena, a barrier, and each
     output combines its `cpr` entries in a fixed order, so every thread computes the same bits.
A full reduction gives a uniform scalar. argmax/argmin carry (value, index) pairs and keep the
smallest index among equal values. Float max/min ignore NaN as fmaxf / fminf do (NaN only when
every element is NaN), argmax/argmin likewise; the interpreter defines the same.

Scan (op.attrs["plan"], decided in passes/smem.py): "warp" for a forward sum of a 1-D block
(prefix inside each group of vec slots, __shfl_up_sync across lanes, one value per (group,
warp) through the arena, one barrier); otherwise "smem", a Hillis-Steele scan through the
scratch arena (log2(n) steps, two barriers each), simple and obviously right for any axis.
"""
from __future__ import annotations

from ..ir.core import is_block
from .elementwise import binary_expr, literal
from .emitter import handles

FULL_MASK = "0xffffffffu"


def identity(kind, dt) -> str:
    if kind == "sum":
        return literal(0, dt)
    big = kind in ("min", "argmin")
    if dt.is_floating():
        # NaN, which fmaxf / fminf (and `combine` of arg kinds) pass over: padding slots never
        # win, and a block of NaN alone reduces to NaN whatever the layout's padding (Triton)
        return literal(float("nan"), dt)
    if dt.is_bool():
        return "true" if big else "false"
    if dt.kind == "uint":
        return literal(2 ** dt.bits - 1, dt) if big else literal(0, dt)
    lo, hi = -2 ** (dt.bits - 1), 2 ** (dt.bits - 1) - 1
    if dt.bits == 64:
        return "0x7fffffffffffffffLL" if big else "(-0x7fffffffffffffffLL - 1)"
    return f"({literal(hi, dt)})" if big else f"({lo})"


def combine(em, kind, dt, a, b, ai=None, bi=None):
    """Emit a = combine(a, b) (and the index for arg kinds)."""
    if kind in ("argmax", "argmin"):
        cmp = ">" if kind == "argmax" else "<"
        t = em.fresh("take")
        if dt.is_floating():   # NaN loses to any number; among NaN the smallest index wins
            em.emit(f"bool {t} = ({b} {cmp} {a}) || ({a} != {a} && {b} == {b}) || "
                    f"(({b} == {a} || ({a} != {a} && {b} != {b})) && {bi} < {ai});")
        else:
            em.emit(f"bool {t} = ({b} {cmp} {a}) || ({b} == {a} && {bi} < {ai});")
        em.emit(f"{a} = {t} ? {b} : {a}; {ai} = {t} ? {bi} : {ai};")
        return
    op = {"sum": "add", "max": "maximum", "min": "minimum"}[kind]
    em.emit(f"{a} = {binary_expr(op, dt, a, b)};")


def shfl(ct, x, m):
    if ct in ("bool", "i8", "i16", "u8", "u16"):
        return f"({ct})__shfl_xor_sync({FULL_MASK}, (int)({x}), {m})"
    return f"__shfl_xor_sync({FULL_MASK}, {x}, {m})"


@handles("reduce")
def _reduce(em, op):
    x, r = op.operands[0], op.result
    kind, plan = op.attrs["kind"], op.attrs["plan"]
    dt, ct = x.dtype, em.ctype(x)
    arg = kind in ("argmax", "argmin")
    lay = x.attrs["layout"]
    W = em.T // 32
    # 1. per thread: identity in invalid slots, then a pairwise tree per partial
    t = em.fresh("red")
    ti = t + "_i" if arg else None
    em.emit(f"{ct} {t}[{lay.nslots}];" + (f" i32 {ti}[{lay.nslots}];" if arg else ""))
    with em.slots(lay.nslots) as s:
        v = lay.valid("tid", s)
        em.emit(f"{t}[{s}] = {f'{v} ? {em.at(x, s)} : {identity(kind, dt)}' if v else em.at(x, s)};")
        if arg:
            em.emit(f"{ti}[{s}] = {lay.flat('tid', s)} % {plan.n};")
    seg, P = plan.seg, lay.nslots // plan.seg
    w = seg // 2
    while w >= 1:
        with em.slots(P, "p"):
            with em.slots(w, "j"):
                a, b = f"{t}[p * {seg} + j]", f"{t}[p * {seg} + j + {w}]"
                combine(em, kind, dt, a, b, arg and f"{ti}[p * {seg} + j]",
                        arg and f"{ti}[p * {seg} + j + {w}]")
        w //= 2
    # 2. per warp: butterfly
    m = plan.lanes // 2
    while m >= 1:
        with em.slots(P, "p"):
            a = f"{t}[p * {seg}]"
            o = em.fresh("o")
            em.emit(f"{ct} {o} = {shfl(ct, a, m)};")
            if arg:
                em.emit(f"i32 {o}i = __shfl_xor_sync({FULL_MASK}, {ti}[p * {seg}], {m});")
            combine(em, kind, dt, a, o, arg and f"{ti}[p * {seg}]", arg and f"{o}i")
        m //= 2
    # 3. across warps
    if plan.kind == "full":
        acc, acci = f"{t}[0]", arg and f"{ti}[0]"
        if W > 1:
            buf, bufi = _buffers(em, op, ct, arg, W)
            em.emit(f"if (lane == 0) {{ {buf}[warp] = {acc};" + (f" {bufi}[warp] = {acci};" if arg else "") + " }")
            em.barrier()
            em.emit(f"{acc} = {buf}[0];" + (f" {acci} = {bufi}[0];" if arg else ""))
            for k in range(1, W):
                combine(em, kind, dt, acc, f"{buf}[{k}]", acci, arg and f"{bufi}[{k}]")
        res = acci if arg else acc
        if is_block(r.type):
            em.elementwise(op, lambda s: res)
        else:
            em.declare(r, res)
        return
    buf, bufi = _buffers(em, op, ct, arg, plan.entries)
    with em.slots(P, "p"):
        v = lay.valid("tid", f"p * {seg}")
        if plan.kind == "chunk":
            idx, who = f"p * {W} + warp", "lane == 0"
        else:
            idx, who = f"{lay.flat('tid', f'p * {seg}')} / {plan.n}", \
                f"(lane & {plan.lanes - 1}) == 0" if plan.lanes > 1 else ""
        cond = " && ".join(c for c in (who, v) if c)
        body = f"{buf}[{idx}] = {t}[p * {seg}];" + (f" {bufi}[{idx}] = {ti}[p * {seg}];" if arg else "")
        em.emit(f"if ({cond}) {{ {body} }}" if cond else body)
    em.barrier()
    rl = r.attrs["layout"]
    n = em.declare(r)
    with em.slots(rl.nslots) as s:
        v = rl.valid("tid", s)
        row = em.fresh("row")
        em.emit(f"int {row} = {rl.flat('tid', s)};")
        if v:
            em.emit(f"if (!{v}) {{ {n}[{s}] = 0; continue; }}")
        acc = em.fresh("acc")
        em.emit(f"{ct} {acc} = {buf}[{row} * {plan.cpr}];" +
                (f" i32 {acc}i = {bufi}[{row} * {plan.cpr}];" if arg else ""))
        for k in range(1, plan.cpr):
            combine(em, kind, dt, acc, f"{buf}[{row} * {plan.cpr} + {k}]", arg and f"{acc}i",
                    arg and f"{bufi}[{row} * {plan.cpr} + {k}]")
        em.emit(f"{n}[{s}] = {acc}i;" if arg else f"{n}[{s}] = {acc};")


def _buffers(em, op, ct, arg, entries):
    if op.attrs.get("sync_first"):
        em.barrier()
    buf = em.fresh("rbuf")
    em.emit(f"{ct}* {buf} = {em.smem(op, ct)};")
    if not arg:
        return buf, None
    size = 8 if ct in ("double", "i64", "u64") else 4
    bufi = buf + "i"
    em.emit(f"i32* {bufi} = {em.smem(op, 'i32', entries * size)};")
    return buf, bufi


@handles("scan")
def _scan(em, op):
    x, r = op.operands[0], op.result
    kind, axis, rev = op.attrs["kind"], op.attrs["axis"], op.attrs.get("reverse", False)
    dt, ct = x.dtype, em.ctype(x)
    lay = x.attrs["layout"]
    n = x.shape[axis]
    stride = 1
    for d in x.shape[axis + 1:]:
        stride *= d
    out = em.declare(r)
    with em.slots(lay.nslots) as s:
        em.emit(f"{out}[{s}] = {em.at(x, s)};")
    if n == 1:
        return
    if op.attrs.get("plan") == "warp":
        return _warp_scan(em, op, out, ct, dt, lay)
    buf = em.fresh("sbuf")
    em.emit(f"{ct}* {buf} = {em.smem(op, ct)};")
    d, first = 1, True
    while d < n:
        if not first or op.attrs.get("sync_first"):
            em.barrier()
        first = False
        with em.slots(lay.nslots) as s:
            v = lay.valid("tid", s)
            st = f"{buf}[{lay.flat('tid', s)}] = {out}[{s}];"
            em.emit(f"if ({v}) {st}" if v else st)
        em.barrier()
        with em.slots(lay.nslots) as s:
            f = em.fresh("f")
            em.emit(f"int {f} = {lay.flat('tid', s)};")
            c = f"(({f} / {stride}) % {n})"
            v = lay.valid("tid", s)
            if rev:
                cond, other = f"{c} + {d} < {n}", f"{buf}[{f} + {d * stride}]"
                a, b = other, f"{out}[{s}]"
            else:
                cond, other = f"{c} >= {d}", f"{buf}[{f} - {d * stride}]"
                a, b = other, f"{out}[{s}]"
            if v:
                cond = f"{v} && {cond}"
            op_name = {"sum": "add", "max": "maximum", "min": "minimum"}[kind]
            em.emit(f"if ({cond}) {out}[{s}] = {binary_expr(op_name, dt, a, b)};")
        d *= 2


def _warp_scan(em, op, out, ct, dt, lay):
    """Inclusive sum of a 1-D block in a cyclic layout: within each group of vec slots, then
    across the 32 lanes with __shfl_up_sync, then across warps and rounds of groups through one
    value per (group, warp) in the scratch arena (one barrier)."""
    vec, G, W = lay.vec, lay.groups, em.T // 32
    add = lambda a, b: binary_expr("add", dt, a, b)  # noqa: E731
    with em.slots(G, "g"):
        with em.slots(vec - 1, "j"):
            em.emit(f"{out}[g * {vec} + j + 1] = {add(f'{out}[g * {vec} + j]', f'{out}[g * {vec} + j + 1]')};")
    tot = em.fresh("tot")
    em.emit(f"{ct} {tot}[{G}];")
    with em.slots(G, "g"):
        em.emit(f"{ct} incl = {out}[g * {vec} + {vec - 1}];")
        for m in (1, 2, 4, 8, 16):
            em.emit(f"{{ {ct} o = __shfl_up_sync({FULL_MASK}, incl, {m}); "
                    f"if (lane >= {m}) incl = {add('o', 'incl')}; }}")
        em.emit(f"{tot}[g] = incl;")               # inclusive over the warp's lanes
        em.emit(f"{ct} ex = __shfl_up_sync({FULL_MASK}, incl, 1);")
        em.emit(f"if (lane == 0) ex = 0;")         # exclusive: the lanes before this one
        with em.slots(vec, "j"):
            em.emit(f"{out}[g * {vec} + j] = {add('ex', f'{out}[g * {vec} + j]')};")
    if op.attrs.get("sync_first"):
        em.barrier()
    buf = em.fresh("wbuf")
    em.emit(f"{ct}* {buf} = {em.smem(op, ct)};")
    with em.slots(G, "g"):
        em.emit(f"if (lane == 31) {buf}[g * {W} + warp] = {tot}[g];")
    em.barrier()
    base = em.fresh("base")
    em.emit(f"{ct} {base} = 0;")
    with em.slots(G, "g"):
        em.emit(f"{ct} off = {base};")
        with em.slots(W, "w"):
            em.emit(f"if (w < warp) off = {add('off', f'{buf}[g * {W} + w]')};")
            em.emit(f"{base} = {add(base, f'{buf}[g * {W} + w]')};")
        with em.slots(vec, "j"):
            em.emit(f"{out}[g * {vec} + j] = {add(f'{out}[g * {vec} + j]', 'off')};")
