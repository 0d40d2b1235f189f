"""The accumulator's epilogue in the fragment layout (after the layout pass and dot_rows.py):

    acc_between_loops  an accumulator passed from one loop to the next stays in the fragment
    row_scale          `acc / l_i[:, None]` (and * + - by a row vector) in the fragment
    frag_cast          the epilogue's elementwise ops up to the 16- or 8-bit cast in the fragment
    recompute_index    fragment index math inside loops recomputed, not hoisted; mma.sync
                       k-steps kept rolled next to 128+ carried accumulator registers

Each is one entry of PASSES (newt/passes/__init__.py); the items they cite are those of
dot_rows.py's module docstring.
"""
from __future__ import annotations

from ...ir.core import Op
from ...ir.layouts import AccLayout, AccRowLayout


def keep_acc_between_loops(fn, options=None):
    """A loop's accumulator that only feeds another loop (causal attention's two key loops)
    leaves the fragment layout through dot_acc_out and comes back through convert_layout:
    both go, the next loop starts from the fragment itself."""
    uses = fn.uses()
    for out in [op for op in fn.walk() if op.opcode == "dot_acc_out"]:
        x = out.operands[0]
        lay = x.attrs.get("layout")
        backs = [u for u in uses.get(out.result.id, []) if u.opcode == "convert_layout"
                 and u.result.attrs.get("layout") == lay]
        for cv in backs:
            for u in uses.get(cv.result.id, []):
                u.operands = [x if o is cv.result else o for o in u.operands]
            cv.parent.ops.remove(cv)
        if backs and len(backs) == len(uses.get(out.result.id, [])):
            out.parent.ops.remove(out)
    return fn


def _single_readers(fn):
    """(dot_acc_out, its operand, the fragment layout, the one op reading its result, uses) for
    each accumulator leaving a fragment (AccLayout) with exactly one reader in the same block."""
    uses = fn.uses()
    for out in [op for op in fn.walk() if op.opcode == "dot_acc_out"]:
        x = out.operands[0]
        lay = x.attrs.get("layout")
        us = uses.get(out.result.id, [])
        if isinstance(lay, AccLayout) and len(us) == 1 and us[0].parent is out.parent:
            yield out, x, lay, us[0], uses


def _leave_after(out, u, lay, uses):
    """`u` (already rewired to read the fragment) runs in the fragment layout, and the
    accumulator leaves the fragment after it: dot_acc_out moves behind u and takes its place."""
    u.result.attrs["layout"] = lay
    block = out.parent
    block.ops.remove(out)
    block.ops.insert(block.ops.index(u) + 1, out)
    for w in uses.get(u.result.id, []):
        w.operands = [out.result if o is u.result else o for o in w.operands]
    out.operands = [u.result]
    out.result.type = u.result.type
    out.result.name = u.result.name


def scale_in_fragment(fn, options=None):
    """7. The epilogue's `acc / l_i[:, None]` (attention's normalisation; also `*`, `+`, `-` by
    a row vector held in AccRowLayout) happens in the fragment, before the accumulator leaves
    it: the row vector is read from the thread's own rows (dot_row_bcast) and dot_acc_out moves
    after the op. Otherwise the row vector goes through shared memory, is broadcast to every
    element of the group-cyclic tile, and the tile, its divisor and the quotient are all alive
    at once (64 + 64 + 64 registers at a 64 x 128 tile on 4 warps: the whole kernel's peak)."""
    for out, x, lay, u, uses in _single_readers(fn):
        if u.opcode != "binary" or u.attrs.get("op") not in ("mul", "div", "add", "sub") \
                or u.result.dtype != x.dtype:
            continue
        i = 0 if u.operands[0] is out.result else 1
        b = u.operands[1 - i]
        bc = b.owner
        if not (isinstance(bc, Op) and bc.opcode == "broadcast" and len(uses.get(b.id, [])) == 1
                and tuple(b.shape) == (lay.M, lay.N)):
            continue
        c = bc.operands[0]
        cv = c.owner
        row = c
        if isinstance(cv, Op) and cv.opcode == "convert_layout" and len(uses.get(c.id, [])) == 1:
            row = cv.operands[0]
        if not (isinstance(row.attrs.get("layout"), AccRowLayout) and row.attrs["layout"].M ==
                lay.M and tuple(row.shape) == (lay.M, 1) and lay.C == 1):
            continue
        bc.opcode = "dot_row_bcast"                 # the row, read from the thread's own rows
        bc.operands = [row]
        bc.attrs.pop("movement", None)
        b.attrs["layout"] = lay
        if row is not c:
            cv.parent.ops.remove(cv)
        u.operands[i] = x                           # the op on the fragment itself
        _leave_after(out, u, lay, uses)
    return fn


_ELEMENTWISE = ("binary", "unary", "select", "cast", "fma")
# the casts an epilogue may end in: the tile leaves the fragment as pairs of 16- or 8-bit floats
NARROW_FLOATS = ("float16", "bfloat16", "float8e4nv", "float8e5")


def _epilogue_ops(out, x, lay, uses):
    """(the ops computing from out's result, the one whose result leaves them) when all of them
    are elementwise ops of the tile's shape in out's block, their other operands uniform, and
    the one leaving is a cast to a 16- or 8-bit float; else None."""
    inside, ops, todo = {out.result.id}, [], [out.result]
    while todo:
        for u in uses.get(todo.pop().id, []):
            if len(u.results) == 1 and u.result.id in inside:
                continue
            if u.parent is not out.parent or u.opcode not in _ELEMENTWISE or u.regions \
                    or u.attrs.get("bitcast") or tuple(u.result.shape) != (lay.M, lay.N):
                continue            # a use outside the epilogue: its value is `leaving`
            inside.add(u.result.id)
            ops.append(u)
            todo.append(u.result)
    if any(not (o.id in inside or _uniform(o)) for u in ops for o in u.operands):
        return None
    leaving = [u for u in ops if any(len(w.results) != 1 or w.result.id not in inside
                                     for w in uses.get(u.result.id, []))]
    if any(len(w.results) != 1 or w.result.id not in inside
           for w in uses.get(out.result.id, [])):
        return None                 # the fp32 accumulator itself is read elsewhere too
    if len(leaving) != 1 or leaving[0].opcode != "cast" \
            or leaving[0].result.dtype.name not in NARROW_FLOATS:
        return None
    return ops, leaving[0]


def cast_in_fragment(fn, options=None):
    """8. The epilogue's elementwise ops on the accumulator, up to its cast to a 16- or 8-bit
    float (the tutorial's `leaky_relu`, then `accumulator.to(fp16)`), happen in the fragment,
    on each thread's own elements, before the accumulator leaves it: the move through shared
    memory (dot_acc_out) then carries 2 (1) bytes per element instead of 4, as in the
    standalone kernels and Triton's epilogue, and the tile can leave by TMA boxes
    (store_tma.py)."""
    uses = fn.uses()
    for out in [op for op in fn.walk() if op.opcode == "dot_acc_out"]:
        x = out.operands[0]
        lay = x.attrs.get("layout")
        if not isinstance(lay, AccLayout):
            continue
        got = _epilogue_ops(out, x, lay, uses)
        if got is None:
            continue
        ops, cast = got
        for u in ops:
            u.operands = [x if o is out.result else o for o in u.operands]
            if u is not cast:
                u.result.attrs["layout"] = lay
        _leave_after(out, cast, lay, uses)
        # dot_acc_out stages a narrow value as pairs of it, converting (rounding) each
        # element there: the cast itself needs no code. (Rounded here and converted there, the
        # fp16 epilogue made ptxas serialize every wgmma of the kernel, C7514.)
        cast.attrs["rounded_by_user"] = True
        uses = fn.uses()
    return fn


def _in_loop(op):
    b = op.parent
    while b is not None and isinstance(b.parent, Op):
        if b.parent.opcode in ("for", "while"):
            return True
        b = b.parent.parent
    return False


def recompute_index(fn, options=None):
    """6. Inside loops, fragment-layout index math and the synchronous dots' fragment
    addresses are recomputed each iteration rather than hoisted (codegen: dot.opaque_thread):
    a causal mask in AccLayout is one loop-invariant value per slot, 64 registers at a
    128 x 64 tile on 4 warps."""
    for op in fn.walk():
        if not _in_loop(op):
            continue
        if op.opcode == "convert_layout" and op.attrs.get("movement") == "recompute" \
                and isinstance(op.result.attrs.get("layout"), AccLayout) \
                and len(op.result.shape) == 2 and not _uniform(op.operands[0]):
            op.opcode = "dot_frag_icomp"
        elif op.opcode in ("dot", "dot_tile_load") and op.attrs.get("ring") is None:
            op.attrs["recompute_index"] = True
            if op.opcode == "dot" and _carried_acc_slots(op) >= _ROLL_SLOTS:
                op.attrs["ksteps_rolled"] = True
    return fn


# Unrolled, mma.sync's k-steps let ptxas load the fragments of later steps early: a register
# each, next to every accumulator the loop carries. At 128 accumulator registers per thread
# (one 128 x 256 tile on 8 warps, or attention backward's dK and dV at D = 128) that spills;
# with the k-step loop kept rolled nothing does. codegen/tc/mma.py reads attrs["ksteps_rolled"].
_ROLL_SLOTS = 128


def _carried_acc_slots(op):
    """Registers per thread of the dot accumulators (AccLayout values) that the innermost loop
    around `op` carries."""
    b = op.parent
    while b is not None and isinstance(b.parent, Op) and b.parent.opcode not in ("for", "while"):
        b = b.parent.parent
    if b is None or not isinstance(b.parent, Op):
        return 0
    return sum(a.attrs["layout"].nslots for r in b.parent.regions for a in r.args
               if isinstance(a.attrs.get("layout"), AccLayout))


def _uniform(v):
    op = v.owner
    while isinstance(op, Op) and op.opcode in ("broadcast", "reshape", "convert_layout"):
        op = op.operands[0].owner
    return not isinstance(op, Op) or op.opcode in ("splat", "constant")
