"""Index forms over the IR: the shapes of pointer, index and mask math the TMA passes match
(passes/tc/dot_tma.py, ring_tma.py, store_tma.py). With pointers.py, the one pointer / index
analysis of the project; public names only:
  op_of / binop_of / index_constant / same / peel / axis_of
  offset_terms / ptr_terms   a [R, C] pointer block as P + per-axis (index, stride) terms
  arange_index(v)            start + arange(0, n) [% W, or where(. < W, ., 0)]
  iv_affine(v, iv)           v == rest + iv * c
  mask_terms / lt_term       a mask's conjuncts, `index < bound` along one axis
  ge0_term                   a conjunct `index >= 0` along one axis
  param_of / launch_value    a scalar the launcher reads from the call's arguments
  NoMatch                    raised with the missing fact when a form does not match
"""
from __future__ import annotations

from .. import dtypes as D
from .core import Op


# attrs that make two ops compute different things (the rest are analysis facts)
_SEMANTIC_ATTRS = ("op", "value", "start", "end", "axis", "bitcast", "fp_rounding", "kind", "order")


def op_of(v, *opcodes):
    o = v.owner
    return o if isinstance(o, Op) and (not opcodes or o.opcode in opcodes) else None


def binop_of(v, name):
    o = op_of(v, "binary")
    return o if o is not None and o.attrs.get("op") == name else None


def index_constant(v):
    """The value of integer index math built from constants (a parameter specialized as 1 is
    one: the frontend makes it a typed constant), else None."""
    o = op_of(v, "constant", "binary", "cast")
    if o is None:
        return None
    if o.opcode == "constant":
        return o.attrs["value"]
    if o.opcode == "cast":
        return index_constant(o.operands[0]) if o.result.dtype.is_int() else None
    x, y = (index_constant(w) for w in o.operands)
    if x is None or y is None:
        return None
    return {"mul": x * y, "add": x + y, "sub": x - y}.get(o.attrs["op"])


def same(a, b) -> bool:
    """a and b compute the same value: the same SSA value, or ops with the same opcode,
    semantic attrs, result type and (recursively) operands."""
    if a is b:
        return True
    oa, ob = op_of(a), op_of(b)
    if oa is None or ob is None or oa.opcode != ob.opcode or a.type != b.type \
            or oa.regions or ob.regions or oa.opcode in ("load", "atomic", "philox"):
        return False
    if any(oa.attrs.get(k) != ob.attrs.get(k) for k in _SEMANTIC_ATTRS):
        return False
    return len(oa.operands) == len(ob.operands) and all(
        same(x, y) for x, y in zip(oa.operands, ob.operands))


def peel(v):
    """Through broadcasts and rank-changing reshapes of a value along one axis."""
    while True:
        o = op_of(v, "broadcast", "reshape", "convert_layout")
        if o is None:
            return v
        v = o.operands[0]


def axis_of(v, shape):
    """The one axis of `shape` along which v (a broadcast/reshape of a 1-D value) varies."""
    s = v.shape
    if len(s) != 2:
        return None
    if s[0] == shape[0] and s[1] == 1:
        return 0
    if s[0] == 1 and s[1] == shape[1]:
        return 1
    return None


def offset_terms(v, shape, out):
    """Split a [R, C] integer offset block into per-axis terms (axis, 1-D index, stride),
    stride an int or a scalar Value. False when it has another form."""
    o = op_of(v)
    if o is None:
        return False
    if o.opcode == "binary" and o.attrs["op"] == "add":
        return offset_terms(o.operands[0], shape, out) and offset_terms(o.operands[1], shape, out)
    if o.opcode in ("broadcast", "convert_layout") and o.operands[0].shape != v.shape:
        return offset_terms(o.operands[0], shape, out)
    if o.opcode == "convert_layout":
        return offset_terms(o.operands[0], shape, out)
    if o.opcode == "binary" and o.attrs["op"] == "mul":
        for x, y in (o.operands, o.operands[::-1]):
            sp = op_of(y, "splat")
            if sp is not None:
                inner = []
                if not offset_terms(x, shape, inner) or len(inner) != 1 or inner[0][2] != 1:
                    return False
                s = sp.operands[0]
                c = index_constant(s)
                out.append((inner[0][0], inner[0][1], c if c is not None else s))
                return True
        return False
    if o.opcode == "reshape" and len(o.operands[0].shape) == 1:
        ax = axis_of(v, shape)
        if ax is None:
            return False
        out.append((ax, o.operands[0], 1))
        return True
    return False


def ptr_terms(v, shape, out):
    """The scalar pointer P of `P + offsets + offsets ...` (through broadcasts), with the
    offsets' per-axis terms added to `out`; None for other forms."""
    o = op_of(v)
    if o is None:
        return None
    if o.opcode == "splat":
        return o.operands[0]
    if o.opcode in ("broadcast", "convert_layout"):
        return ptr_terms(o.operands[0], shape, out)
    if o.opcode == "addptr":
        if not offset_terms(o.operands[1], shape, out):
            return None
        return ptr_terms(o.operands[0], shape, out)
    return None


def arange_index(v):
    """(start, n, wrap, unwrapped) of a 1-D index `start + arange(0, n)` (start an int or a
    scalar Value), optionally `% splat(W)` or `where(i < splat(W), i, 0)` (wrap = W; unwrapped
    is the index before it), else None."""
    wrap = None
    m = binop_of(v, "mod")
    if m is not None:
        sp = op_of(m.operands[1], "splat")
        if sp is None:
            return None
        wrap, v = sp.operands[0], m.operands[0]
    else:
        clamped = _where_below(v)
        if clamped is not None:
            wrap, v = clamped
    o = op_of(v)
    if o is not None and o.opcode == "arange":
        return o.attrs["start"], o.attrs["end"] - o.attrs["start"], wrap, v
    a = binop_of(v, "add")
    if a is None:
        return None
    for x, y in (a.operands, a.operands[::-1]):
        ar, sp = op_of(x, "arange"), op_of(y, "splat")
        if ar is not None and sp is not None and ar.attrs["start"] == 0:
            return sp.operands[0], ar.attrs["end"], wrap, v
    return None


def _where_below(v):
    """(W, i) of `where(i < splat(W), i, 0)`, the other way to keep a tile's rows inside a
    tensor (Triton's persistent-matmul tutorial writes it): rows from W on read row 0 where
    `% W` reads row i - W; a pass that treats the rows past W as unknown takes either."""
    sel = op_of(v, "select")
    if sel is None:
        return None
    cond, x, y = sel.operands
    lt = binop_of(cond, "lt")
    zero = op_of(y, "splat")
    sp = op_of(lt.operands[1], "splat") if lt is not None else None
    if sp is None or index_constant(zero.operands[0] if zero is not None else y) != 0 \
            or not same(lt.operands[0], x):
        return None
    return sp.operands[0], x


def iv_affine(v, iv):
    """(rest, c) with v == rest + iv * c: rest a Value (None for 0), c an int; (v, 0) when no
    such split is seen (callers then require `rest` itself to be a known loop-invariant)."""
    if v is iv:
        return None, 1
    sp = op_of(v, "splat")
    if sp is not None:
        r = iv_affine(sp.operands[0], iv)
        if r[0] is None:
            return r
    m = binop_of(v, "mul")
    if m is not None:
        for x, y in (m.operands, m.operands[::-1]):
            if x is iv and index_constant(y) is not None:
                return None, index_constant(y)
    for name, sign in (("add", 1), ("sub", -1)):
        b = binop_of(v, name)
        if b is None:
            continue
        x, y = b.operands
        r = iv_affine(y, iv)
        if r is not None and r[0] is None:
            return x, sign * r[1]
        if name == "add":
            r = iv_affine(x, iv)
            if r is not None and r[0] is None:
                return y, r[1]
    return v, 0


def mask_terms(m, out):
    """The conjuncts of a mask block (through `&` and broadcasts)."""
    o = op_of(m)
    if o is not None and o.opcode == "binary" and o.attrs["op"] == "and":
        return mask_terms(o.operands[0], out) and mask_terms(o.operands[1], out)
    if o is not None and o.opcode in ("broadcast", "convert_layout") and \
            o.operands[0].shape != m.shape and op_of(o.operands[0], "binary") is not None \
            and op_of(o.operands[0]).attrs["op"] == "and":
        return mask_terms(o.operands[0], out)
    out.append(m)
    return True


def lt_term(t, shape):
    """(axis, 1-D left side, bound scalar) of a mask conjunct `left < bound` along one axis
    (`left[:, None] < bound`, `(left < bound)[None, :]`, through broadcasts), else None."""
    return _axis_compare(t, shape, "lt")


def ge0_term(t, shape):
    """(axis, 1-D left side) of a mask conjunct `left >= 0` along one axis (through
    broadcasts, as lt_term), else None: the lower bound a tensor descriptor's load checks
    where its offset may be negative."""
    got = _axis_compare(t, shape, "ge")
    if got is None or index_constant(got[2]) != 0:
        return None
    return got[0], got[1]


def _axis_compare(t, shape, cmp):
    v, ax = t, None
    while True:
        o = op_of(v)
        if o is None:
            return None
        if len(v.shape) == 2 and axis_of(v, shape) is not None:
            ax = axis_of(v, shape)
        if o.opcode not in ("broadcast", "convert_layout", "reshape"):
            break
        v = o.operands[0]
    lt = binop_of(v, cmp)
    if lt is None or ax is None:
        return None
    left, right = peel(lt.operands[0]), op_of(peel(lt.operands[1]), "splat")
    if right is None or len(left.shape) != 1:
        return None
    return ax, left, right.operands[0]


class NoMatch(Exception):
    """A value is not of the form a pass needs; the message says which fact is missing."""


def param_of(fn, v):
    for p in fn.params:
        if p.value is v:
            return p
    return None


def launch_value(fn, v, what):
    """A launch-time value: ("const", int) or ("param", index among the Python function's
    parameters) of a scalar the launcher can read from the call's arguments."""
    c = index_constant(v)
    if c is not None:
        return ("const", int(c))
    p = param_of(fn, v)
    if p is None or p.dtype not in (D.int32, D.int64):
        raise NoMatch(f"{what} is not a kernel parameter")
    return ("param", p.index, p.name)
