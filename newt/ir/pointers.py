"""Pointer and index analysis over the IR: static facts about blocks of pointers, offsets and
masks that the passes decide with (and codegen reads back where it prints an access).

Where it sits: in the IR, below the passes and codegen. Public names only:
  axis_stride(v, axis)       the constant element stride of a block along an axis
  uniform_along(mask, axis)  a mask the same at every index along an axis
  chunk_divisor(fn, v, ...)  a power of two dividing a tile's 16-byte chunk addresses
  int_constant(v)            the integer a value is, through splats and casts
  k_contiguous / b_tile_kmajor  the orientation of a dot's B tile
  split_ptr(ptr, body)       a loop pointer as loop-invariant block + scalar offset
  static_groups(...)         whether an access's vector groups are proven
and the index forms the TMA passes match (passes/dot_tma.py, ring_tma.py, store_tma.py):
  op_of / binop_of / index_constant / same / peel / axis_of
  offset_terms / ptr_terms   a [R, C] pointer block as P + per-axis (index, stride) terms
  arange_index(v)            start + arange(0, n) [% W]
  iv_affine(v, iv)           v == rest + iv * c
  mask_terms / lt_term       a mask's conjuncts, `index < bound` along one axis
  param_of / launch_value    a scalar the launcher reads from the call's arguments
  NoMatch                    raised with the missing fact when a form does not match
"""
from __future__ import annotations

from .. import dtypes as D
from .core import Op, is_block


def k_contiguous(ptr) -> bool:
    """A [K, N] pointer block (a dot's B) statically contiguous along K and not along N: its
    tile copies straight into a K-major ([N][K]) shared-memory tile."""
    return axis_stride(ptr, 0) == 1 and axis_stride(ptr, 1) != 1


def b_tile_kmajor(esize: int, b_ptr=None) -> bool:
    """Whether a dot's B tile is K-major ([N][K]) in shared memory, the one rule every path
    follows (tile copies, rings, TMA boxes, codegen): always for 4- and 1-byte inputs (wgmma
    reads them only K-major; ldmatrix.trans moves 16-bit elements only), and for 16-bit ones
    whose pointer block `b_ptr` is contiguous along K (x @ W.T: no transpose on the way)."""
    return esize != 2 or (b_ptr is not None and k_contiguous(b_ptr))


def axis_stride(v, axis):
    """The constant element stride of block `v` along `axis`, or None when unknown."""
    if not is_block(v.type):
        return 0
    op = v.owner
    if not isinstance(op, Op):
        return None
    c = op.opcode
    if c in ("splat", "constant"):
        return 0
    if c == "arange":
        return 1
    if c in ("broadcast", "convert_layout"):
        x = op.operands[0]
        if c == "broadcast" and x.shape[axis] == 1 and v.shape[axis] != 1:
            return 0
        return axis_stride(x, axis)
    if c == "reshape":
        x = op.operands[0]
        if v.shape[axis] == 1:
            return 0
        src = [i for i, d in enumerate(x.shape) if d != 1]
        dst = [i for i, d in enumerate(v.shape) if d != 1]
        if [x.shape[i] for i in src] != [v.shape[i] for i in dst]:
            return None
        return axis_stride(x, src[dst.index(axis)])
    if c == "cast" and v.dtype.is_int() and op.operands[0].dtype.is_int():
        return axis_stride(op.operands[0], axis)
    if c == "addptr" or (c == "binary" and op.attrs.get("op") in ("add", "sub")):
        s = [axis_stride(o, axis) for o in op.operands]
        if None in s:
            return None
        return s[0] - s[1] if op.attrs.get("op") == "sub" else s[0] + s[1]
    if c == "binary" and op.attrs.get("op") == "mul":
        s = [axis_stride(o, axis) for o in op.operands]
        if s == [0, 0]:
            return 0
        for k in (0, 1):
            if s[k] is not None and s[1 - k] == 0:
                c1 = int_constant(op.operands[1 - k])
                if c1 is not None:
                    return s[k] * c1
                if s[k] == 0:
                    return 0
        return None
    return None


def uniform_along(v, ax) -> bool:
    """Block `v` (a mask) has the same value at every index along axis `ax`: splats and
    constants, compares and and/or of values whose axis_stride along ax is 0, through
    broadcasts and reshapes."""
    if not is_block(v.type):
        return True
    op = v.owner
    if not isinstance(op, Op):
        return False
    c = op.opcode
    if c in ("splat", "constant"):
        return True
    if c in ("broadcast", "convert_layout"):
        x = op.operands[0]
        return (c == "broadcast" and x.shape[ax] == 1) or uniform_along(x, ax)
    if c == "reshape":
        x = op.operands[0]
        src = [i for i, d in enumerate(x.shape) if d != 1]
        dst = [i for i, d in enumerate(v.shape) if d != 1]
        if ax not in dst:
            return True
        if [x.shape[i] for i in src] != [v.shape[i] for i in dst]:
            return False
        return uniform_along(x, src[dst.index(ax)])
    k = op.attrs.get("op") if c == "binary" else None
    if k in ("and", "or"):
        return all(uniform_along(o, ax) for o in op.operands)
    if k in ("lt", "le", "gt", "ge", "eq", "ne"):
        return all(o.dtype.is_int() and axis_stride(o, ax) == 0 for o in op.operands)
    return False


_BIG = 1 << 20


def _pow2(n: int) -> int:
    """The largest power of two dividing n (capped; 0 is divisible by anything)."""
    n = abs(int(n))
    return _BIG if n == 0 else min(n & -n, _BIG)


def chunk_divisor(fn, v, cax, epc):
    """A power of two dividing the value of block `v` at every element whose index along axis
    `cax` is a multiple of `epc`: in bytes for pointers, else in units. The address of a
    16-byte chunk of a tile is 16-byte aligned, with no run-time test, when this is >= 16 for
    the tile's pointer block (cax its contiguous axis, epc the elements per chunk).

    Known facts: a pointer parameter specialized as 16-byte aligned, an integer parameter
    specialized as divisible by 16, constants, `multiple_of` hints, a loop's induction variable
    (lb + k * step), arange along cax (0, epc, 2 * epc, ...); sums keep the smaller divisor,
    products multiply them. Anything else divides by 1 (a pointer: by its element size)."""
    params = {p.value.id: p for p in fn.params}
    ivs = {op.regions[0].args[0].id: op for op in fn.walk() if op.opcode == "for"}
    memo = {}

    def scalar(v):
        if v.id in memo:
            return memo[v.id]
        memo[v.id] = 1                      # (cycles through carried values: unknown)
        hint = v.attrs.get("multiple_of")
        d = _pow2(hint) if isinstance(hint, int) else 1
        d = max(d, _scalar_op(v))
        memo[v.id] = d
        return d

    def _scalar_op(v):
        p = params.get(v.id)
        if p is not None:
            if v.dtype.is_ptr():
                return 16 if p.divisible_by_16 else v.dtype.element_ty.bits // 8
            return 16 if p.divisible_by_16 else 1
        if v.id in ivs:
            lb, _, step = ivs[v.id].operands[:3]
            return min(scalar(lb), scalar(step))
        return combine(v, scalar, scalar)

    def combine(v, left, right):
        op = v.owner
        if not isinstance(op, Op):
            return 1
        c = op.opcode
        if c == "constant":
            val = op.attrs.get("value")
            return _pow2(val) if isinstance(val, int) and not isinstance(val, bool) else 1
        if c == "cast" and v.dtype.is_int() and op.operands[0].dtype.is_int():
            return left(op.operands[0])
        if c == "addptr":
            es = v.dtype.element_ty.bits // 8
            return min(left(op.operands[0]), right(op.operands[1]) * es)
        if c == "binary" and op.attrs.get("op") in ("add", "sub"):
            return min(left(op.operands[0]), right(op.operands[1]))
        if c == "binary" and op.attrs.get("op") == "mul":
            return min(left(op.operands[0]) * right(op.operands[1]), _BIG)
        return 1

    def block(v, ax):
        if not is_block(v.type):
            return scalar(v)
        op = v.owner
        if not isinstance(op, Op):
            return 1
        c = op.opcode
        if c == "splat":
            return scalar(op.operands[0])
        if c == "arange":
            return min(_pow2(op.attrs["start"]), epc) if ax == 0 else 1
        if c in ("broadcast", "convert_layout"):
            return block(op.operands[0], ax)
        if c == "reshape":
            x = op.operands[0]
            src = [i for i, d in enumerate(x.shape) if d != 1]
            dst = [i for i, d in enumerate(v.shape) if d != 1]
            if [x.shape[i] for i in src] != [v.shape[i] for i in dst]:
                return 1
            return block(x, src[dst.index(ax)] if ax in dst else None)
        return combine(v, lambda o: block(o, ax), lambda o: block(o, ax))

    return block(v, cax)


def int_constant(v):
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("splat", "broadcast", "cast", "reshape",
                                               "convert_layout"):
        op = op.operands[0].owner
    if isinstance(op, Op) and op.opcode == "constant" and isinstance(op.attrs.get("value"), int):
        return op.attrs["value"]
    return None


def split_ptr(ptr, body):
    """(I, o) when ptr = I + splat(o) with I defined outside the loop body (the form the
    pipeline pass gives strength-reduced pointers), else None."""
    op = ptr.owner
    if not (isinstance(op, Op) and op.opcode == "addptr"):
        return None
    base, off = op.operands
    sp = off.owner
    if not (isinstance(sp, Op) and sp.opcode == "splat" and is_block(base.type)
            and isinstance(base.owner, Op) and base.owner.parent is not body
            and base.attrs.get("layout") == ptr.attrs.get("layout")):
        return None
    return base, sp.operands[0]


def static_groups(ptr, mask, vec, width, size) -> bool:
    """Whether every group is known, from the layout pass's run facts, to be consecutive,
    aligned to the access width and under one mask bit: then a group can be one predicated
    vector access and needs neither a run-time test nor the scalar path (Triton's case when
    pointers and sizes are specialized as divisible by 16)."""
    c, d = ptr.attrs.get("contig", 1), ptr.attrs.get("div", 1)
    if c < vec:
        return False
    align = d if c <= vec else min(d, vec * size)     # at a group's first element
    return align >= width and (mask is None or mask.attrs.get("const", 1) >= vec)


# ----------------------------------------------------------------------------- index forms

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
    scalar Value), optionally `% splat(W)` (wrap = W; unwrapped is the index before it), else
    None."""
    wrap = None
    m = binop_of(v, "mod")
    if m is not None:
        sp = op_of(m.operands[1], "splat")
        if sp is None:
            return None
        wrap, v = sp.operands[0], m.operands[0]
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
    lt = binop_of(v, "lt")
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
