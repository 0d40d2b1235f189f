"""Canonical matmul loops: the ways people write a dot loop brought to the one form the ring
planner reads.

Where it sits: the `fuse_acc` and `carry_pointers` entries of PASSES (newt/passes/__init__.py),
after the core `masks` pass and before `reduce_pointers` / `dot_ring` (tc/dot_pipeline.py), and
`ring_why` right after `dot_ring`. The first two rewrite IR; the decisions that follow (ring,
TMA) are then those of the canonical spelling, and so is the generated code.

1. `fuse_acc`: in a loop body, `acc + dot(a, b)` (either order; `acc += nl.dot(a, b)` and
   `acc = acc + nl.dot(a, b)` both build it) where `acc` is a loop-carried fp32 / int32 value of
   the dot's type and the dot's own accumulator is a zero block becomes `dot(a, b, acc)`, as
   Triton combines them: the same products summed, the running sum entering the tensor core's
   additions instead of one addition after them (int32: the same bits; fp32: the same up to
   rounding order). The dot's result takes the add's name. A dot of two fp8 blocks gets
   attrs["fp8_promote"]: where 8-bit wgmma runs it, the tensor cores sum fp8 products with
   less than fp32 precision, so codegen keeps the spelled form's precision (each k-step's sum
   made apart, then added to acc in fp32) while the ring takes the fused form; Triton's
   combine leaves such dots unfused for the same reason. `dot(a, b, acc)` as written keeps the
   tensor cores' accumulation (nl.dot's docstring).
2. `carry_pointers`: an operand of a dot the ring can take (both operands loaded in the loop,
   the accumulator carried from dot to dot) whose pointer block is recomputed from the
   induction variable k each step, `P(k) = base + (k * C + arange)[..] * stride + ...` (affine
   in k with a step uniform over the block: the forms people write, and what tensor descriptors
   lower to), becomes the tutorial's incremented pointer: a carried block starting at P(lower
   bound), advanced by `step * dP/dk` (a loop-invariant scalar) per iteration. reduce_pointers
   then turns it into the carried scalar offset the ring and TMA planners read. The load's mask
   conjuncts `idx(k) < B` are rebased to `idx(0) < B - k * c` (the tutorial's `offs_k < K - k *
   BK`), idx(0) being the pointer's own copy of the index, so that the TMA planner sees the mask
   bound the loaded index. A pointer that depends on k in another way keeps its form, with the
   reason in the load's attrs["canon_why"] (printed IR). Other loops holding dots (attention's)
   keep their loads for the passes made for them (tc/dot_loads.py, tc/ring_tma.py). First, the
   integer scalars such a loop carries by a constant step per iteration (a block pointer's
   offsets under `nl.advance`) are read as what they are, affine in k (`_fold_inductions`):
   a block-pointer matmul then has the pointer form's P(k).
3. `ring_why`: a loop's dot that dot_ring left without a ring says which fact it lacks, in
   attrs["ring_why"].
"""
from __future__ import annotations

from ... import dtypes as D
from ...ir.core import BlockType, Op, ScalarType, Value, is_block
from ...ir.index_forms import NoMatch, index_constant, op_of
from ..masks import remove_dead


def _dot_loops(fn):
    return [op for op in fn.walk() if op.opcode == "for"
            and any(o.opcode == "dot" for o in op.regions[0].ops)]


def _is_zero(v) -> bool:
    o = op_of(v)
    while o is not None and o.opcode in ("splat", "broadcast", "cast", "convert_layout"):
        o = op_of(o.operands[0])
    return o is not None and o.opcode == "constant" and o.attrs.get("value") == 0


# ----------------------------------------------------------------------------- 1. fused acc
def _fuse_loop(loop) -> bool:
    body = loop.regions[0]
    carried = body.args[1:]
    changed = False
    for add in [o for o in body.ops if o.opcode == "binary" and o.attrs.get("op") == "add"]:
        uses = body.uses()
        for acc, d in (add.operands, add.operands[::-1]):
            dot = op_of(d, "dot")
            if dot is None or dot.parent is not body or not any(acc is c for c in carried):
                continue
            if not (acc.type == d.type == add.result.type and d.dtype in (D.float32, D.int32)
                    and _is_zero(dot.operands[2])
                    and uses.get(d.id, []) == [add]):
                continue
            dot.operands[2] = acc
            if all(v.dtype.is_fp8() for v in dot.operands[:2]):
                dot.attrs["fp8_promote"] = True
            if add.result.name:
                d.name = add.result.name
            for op in body.walk():
                op.operands = [d if o is add.result else o for o in op.operands]
            body.ops.remove(add)
            changed = True
            break
    return changed


def fuse_acc(fn, options):
    """1. `acc + dot(a, b)` of a carried acc -> `dot(a, b, acc)`."""
    for loop in _dot_loops(fn):
        if _fuse_loop(loop):
            # the zero accumulator the dot no longer reads; only in the body, so that the rest
            # of the function stays as the fused spelling has it (the same code)
            remove_dead(loop.regions[0])
    return fn


# ----------------------------------------------------------------------------- 2. pointers
_THROUGH = ("splat", "broadcast", "reshape", "convert_layout")
_INDEX_OPS = {"constant", "arange", "splat", "broadcast", "reshape", "convert_layout", "binary",
              "addptr", "cast", "program_id", "num_programs"}


class _Loop:
    """Derivatives with respect to a loop's induction variable, and copies of body index math
    in front of the loop."""

    def __init__(self, loop):
        self.loop, self.body = loop, loop.regions[0]
        self.iv = self.body.args[0]
        self.inside = {id(o) for o in self.body.walk()}
        self.memo = {}

    def defined_inside(self, v) -> bool:
        if isinstance(v.owner, Op):
            return id(v.owner) in self.inside
        return v.owner is self.body

    def deriv(self, v):
        """dv/dk as terms [(c, f)] meaning sum c * f (f a scalar Value or None for 1), uniform
        over the block; [] when v does not depend on k. Raises NoMatch otherwise."""
        if v is self.iv:
            return [(1, None)]
        if not self.defined_inside(v):
            return []
        op = v.owner
        if not isinstance(op, Op):
            raise NoMatch("the pointer depends on a value carried by the loop")
        k = op.opcode
        if k in ("constant", "arange", "program_id", "num_programs"):
            return []
        if k in _THROUGH or (k == "cast" and v.dtype.is_int() and op.operands[0].dtype.is_int()):
            return self.deriv(op.operands[0])
        if k == "addptr" or (k == "binary" and op.attrs["op"] in ("add", "sub")):
            x, y = (self.deriv(o) for o in op.operands)
            if op.attrs.get("op") == "sub":
                y = [(-c, f) for c, f in y]
            return x + y
        if k == "binary" and op.attrs["op"] == "mul":
            dx, dy = (self.deriv(o) for o in op.operands)
            if dx and dy:
                raise NoMatch("the pointer is not affine in the induction variable")
            terms, other = (dx, op.operands[1]) if dx else (dy, op.operands[0])
            if not terms:
                return []
            s = _uniform(other)
            if s is None:
                raise NoMatch("the induction variable is scaled by a value that is not uniform")
            c = index_constant(s)
            if c is not None:
                return [(t * int(c), f) for t, f in terms]
            if any(f is not None for _, f in terms):
                raise NoMatch("the induction variable's step is a product of two runtime values")
            return [(t, s) for t, _ in terms]
        raise NoMatch(f"`{op.attrs.get('op', k)}` of the induction variable is not a constant "
                      f"step")

    def hoist(self, v, iv_value):
        """v computed in front of the loop with k = iv_value (v's index math copied there),
        folding the zeros of k = 0."""
        if v is self.iv:
            return iv_value
        if not self.defined_inside(v):
            return v
        if v.id in self.memo:
            return self.memo[v.id]
        op = v.owner
        if not isinstance(op, Op) or op.opcode not in _INDEX_OPS or op.regions:
            raise NoMatch("the pointer reads a value the loop computes")
        ins = [self.hoist(o, iv_value) for o in op.operands]
        out = None
        if op.opcode in ("binary", "addptr") and op.attrs.get("op", "add") in ("add", "sub"):
            if _is_zero(ins[1]) and ins[0].type == v.type:
                out = ins[0]
            elif op.attrs.get("op") == "add" and _is_zero(ins[0]) and ins[1].type == v.type:
                out = ins[1]
        elif op.opcode == "binary" and op.attrs["op"] == "mul":
            out = next((x for x in ins if _is_zero(x) and x.type == v.type), None)
        if out is None:
            out = self.emit(op.opcode, ins, v.type, dict(op.attrs), op.loc)
            out.name = v.name
        self.memo[v.id] = out
        return out

    def emit(self, opcode, operands, rtype, attrs=None, loc=None):
        parent = self.loop.parent
        op = Op(opcode, operands, [rtype], attrs or {}, (), loc or self.loop.loc)
        op.parent = parent
        parent.ops.insert(parent.ops.index(self.loop), op)
        return op.result


def _uniform(v):
    """The scalar a block is a splat of (through broadcasts and reshapes), or v if scalar."""
    while is_block(v.type):
        o = op_of(v)
        if o is None or o.opcode not in _THROUGH:
            return None
        v = o.operands[0]
    return v


def _loaded(v, body) -> bool:
    """v is a load in `body` (or its transpose)."""
    o = op_of(v, "trans", "permute")
    o = op_of(o.operands[0] if o is not None else v, "load")
    return o is not None and o.parent is body


def _feeds_dot(ld, uses, dots) -> bool:
    users = uses.get(ld.result.id, [])
    return bool(users) and all(
        any(u is d for d in dots) or (u.opcode in ("trans", "permute") and all(
            any(w is d for d in dots) for w in uses.get(u.result.id, []))) for u in users)


def _step(lp, terms, loc):
    """The loop-invariant scalar the pointer advances by per iteration: step * dP/dk."""
    step = lp.loop.operands[2]
    sc = index_constant(step)
    total = None
    for c, f in terms:
        if sc is not None:
            k = lp.emit("constant", [], ScalarType(D.int32), {"value": int(c * sc)}, loc)
        else:
            k = lp.emit("binary", [step, lp.emit("constant", [], ScalarType(step.dtype),
                                                 {"value": int(c)}, loc)],
                        ScalarType(step.dtype), {"op": "mul"}, loc)
        if f is not None:
            if k.dtype != f.dtype:
                k = lp.emit("cast", [k], ScalarType(f.dtype), {"bitcast": False}, loc)
            k = lp.emit("binary", [k, f], ScalarType(f.dtype), {"op": "mul"}, loc)
        if total is not None and total.dtype != k.dtype:
            total = lp.emit("cast", [total], ScalarType(D.int64), {"bitcast": False}, loc)
            k = lp.emit("cast", [k], ScalarType(D.int64), {"bitcast": False}, loc)
        total = k if total is None else lp.emit("binary", [total, k], k.type, {"op": "add"},
                                                loc)
    return total


def _carry(lp, ld):
    """Make the pointer of `ld` a carried, incremented block; False (with the reason in the
    load's attrs) when it is not affine in the induction variable."""
    loop, body, ptr = lp.loop, lp.body, ld.operands[0]
    try:
        if not lp.defined_inside(ptr) or not isinstance(ptr.owner, Op):
            return False
        terms = lp.deriv(ptr)
        terms = [(c, f) for c, f in terms if c]
        if not terms:
            return False
        if len({id(f) for _, f in terms}) != len(terms):
            merged = {}
            for c, f in terms:
                merged[id(f)] = (merged.get(id(f), (0, f))[0] + c, f)
            terms = [t for t in merged.values() if t[0]]
        init = lp.hoist(ptr, loop.operands[0])
    except NoMatch as e:
        ld.attrs["canon_why"] = str(e)
        return False
    loc = ld.loc
    s = _step(lp, terms, loc)
    # the carried block: argument, loop operand, result, and its update before the yield
    arg = Value(ptr.type, body, len(body.args), ptr.name)
    body.args.append(arg)
    loop.operands.append(init)
    loop.results.append(Value(ptr.type, loop, len(loop.results), ptr.name))
    for op in body.walk():
        op.operands = [arg if o is ptr else o for o in op.operands]
    yld = body.ops[-1]
    at = body.ops.index(yld)
    sp = Op("splat", [s], [BlockType(s.dtype, ptr.shape)], {}, (), loc)
    upd = Op("addptr", [arg, sp.result], [ptr.type], {}, (), loc)
    for i, op in enumerate((sp, upd)):
        op.parent = body
        body.ops.insert(at + i, op)
    upd.result.name = ptr.name
    yld.operands.append(upd.result)
    return True


def _rebase_mask(lp, mask):
    """Mask conjuncts `idx(k) < B` with idx advancing by a constant c per unit of k (from a loop
    starting at 0) read `idx(0) < B - k * c`: the tutorial's form, the index the pointer's
    copy in front of the loop (so the TMA planner sees the mask bound the loaded index)."""
    if index_constant(lp.loop.operands[0]) != 0:
        return
    todo = [mask]
    while todo:
        v = todo.pop()
        o = op_of(v)
        if o is None or not lp.defined_inside(v):
            continue
        if o.opcode in ("broadcast", "reshape", "convert_layout") or (
                o.opcode == "binary" and o.attrs["op"] == "and"):
            todo.extend(o.operands)
            continue
        if not (o.opcode == "binary" and o.attrs["op"] == "lt"):
            continue
        x, y = o.operands
        bound = _uniform(y)
        try:
            dx, dy = lp.deriv(x), lp.deriv(y)
            if dy or bound is None or len(dx) != 1 or dx[0][1] is not None or not dx[0][0] \
                    or bound.dtype != lp.iv.dtype:
                continue
            x0 = lp.hoist(x, lp.loop.operands[0])
        except NoMatch:
            continue
        at = lp.body.ops.index(o)
        made = []
        for opcode, ins, t, attrs in (
                ("constant", [], ScalarType(lp.iv.dtype), {"value": dx[0][0]}),
                ("binary", [lp.iv, None], ScalarType(lp.iv.dtype), {"op": "mul"}),
                ("binary", [bound, None], ScalarType(lp.iv.dtype), {"op": "sub"}),
                ("splat", [None], y.type, {})):
            ins = [made[-1] if i is None else i for i in ins]
            new = Op(opcode, ins, [t], attrs, (), o.loc)
            new.parent = lp.body
            lp.body.ops.insert(at + len(made), new)
            made.append(new.result)
        o.operands = [x0, made[-1]]


def _fold_inductions(loop):
    """Integer scalars the loop carries unchanged, or advanced by a constant multiple m of its
    constant step (a block pointer's offsets under `nl.advance`: the frontend carries them),
    read in the body as `init` or `init + (k - lb) / step * m * step`, spelled `init + (k - lb) *
    m` (`k` alone for the usual 0 start, step and m 1): affine in k, which `deriv` reads. The carried value itself stays (its update
    reads it), now unread by the loads."""
    body, yld = loop.regions[0], loop.regions[0].ops[-1]
    lb, step = loop.operands[0], index_constant(loop.operands[2])
    first = []
    for j, arg in enumerate(body.args[1:]):
        if is_block(arg.type) or not arg.dtype.is_int() or not step or step < 0:
            continue
        nxt, upd, m = yld.operands[j], None, 0
        if nxt is not arg:
            upd = op_of(nxt)
            if upd is None or upd.parent is not body or upd.opcode != "binary" \
                    or upd.attrs["op"] not in ("add", "sub") or arg not in upd.operands:
                continue
            other = upd.operands[1] if upd.operands[0] is arg else upd.operands[0]
            c = index_constant(other)
            if c is None or (upd.attrs["op"] == "sub" and other is not upd.operands[1]) \
                    or int(c) % step:
                continue
            m = int(c) // step * (-1 if upd.attrs["op"] == "sub" else 1)
        init, loc, made = loop.operands[3 + j], loop.loc, []

        def emit(opcode, ins, attrs, t=arg.type):
            op = Op(opcode, ins, [t], attrs, (), loc)
            op.parent = body
            made.append(op)
            return op.result
        value = init
        if m:
            k = body.args[0]
            if index_constant(lb) != 0:
                k = emit("binary", [k, lb], {"op": "sub"}, k.type)
            if k.dtype != arg.dtype:
                k = emit("cast", [k], {"bitcast": False})
            if m != 1:
                k = emit("binary", [k, emit("constant", [], {"value": m})], {"op": "mul"})
            # from 0 (the usual K offset): `k` alone, the index form descriptors lower to, which
            # the TMA planner's mask matching reads
            value = k if index_constant(init) == 0 else emit("binary", [k, init], {"op": "add"})
        first += made
        for op in body.walk():
            if op is not upd and op is not yld:
                op.operands = [value if o is arg else o for o in op.operands]
    body.ops[:0] = first


def carry_pointers(fn, options):
    """2. Dot operand pointers recomputed from the induction variable -> incremented pointers."""
    for loop in _dot_loops(fn):
        _fold_inductions(loop)
        body = loop.regions[0]
        uses = body.uses()
        changed = False
        lp = _Loop(loop)    # one copy of the index math in front of the loop for all loads
        yld = body.ops[-1]
        # only the loads of dots the ring can take (an accumulator carried from dot to dot):
        # other loops holding dots (attention's) have passes of their own for their loads
        rings = [o for o in body.ops if o.opcode == "dot"
                 and _carried_acc_why(o, body, uses, yld) is None
                 and all(_loaded(v, body) for v in o.operands[:2])]
        for ld in [o for o in body.ops if o.opcode == "load"]:
            if is_block(ld.operands[0].type) and _feeds_dot(ld, uses, rings):
                if _carry(lp, ld) and ld.attrs.get("has_mask"):
                    _rebase_mask(lp, ld.operands[1])
                    changed = True
        if changed:
            remove_dead(body)       # the per-iteration pointer math
    return fn


# ----------------------------------------------------------------------------- 3. why no ring
def explain_rings(fn, options):
    """3. A loop's dot that dot_ring left without a ring says why, in attrs["ring_why"] (the
    first of tc/dot_pipeline.py's conditions that does not hold, checked in the same order)."""
    from ...ir.schedule import plan_dot
    for loop in _dot_loops(fn):
        body = loop.regions[0]
        uses = body.uses()
        yld = body.ops[-1]
        for dot in [o for o in body.ops if o.opcode == "dot" and not o.attrs.get("ring")]:
            why = _no_ring(dot, body, uses, yld, plan_dot, options)
            if why:
                dot.attrs["ring_why"] = why
    return fn


def _no_ring(dot, body, uses, yld, plan_dot, options):
    why = _carried_acc_why(dot, body, uses, yld)
    if why:
        return why
    plan = plan_dot(dot, options.num_threads)
    if plan.engine != "mma":
        return f"the dot does not run on tensor cores: {plan.why}"
    for role, v in zip("ab", dot.operands[:2]):
        ld = op_of(v)
        if ld is None or ld.opcode != "load" or ld.parent is not body:
            return f"operand {role} is not a load in the loop body"
        if uses.get(v.id, []) != [dot]:
            return f"operand {role} is also read by another op"
        if ld.attrs.get("volatile"):
            return f"operand {role}'s load is volatile"
        if ld.attrs.get("has_other") and not _is_zero(ld.operands[-1]):
            return f"operand {role}'s masked load pads with a nonzero `other`"
    return None


def _carried_acc_why(dot, body, uses, yld):
    """Why a dot's accumulator is not carried from dot to dot (the ring's first condition), or
    None when it is."""
    acc = dot.operands[2]
    if not any(acc is c for c in body.args[1:]):
        return "the accumulator is not a value the loop carries"
    if dot.result.dtype not in (D.float32, D.int32):
        return "the accumulator is not fp32 or int32"
    if uses.get(acc.id, []) != [dot]:
        return "the accumulator is read by another op in the loop"
    j = body.args.index(acc) - 1
    if uses.get(dot.result.id, []) != [yld] or yld.operands[j] is not dot.result:
        return "the dot's result is used in the loop, not only carried to the next iteration"
    return None
