"""Dot-rows pass: row statistics, P and loop-invariant operands of fused attention stay where
the tensor cores want them.

Where it sits: after the layout pass (layout.py), before the shared-memory pass (smem.py).
Consumes IR with layouts; rewrites the parts the layout pass can only express through the
scratch arena:

1. Row reductions of a dot result. The layout pass converts a value in the accumulator layout
   (AccLayout) to the group-cyclic layout before `reduce` (a round trip through shared memory
   and a second copy of the tile in registers). A reduce (sum/max/min) over the last axis of
   such a value becomes `dot_row_reduce`, which reads the fragment in place: each thread folds
   its own columns of its rows, then two quad shuffles (xor 1, 2) finish the row, since the 4
   lanes of a quad hold all N columns of a row. The result is in `AccRowLayout`: thread t holds
   the rows of its fragment, so every lane of a quad holds the same value (only lane % 4 == 0
   counts as valid, so stores and conversions out write each row once).
2. Row vectors in that layout. Elementwise math over such rows (maximum, exp2, scale, the
   running max / sum carried by a loop) stays in AccRowLayout as long as every other block
   operand is index-computable; anything else gets a convert_layout back to the layout it had.
3. Broadcasts back. `broadcast(row[:, None])` whose users all want AccLayout(M, N) becomes
   `dot_row_bcast`: slot s of the fragment reads row slot (s / (N/2)) * 2 + (s % 4) / 2 of its
   own registers, no data moves (acc * alpha[:, None], qk - m[:, None]).
   A row vector from outside the loop (attention backward's loaded logsumexp) is converted
   to AccRowLayout once, before the loop, and broadcast the same way inside it.
   A vector loaded inside the loop and only broadcast into the fragment (a column, the
   backward's per-block logsumexp) is loaded in the fragment layout directly.
4. A from registers. A `dot` whose A operand is a 16-bit value already in the accumulator
   layout of M x K rows (P = softmax(S).to(fp16) of the previous dot) takes it from registers:
   the m16n8k16 C fragment of two adjacent n8 tiles is exactly the A fragment of one k16 step,
   pairwise (attrs["a_src"] = "regs"; codegen packs pairs into fp16x2, no shared memory; the
   same holds per warp for wgmma's register A of an m64 tile, so sm_90a uses wgmma too).
   The pack rounds to 16 bits, so an fp32 -> 16-bit cast read only by it is not computed
   (the cast's attrs["rounded_by_user"]: its result is its operand, rounded once, there).
5. Loop-invariant A. A dot inside a loop whose A operand is defined outside every loop holding
   it (Q in attention) gets one `dot_stage_a` op right after the operand's definition: the tile
   is staged into shared memory once (attrs["a_src"] = "staged"), and its registers die there.
   Its shared-memory region stays live until the end of the last loop that reads it (smem.py).
6. Index math inside loops. Fragment-layout conversions of index-computable values (the causal
   mask) become `dot_frag_icomp`, and synchronous dots / tile loads get
   attrs["recompute_index"]: codegen recomputes them from a thread index NVRTC cannot hoist,
   instead of keeping one loop-invariant register per slot or per fragment address.
7. The epilogue's row scaling (`acc / l_i[:, None]`) happens in the fragment, before the
   accumulator leaves it (dot_acc_out moves after the op).
Also: a dot accumulator passed from one loop to the next (causal attention's two key loops)
stays in the fragment (its dot_acc_out / convert_layout round trip is removed), and loads that
feed only a dot are copied straight into its tile (dot_loads.py: plan_tile_loads,
plan_prefetch).
"""
from __future__ import annotations

from ...ir.core import BlockType, Op, is_block
from ...ir.layouts import AccLayout, AccRowLayout
from ...ir.schedule import StagedTile

_ROW_ELEMENTWISE = {"binary", "unary", "cast", "select", "fma"}
_KINDS = ("sum", "max", "min")


# ----------------------------------------------------------------------------- helpers

def _insert_before(block, before, op):
    op.parent = block
    block.ops.insert(block.ops.index(before), op)
    return op


def _convert(v, lay, before, block, movement):
    op = Op("convert_layout", [v], [v.type], {"movement": movement}, (), before.loc)
    op.result.attrs["layout"] = lay
    op.result.name = v.name
    if v.attrs.get("icomp") and movement == "recompute":
        op.result.attrs["icomp"] = True
    return _insert_before(block, before, op).result


def _blocks(block):
    yield block
    for op in block.ops:
        for r in op.regions:
            yield from _blocks(r)


def _reduce_source(op, T):
    """The AccLayout value a reduce folds (through the layout pass's conversion), or None."""
    if op.opcode != "reduce" or op.attrs.get("kind") not in _KINDS:
        return None
    x = op.operands[0]
    if len(x.shape) != 2 or op.attrs.get("axis") != 1:
        return None
    src = x
    cv = x.owner
    if isinstance(cv, Op) and cv.opcode == "convert_layout":
        src = cv.operands[0]
    lay = src.attrs.get("layout")
    if isinstance(lay, AccLayout) and lay.num_threads == T and lay.N == x.shape[1] \
            and lay.M == x.shape[0] and src.dtype == x.dtype:
        return src if _whole_rows(lay) else None
    return None


def _whole_rows(lay):
    """Whether each row of the fragment lies in one warp's quads. Split in column groups
    (AccLayout's C, a dot whose M rows do not cover its warps), a row spans C warps: its
    reductions, broadcasts and P operand keep the layout pass's way through shared memory,
    which combines the warps' columns (the dot's plan says so: _split_rows_why)."""
    return isinstance(lay, AccLayout) and lay.C == 1


# ----------------------------------------------------------------------------- 1-3 rows

def _row_values(fn, T, seeds):
    """The values that can live in AccRowLayout: a greatest fixpoint over candidates."""
    rows = {id(op.result): AccRowLayout.of_acc(src.attrs["layout"]) for op, src in seeds}
    Ms = {lay.M for lay in rows.values()}
    if len(Ms) != 1:
        return {}, {}
    M = Ms.pop()
    row = AccRowLayout(M, T)
    cand: dict[int, object] = {}          # value id -> the value
    defs: dict[int, tuple] = {}           # value id -> ("op", op) | ("arg", loop, i) | ("res", loop, i)
    for op, _ in seeds:
        cand[op.result.id] = op.result
        defs[op.result.id] = ("seed", op)
    for op in fn.walk():
        if op.opcode in _ROW_ELEMENTWISE or op.opcode == "reshape":
            r = op.results[0]
            if is_block(r.type) and r.type.numel == M and not r.dtype.is_ptr() \
                    and not r.attrs.get("icomp"):
                cand[r.id] = r
                defs[r.id] = ("op", op)
        if op.opcode == "for":
            body = op.regions[0]
            for i, (a, res) in enumerate(zip(body.args[1:], op.results)):
                if is_block(a.type) and a.type.numel == M and not a.dtype.is_ptr():
                    cand[a.id], defs[a.id] = a, ("arg", op, i)
                    cand[res.id], defs[res.id] = res, ("res", op, i)

    def ok_operand(o):
        return (not is_block(o.type)) or o.id in cand or o.attrs.get("icomp")

    changed = True
    while changed:
        changed = False
        for vid in list(cand):
            kind = defs[vid]
            if kind[0] == "seed":
                continue
            if kind[0] == "op":
                op = kind[1]
                good = all(ok_operand(o) for o in op.operands) and \
                    any(is_block(o.type) and o.id in cand for o in op.operands)
            else:
                loop, i = kind[1], kind[2]
                body = loop.regions[0]
                init, y = loop.operands[3 + i], body.ops[-1].operands[i]
                a = body.args[1 + i]
                good = (init.id in cand or init.attrs.get("icomp")) and y.id in cand \
                    and a.id in cand and loop.results[i].id in cand
            if not good:
                del cand[vid]
                changed = True
    return cand, row


def _split_rows_why(fn):
    """Record on each split dot's plan that its row statistics go through shared memory."""
    from .facts import replace_fact
    for op in list(fn.walk()):
        plan = op.attrs.get("dot_plan") if op.opcode == "dot" else None
        if plan is None or plan.col_groups == 1 or "row reductions" in plan.why:
            continue
        if any(_reduce_of(u, op.result) for u in fn.walk()):
            replace_fact(fn, plan, why=plan.why + "; its row reductions combine the warps "
                                                  "through shared memory")


def _reduce_of(op, x):
    if op.opcode != "reduce" or op.attrs.get("axis") != 1:
        return False
    v = op.operands[0]
    cv = v.owner
    return v is x or (isinstance(cv, Op) and cv.opcode == "convert_layout"
                      and cv.operands[0] is x)


def _fuse_rows(fn, T):
    _split_rows_why(fn)
    seeds = [(op, src) for op in fn.walk() for src in [_reduce_source(op, T)] if src is not None]
    if not seeds:
        return
    rowset, row = _row_values(fn, T, seeds)
    if not rowset:
        return
    old = {vid: v.attrs.get("layout") for vid, v in rowset.items()}
    for v in rowset.values():
        v.attrs["layout"] = row
    for op, src in seeds:                       # 1: reduce the fragment in place
        cv = op.operands[0].owner
        op.operands[0] = src
        op.opcode = "dot_row_reduce"
        if isinstance(cv, Op) and cv.opcode == "convert_layout" and cv.parent is not None \
                and not any(o is cv.result for u in fn.walk() for o in u.operands):
            cv.parent.ops.remove(cv)
    for block in list(_blocks(fn.body)):
        for op in list(block.ops):
            _fix_op(fn, op, block, rowset, old, row)


def _bcast_target(fn, op, rowset):
    """AccLayout when `op` broadcasts a row value [M, 1] -> [M, N] only for users that convert
    it to AccLayout(M, N); else None."""
    if op.opcode != "broadcast" or op.operands[0].id not in rowset:
        return None
    x, r = op.operands[0], op.result
    if len(r.shape) != 2 or tuple(x.shape) != (r.shape[0], 1):
        return None
    fn_users = _users_of(fn, op)
    lays = {u.result.attrs.get("layout") for u in fn_users if u.opcode == "convert_layout"}
    if not fn_users or any(u.opcode != "convert_layout" for u in fn_users) or len(lays) != 1:
        return None
    lay = lays.pop()
    if _whole_rows(lay) and lay.N == r.shape[1] and lay.M == r.shape[0]:
        return lay
    return None


def _users_of(fn, op):
    return [u for u in fn.walk() if any(o is op.result for o in u.operands)]


def _fix_op(fn, op, block, rowset, old, row):
    in_rows = any(r.id in rowset for r in op.results)
    if op.opcode == "dot_row_reduce":
        return
    if in_rows and op.opcode != "for":
        if op.opcode == "reshape":
            op.attrs["movement"] = "none"
        for i, o in enumerate(op.operands):    # index-computable operands: recomputed
            if is_block(o.type) and o.id not in rowset:
                op.operands[i] = _convert(o, row, op, block, "recompute")
        return
    lay = _bcast_target(fn, op, rowset)
    if lay is not None:                          # 3: broadcast inside the fragment
        op.opcode = "dot_row_bcast"
        op.result.attrs["layout"] = lay
        op.attrs.pop("movement", None)
        for u in _users_of(fn, op):
            u.attrs["movement"] = "none"
        return
    if op.opcode == "for":
        body = op.regions[0]
        for i, a in enumerate(body.args[1:]):
            o = op.operands[3 + i]
            if a.id in rowset and o.id not in rowset and is_block(o.type):
                op.operands[3 + i] = _convert(o, row, op, block, "recompute")
            elif a.id not in rowset and o.id in rowset:
                op.operands[3 + i] = _convert(o, old[o.id], op, block, "smem")
        return
    if op.opcode == "yield":
        parent = block.parent
        targets = parent.regions[0].args[1:] if parent.opcode == "for" else \
            (parent.regions[1].args if parent.opcode == "while" else parent.results)
        for i, (o, t) in enumerate(zip(op.operands, targets)):
            if o.id in rowset and t.id not in rowset:
                op.operands[i] = _convert(o, old[o.id], op, block, "smem")
        return
    for i, o in enumerate(op.operands):          # 2: anything else reads its old layout
        if o.id not in rowset:
            continue
        if op.opcode == "convert_layout":
            op.attrs["movement"] = "smem"
            continue
        op.operands[i] = _convert(o, old[o.id], op, block, "smem")


# ----------------------------------------------------------------------------- 4-5 operands

def _plan_operands(fn, T):
    staged: dict[int, StagedTile] = {}
    uses = fn.uses()
    for op in list(fn.walk()):
        if op.opcode != "dot" or op.attrs.get("ring") is not None:
            continue
        plan = op.attrs.get("dot_plan")
        if plan is None or plan.engine != "mma":
            continue
        a = op.operands[0]
        lay = a.attrs.get("layout")
        if plan.kind in ("f16", "bf16") and _whole_rows(lay) and lay.M == plan.M \
                and lay.N == plan.K and lay.num_threads == T and plan.col_groups == 1:
            op.attrs["a_src"] = "regs"                   # 4
            c = a.owner
            if isinstance(c, Op) and c.opcode == "cast" and not c.attrs.get("bitcast") \
                    and c.operands[0].dtype.name == "float32" \
                    and c.operands[0].attrs.get("layout") == lay and uses.get(a.id) == [op]:
                c.attrs["rounded_by_user"] = True       # the fragment pack rounds (once)
            continue
        d = a.owner
        if not isinstance(d, Op) or d.parent is None or a.attrs.get("icomp"):
            continue
        loop = _outer_loop_without(op, d)
        if loop is None:
            continue
        tile = staged.get(a.id)
        if tile is None:                                 # 5
            tile = staged[a.id] = StagedTile(plan.M, plan.K, plan.esize)
            st = Op("dot_stage_a", [a], [], {"tile": tile, "dot_plan": plan}, (), d.loc)
            st.parent = d.parent
            d.parent.ops.insert(d.parent.ops.index(d) + 1, st)
        if (tile.M, tile.K, tile.esize) != (plan.M, plan.K, plan.esize):
            continue
        op.attrs["a_src"] = "staged"
        op.attrs["a_tile"] = tile


def _outer_loop_without(op, d):
    """The outermost `for`/`while` holding `op` but not the op `d`, or None."""
    inside = set()
    b = d.parent
    while b is not None:
        inside.add(id(b))
        p = b.parent
        b = p.parent if isinstance(p, Op) else None
    found = None
    b = op.parent
    while b is not None:
        p = b.parent
        if not isinstance(p, Op):
            break
        if id(b) in inside:
            break
        if p.opcode in ("for", "while"):
            found = p
        b = p.parent
    return found


def _invariant_rows(fn, T):
    """3b. A row vector defined outside a loop and broadcast inside it into the fragment
    (`p = exp2(qk - m[:, None])` with `m` loaded before the loop: attention backward's dQ walk)
    is converted to AccRowLayout once, before the loop; each iteration's broadcast is then a
    dot_row_bcast (no data moves) instead of two trips through shared memory."""
    done: dict[tuple, object] = {}
    for bc in [op for op in fn.walk() if op.opcode == "broadcast"]:
        x = bc.operands[0]
        rs = x.owner
        if not (isinstance(rs, Op) and rs.opcode == "reshape" and len(x.shape) == 2
                and x.shape[1] == 1 and len(rs.operands[0].shape) == 1):
            continue
        v = rs.operands[0]
        d = v.owner
        if v.attrs.get("icomp") or isinstance(v.attrs.get("layout"), AccRowLayout) \
                or not isinstance(d, Op) or d.parent is None:
            continue
        loop = _outer_loop_without(bc, d)
        users = _users_of(fn, bc)
        # (checked before reading u.result: a store has none, a scan of two has two)
        if loop is None or not users or any(u.opcode != "convert_layout" for u in users):
            continue
        lays = {u.result.attrs.get("layout") for u in users}
        if len(lays) != 1:
            continue
        lay = lays.pop()
        if not (_whole_rows(lay) and lay.num_threads == T and lay.M == v.shape[0]
                and lay.N == bc.result.shape[1]):
            continue
        block = loop.parent       # one conversion per block: later loops of it reuse it
        row = done.get((v.id, id(block)))
        if row is None:
            w = _convert(v, AccRowLayout(lay.M, T), loop, block, "smem")
            r = Op("reshape", [w], [x.type], {"movement": "none"}, (), rs.loc)
            r.result.attrs["layout"] = w.attrs["layout"]
            row = done[(v.id, id(block))] = _insert_before(block, loop, r).result
        bc.operands[0] = row
        bc.opcode = "dot_row_bcast"
        bc.result.attrs["layout"] = lay
        bc.attrs.pop("movement", None)
        for u in users:
            u.attrs["movement"] = "none"


def _vector_loads_in_fragment(fn, T):
    """3c. A vector loaded inside a loop and read only broadcast into the fragment
    (`p_t = exp2(qk_t - m[None, :])` with `m` loaded per query block: attention backward's
    dK / dV walk) is loaded in the fragment layout itself: its pointer, mask and other are
    index-computable, so each thread reads the elements of its own slots (cached, repeated
    across rows) instead of two trips through shared memory and their barriers."""
    uses = fn.uses()
    for cv in [op for op in fn.walk() if op.opcode == "convert_layout"]:
        lay = cv.result.attrs.get("layout")
        bc = cv.operands[0].owner
        if not (isinstance(lay, AccLayout) and lay.num_threads == T and isinstance(bc, Op)
                and bc.opcode == "broadcast" and cv.parent is not None
                and isinstance(cv.parent.parent, Op)
                and cv.parent.parent.opcode in ("for", "while")):
            continue
        rs = bc.operands[0].owner
        ld = rs.operands[0].owner if isinstance(rs, Op) and rs.opcode == "reshape" else None
        if not (isinstance(ld, Op) and ld.opcode == "load" and ld.parent is cv.parent
                and len(ld.result.shape) == 1 and not ld.attrs.get("volatile")
                and all(o.attrs.get("icomp") for o in ld.operands if is_block(o.type))):
            continue
        block = cv.parent
        operands = []
        for o in ld.operands:       # o[reshape][broadcast], recomputed in the fragment
            if not is_block(o.type):
                operands.append(o)
                continue
            r = Op("reshape", [o], [BlockType(o.dtype, rs.result.shape)],
                   {"movement": "recompute"}, (), ld.loc)
            r.result.attrs.update(layout=rs.result.attrs["layout"], icomp=True)
            b = Op("broadcast", [_insert_before(block, cv, r).result],
                   [BlockType(o.dtype, bc.result.shape)], {"movement": "recompute"}, (), ld.loc)
            b.result.attrs.update(layout=bc.result.attrs["layout"], icomp=True)
            operands.append(_convert(_insert_before(block, cv, b).result, lay, cv, block,
                                     "recompute"))
        new = Op("load", operands, [cv.result.type],
                 {k: v for k, v in ld.attrs.items() if k != "access"}, (), ld.loc)
        new.result.attrs["layout"] = lay
        _insert_before(block, cv, new)
        for u in uses.get(cv.result.id, []):
            u.operands = [new.result if o is cv.result else o for o in u.operands]
        for dead in (cv, bc, rs, ld):     # what only fed the broadcast goes with it
            if any(o is dead.result for u in fn.walk() for o in u.operands):
                break
            dead.parent.ops.remove(dead)
        uses = fn.uses()


def fuse_rows(fn, options):
    """Items 1-3 above: row statistics of dot results stay in the fragment (AccRowLayout)."""
    _fuse_rows(fn, options.num_threads)
    _invariant_rows(fn, options.num_threads)
    _vector_loads_in_fragment(fn, options.num_threads)
    return fn


def plan_operands(fn, options):
    """Items 4-5 above: A from registers, loop-invariant A staged once."""
    _plan_operands(fn, options.num_threads)
    return fn
