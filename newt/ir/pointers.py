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
The index forms the TMA passes match are in index_forms.py, beside this file.
"""
from __future__ import annotations

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
