"""Dot tile loads: a `load` whose only user is a synchronous tensor-core `dot` copies straight
into the dot's shared-memory tile, without registers.

Where it sits: called by the dot-rows pass (dot_rows.py, after the layout pass). Consumes a
dot with a plan on the "mma" engine and no cp.async ring (dot_pipeline.py handles loops whose
accumulator is carried; attention's dots are not); rewrites

    v = load(ptr, mask, other=0)          ->   dot_tile_load(ptr, mask)  {tile=TileRef}
    dot(v, ...) / dot(..., v, ...)              dot(...)                   {a_src/b_src="loaded"}

when the load sits in the dot's block, the dot is its only user, `other` is absent or zero and
the pointer and mask are index-computable (any thread can compute any address, so each 16-byte
chunk of the tile is addressed from index math where it is copied: no pointer arrays).

Orientation of B (16-bit): the tile is MN-major ([K][N], ldmatrix.trans / transposed wgmma B)
unless the pointer block is statically contiguous along K (axis 0) and not along N, as for
attention's K^T loaded through swapped strides; then it is K-major ([N][K], ldmatrix without
.trans / wgmma's default B) so that the copies are 16-byte cp.async along memory (dot attr
"b_kmajor"). `axis_stride` is the static analysis: the element stride of an index-computable
block along one axis when it is a compile-time constant (a stride specialized as 1 is one).
"""
from __future__ import annotations

from ..ir.core import Op, is_block


class TileRef:
    """Which tile of which dot a dot_tile_load fills (shown as `a-tile` / `b-tile`)."""

    def __init__(self, dot, role):
        self.dot, self.role = dot, role

    def __str__(self):
        return f"{self.role}-tile"


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
                c1 = _const(op.operands[1 - k])
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


def _const(v):
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("splat", "broadcast", "cast", "reshape",
                                               "convert_layout"):
        op = op.operands[0].owner
    if isinstance(op, Op) and op.opcode == "constant" and isinstance(op.attrs.get("value"), int):
        return op.attrs["value"]
    return None


def _zero(v) -> bool:
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("splat", "broadcast", "cast", "convert_layout"):
        op = op.operands[0].owner
    return isinstance(op, Op) and op.opcode == "constant" and op.attrs["value"] == 0


def plan_tile_loads(fn, options):
    uses = fn.uses()
    for dot in list(fn.walk()):
        if dot.opcode != "dot" or dot.attrs.get("ring") is not None:
            continue
        plan = dot.attrs.get("dot_plan")
        if plan is None or plan.engine != "mma":
            continue
        for role, idx in (("a", 0), ("b", 1)):
            if role == "a" and dot.attrs.get("a_src"):
                continue
            v = dot.operands[idx]
            ld = v.owner
            if not (isinstance(ld, Op) and ld.opcode == "load" and ld.parent is dot.parent
                    and [u for u in uses.get(v.id, [])] == [dot] and not ld.attrs.get("volatile")):
                continue
            ptr = ld.operands[0]
            mask = ld.operands[1] if ld.attrs.get("has_mask") else None
            if ld.attrs.get("has_other") and not _zero(ld.operands[-1]):
                continue
            if not ptr.attrs.get("icomp") or (mask is not None and not mask.attrs.get("icomp")):
                continue
            if idx == 0 and (dot.operands[0] is dot.operands[1]):
                continue
            ld.opcode = "dot_tile_load"
            ld.attrs["tile"] = TileRef(dot, role)
            dot.attrs[f"{role}_src"] = "loaded"
            if role == "b" and b_tile_kmajor(plan.esize, ptr):
                dot.attrs["b_kmajor"] = True
    return fn


# ----------------------------------------------------------------------------- prefetch

def _inside(op, block) -> bool:
    b = op.parent
    while b is not None:
        if b is block:
            return True
        p = b.parent
        b = p.parent if isinstance(p, Op) else None
    return False


def _leaves_outside(v, body, iv, seen=None, hoist=None) -> bool:
    """Every scalar the index math of `v` reads is the loop's induction variable, defined
    outside the loop body, or computed in the body from such scalars only (`base + pid *
    stride` written inside the loop, as deuteron does): those ops are collected in `hoist`, to
    be moved before the loop. Then the copy can be issued for another iteration, anywhere."""
    seen = set() if seen is None else seen
    if v.id in seen:
        return True
    seen.add(v.id)
    if v is iv:
        return True
    op = v.owner
    if not isinstance(op, Op):
        return not is_block(v.type) and not any(v is a for a in body.args)
    if not is_block(v.type):
        if not _inside(op, body):
            return True
        if hoist is None or op.parent is not body or op.opcode not in _PURE_SCALAR:
            return False
        if not all(_leaves_outside(o, body, None, seen, hoist) for o in op.operands):
            return False
        hoist.append(op)
        return True
    return all(_leaves_outside(o, body, iv, seen, hoist) for o in op.operands)


_PURE_SCALAR = ("binary", "addptr", "cast", "constant")


def _hoist_before(ops, loop):
    """Move loop-invariant scalar ops (collected by _leaves_outside, operands first) from the
    loop body to just before the loop, in body order."""
    body = loop.regions[0]
    ops = sorted(set(ops), key=body.ops.index)
    for op in ops:
        body.ops.remove(op)
        _insert(op, loop, 0)


def plan_prefetch(fn, options):
    """Two tile loads in a loop body feeding two dots in turn (attention's K then V) become a
    ring of R = max(2, num_stages) buffers per tile, iteration i in buffer i % R, the copies
    running `ahead` iterations in front of the dots:

        before the loop   dot_tile_prefetch: barrier; per iteration t < ahead: copy both tiles
                          of iteration t (if it exists); commit
        loads             (nothing: copied by an earlier iteration or the prologue)
        first dot         cp.async.wait_group ahead-1 (both tiles of this iteration landed);
                          barrier; issue the mma; copy both tiles of iteration i + ahead (if it
                          exists) while it runs; commit; wait for the mma
        second dot        the mma on this iteration's buffer: no wait, no barrier

    One barrier per iteration. It makes this iteration's tiles visible to every warp, and
    guarantees that buffer (i + ahead) % R is free: its previous tiles, iteration i + ahead - R,
    were read by dots every warp has finished. With wgmma the second dot is left in flight
    (attrs "wg_defer" = the carried value it accumulates into, in place: _carried_result):
    the first dot's wait of the next iteration completes it (wgmma groups complete in order),
    and a dot_async_wait after the loop drains the last one; the mma of iteration i - 1 may
    then still read its buffer, so ahead = R - 2 (R >= 3). Without the deferral ahead = R - 1.

    Late copies (the deferral without rotation, an accumulator under 64 registers per thread:
    attention at HEAD_DIM 64): the first dot waits for its mma, which retires the second dot
    of i - 1 as well, then a second barrier, then the copies of iteration i + ahead with
    ahead = R - 1: every warp is past the second dot of i - 1, so its buffer is free, and the
    copies get one more iteration to land. Triton orders its pipelined loop this way too.
    H200, 3 stages, seven interleaved rounds: D=64 406 -> 409 TFLOP/s, causal 362 -> 368
    (Triton 420 / 372). Not with a large accumulator: there one CTA fills the SM and nothing
    covers the second barrier (D=128 causal, 3 stages: 420 -> 394).

    Rotation (R >= 4 with the deferral, ahead = R - 2 >= 2; wgmma; the first dot's A staged
    before the loop and its accumulator zero, as attention's Q K^T): the first dot runs one
    iteration ahead, so that the tensor cores compute it while the warps do the softmax of
    the current one. It costs a second array of scores in registers, so it is only done when
    the carried accumulator holds 64+ registers per thread (HEAD_DIM 128 on two warpgroups):
    such a kernel runs one CTA per SM anyway, and nothing else overlaps its softmax. (H200,
    attention D=128, num_stages=4: 437 TFLOP/s rotated against 407; at D=64 the extra array
    costs the second CTA per SM: 323 against 396.) Its result is carried in a register
    array S:

        before the loop   ... ; wait for iteration 0's tiles; barrier; S = first dot (0)
        first dot         wait_group ahead-2 (the tiles of i + 1 landed); barrier; issue
                          S' = first dot (i + 1) if it exists, left in flight; copy the tiles
                          of i + ahead; the dot's result is S
        dot_async_wait    (before the first read of the carried accumulator) wait_group 0:
                          retires the second dot of i - 1 and S'
        second dot        issue, left in flight; S = S'

    Buffers in use when the copies of i + ahead are issued: i - 1 (the second dot of i - 1
    may be in flight), i, i + 1 ... i + ahead - 1: ahead + 2 <= R.

    attrs: loads "prefetch" = "ahead", "iv_slope" (iv_slope: the pointer moves uniformly with
    the induction variable, so codegen advances per-chunk pointers); both dots "tile_ring" = R
    and "live" = the prefetch op
    to the loop (their tiles are in use across the whole loop); first dot "cp_wait" = ahead - 1
    (ahead - 2 rotated), "ring_issue" = the two loads, "rotate" or "late_copies"; second dot
    "ring_ready",
    "rotate_from" = the first dot; prefetch op "ahead"; dot_async_wait "next" = the loop
    inside it."""
    from .dot import uses_wgmma
    for loop in [op for op in fn.walk() if op.opcode == "for"]:
        body = loop.regions[0]
        iv = body.args[0]
        loads = [op for op in body.ops if op.opcode == "dot_tile_load"]
        if len(loads) != 2:
            continue
        dots = [ld.attrs["tile"].dot for ld in loads]
        if dots[0] is dots[1] or any(d.parent is not body for d in dots):
            continue
        if loads[1].attrs["tile"].role != "b":
            continue
        idx = body.ops.index
        if not idx(loads[0]) < idx(dots[0]) < idx(loads[1]) < idx(dots[1]):
            continue
        addr = [ld.operands[0] for ld in loads] + \
            [ld.operands[1] for ld in loads if ld.attrs.get("has_mask")]
        hoist = []
        if not all(_leaves_outside(v, body, iv, hoist=hoist) for v in addr):
            continue
        _hoist_before(hoist, loop)
        R = max(2, loop.attrs.get("num_stages") or options.num_stages)
        uses = fn.uses()
        carried = _carried_result(dots, body, uses)
        defer = R >= 3 and carried is not None and uses_wgmma(
            options.arch, options.num_threads, dots[1].attrs["dot_plan"],
            dots[1].attrs.get("a_src"))
        ahead = R - 1 - defer
        rotate = defer and ahead >= 2 and _rotatable(dots[0], body, uses, options) \
            and carried.attrs["layout"].nslots >= 64
        # deferred, not rotated, a small accumulator (two CTAs per SM): the copies wait for
        # the first dot's mma and a barrier, which free the buffer of i - 1, and so run one
        # more iteration ahead
        late = defer and not rotate and carried.attrs["layout"].nslots < 64
        if late:
            ahead = R - 1
        pre = Op("dot_tile_prefetch", [], [], {"loads": _Ref(loads), "loop": _Ref(loop),
                                               "ahead": ahead}, (), loop.loc)
        _insert(pre, loop, 0)
        for ld in loads:
            ld.attrs["prefetch"] = "ahead"
            sl = iv_slope(ld.operands[0], iv, body)
            if sl:                          # (0: the same tile every iteration: keep as is)
                ld.attrs["iv_slope"] = _Ref(sl)
        dots[0].attrs["cp_wait"] = ahead - 1
        dots[0].attrs["ring_issue"] = _Ref(loads)
        if late:
            dots[0].attrs["late_copies"] = True
        dots[1].attrs["ring_ready"] = True
        for d in dots:
            d.attrs["tile_ring"] = R
            d.attrs["live"] = _Ref((pre, loop))
        if defer:
            dots[1].attrs["wg_defer"] = _Ref(carried)
            _insert(Op("dot_async_wait", [], [], {}, (), loop.loc), loop, 1)
        if rotate:
            uses = fn.uses()
            dots[0].attrs["rotate"] = True
            dots[0].attrs["cp_wait"] = ahead - 2
            dots[1].attrs["rotate_from"] = _Ref(dots[0])
            first = min(idx(u) for u in uses[carried.id])
            w = Op("dot_async_wait", [], [], {"next": _Ref(loop)}, (), loop.loc)
            w.parent = body
            body.ops.insert(first, w)


def _rotatable(dot, body, uses, options):
    """The first dot can run one iteration ahead (plan_prefetch's rotation): wgmma, A a tile
    staged before the loop, a zero accumulator, its result read only inside the body."""
    from .dot import uses_wgmma
    return uses_wgmma(options.arch, options.num_threads, dot.attrs["dot_plan"]) \
        and dot.attrs.get("a_src") == "staged" and _zero(dot.operands[2]) \
        and all(_inside(u, body) and u.opcode != "yield" for u in uses.get(dot.result.id, []))


def iv_slope(v, iv, body):
    """How the pointer (or integer) block `v` moves per unit of the loop's induction variable
    `iv`, the same for every element: (scalar Value or None, int c) meaning c * scalar (c
    alone when None), 0 when v does not depend on iv; None when the step is not uniform or not
    provable (a wrap, a product of two iv-dependent terms, a sum of two symbolic slopes).
    Lets the copies of a tile ring advance one pointer per 16-byte chunk by a constant delta
    per iteration instead of recomputing the address from the index math."""
    memo = {}

    def dep(x):
        if x.id in memo:
            return memo[x.id]
        memo[x.id] = False
        op = x.owner
        d = x is iv or (isinstance(op, Op) and _inside(op, body)
                        and any(dep(o) for o in op.operands))
        memo[x.id] = d
        return d

    def slope(x):
        if not dep(x):
            return 0
        if x is iv:
            return (None, 1)
        op = x.owner
        c = op.opcode
        if c in ("splat", "broadcast", "reshape", "convert_layout") or \
                (c == "cast" and x.dtype.is_int() and op.operands[0].dtype.is_int()):
            return slope(op.operands[0])
        k = op.attrs.get("op") if c == "binary" else None
        if c == "addptr" or k in ("add", "sub"):
            a, b = slope(op.operands[0]), slope(op.operands[1])
            if a is None or b is None or (a and b):
                return None
            if k == "sub" and b:
                return (b[0], -b[1])
            return a or b
        if k == "mul":
            for i in (0, 1):
                sa, o = slope(op.operands[i]), op.operands[1 - i]
                if sa and not dep(o):
                    w = _const(o)
                    if w is not None:
                        return (sa[0], sa[1] * w)
                    u = _scalar_of(o)
                    if u is not None and sa[0] is None:
                        return (u, sa[1])
            return None
        return None

    return slope(v)


def _scalar_of(v):
    """The scalar a block is a splat of (through shape ops), or v itself for a scalar."""
    while is_block(v.type):
        op = v.owner
        if not isinstance(op, Op) or op.opcode not in ("splat", "broadcast", "reshape",
                                                      "convert_layout"):
            return None
        v = op.operands[0]
    return v


def _carried_result(dots, body, uses):
    """The loop-carried value the second dot's result becomes, when the dot can accumulate
    into that value's variable in place while it is in flight: the result is only yielded
    (once), in the accumulator's layout, and every read of the carried value sits in the body
    between the two dots (after the first dot's wait has retired the previous iteration's
    mma, before this iteration's is issued). Else None."""
    r = dots[1].result
    y = body.ops[-1]
    if y.opcode != "yield" or uses.get(r.id) != [y] or \
            sum(o is r for o in y.operands) != 1:
        return None
    carried = body.args[1 + [o is r for o in y.operands].index(True)]
    if carried.attrs.get("layout") != r.attrs.get("layout"):
        return None
    lo, hi = body.ops.index(dots[0]), body.ops.index(dots[1])
    for u in uses.get(carried.id, []):
        if u.parent is not body or not lo < body.ops.index(u) < hi:
            return None
    return carried


def _insert(op, loop, after):
    """Put `op` just before (after=0) or just after (after=1) `loop` in its block."""
    op.parent = loop.parent
    ops = loop.parent.ops
    ops.insert(ops.index(loop) + after, op)


class _Ref:
    """An IR reference kept in attrs without printing the referenced op."""

    def __init__(self, x):
        self.x = x

    def __str__(self):
        return "ref"
