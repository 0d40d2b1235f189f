"""Layout pass: gives every block value a register layout and decides how data moves.

Consumes the frontend's IR; produces the same IR with these facts (shown by the printer):
  value.attrs["layout"]   a Layout (layouts.py) for every block value
  value.attrs["icomp"]    True for index-computable block values: pure functions of arange,
                          program ids, scalars and constants through elementwise/shape ops.
                          Any thread can compute any of their elements, so they never need
                          data movement (pointer math like `offs_m[:, None] * s + offs_k[None, :]`
                          costs nothing)
  value.attrs["contig"], ["const"], ["div"], ["prefix"], ["suffix"]
                          run facts of index-computable blocks (runs.py)
  op.attrs["movement"]    for broadcast / reshape / permute / convert_layout:
                          "none" (same layout, a rename), "recompute" (icomp: evaluate the
                          element where it is needed) or "smem" (through the scratch arena)
It also rewrites the IR where a decision needs an op: reductions over a non-last axis get a
`permute` that moves the axis last; operands whose layout differs from the one an op works in
get a `convert_layout`.

Layout choice: one layout per block *size* (numel) in a kernel, so reshapes and casts never
move data: group-cyclic with vec = 16 bytes / the narrowest element read or written in memory
at that size (4 when none). Anchored layouts (a `dot` accumulator, chosen by
newt.passes.tc.dot.result_layout) propagate forward through elementwise
ops and loop-carried values; index-computable operands follow for free.
"""
from __future__ import annotations

from ..ir.core import BlockType, Op, Value, is_block
from ..ir.layouts import CyclicLayout, Layout
from .tc.dot import result_layout

# ops whose operands and results share one layout, elementwise
ELEMENTWISE = {"cast", "binary", "unary", "select", "fma", "addptr", "load", "store", "atomic",
               "philox", "convert_layout", "libdevice", "inline_asm",
               "map_fn"}
# ops through which index-computability flows
ICOMP_OPS = {"constant", "program_id", "num_programs", "arange", "splat", "broadcast", "reshape",
             "permute", "cast", "binary", "unary", "select", "fma", "addptr", "convert_layout"}
SHAPE_OPS = {"broadcast", "reshape", "permute", "convert_layout"}


def layout_of(v: Value) -> Layout:
    return v.attrs["layout"]


def storage_bytes(dt) -> int:
    return max(1, dt.bits // 8)


def _choose_vecs(fn, num_threads) -> dict:
    """numel -> vec: 16 bytes of the narrowest element accessed in memory at that size."""
    narrowest: dict[int, int] = {}
    for op in fn.walk():
        if op.opcode in ("load", "store", "atomic") and is_block(op.operands[0].type):
            n = op.operands[0].type.numel
            b = storage_bytes(op.operands[0].dtype.element_ty)
            narrowest[n] = min(narrowest.get(n, 16), b)
    return {n: 16 // b for n, b in narrowest.items()}


class _Assigner:
    def __init__(self, fn, num_threads):
        self.fn, self.T = fn, num_threads
        self.vecs = _choose_vecs(fn, num_threads)
        self.anchor = result_layout

    def default(self, t) -> Layout:
        return CyclicLayout(t.numel, self.T, self.vecs.get(t.numel, 4))

    def set(self, v, lay=None):
        if is_block(v.type):
            v.attrs["layout"] = lay or self.default(v.type)

    def run(self):
        for p in self.fn.body.args:
            self.set(p)
        for _ in range(4):  # loop-carried layouts settle after a few rounds
            self.changed = False
            self.block(self.fn.body)
            if not self.changed:
                break
        _insert_conversions(self.fn.body, self)

    def block(self, block):
        for op in block.ops:
            self.op(op)

    def op(self, op: Op):
        c = op.opcode
        if c == "for":
            for a, init in zip(op.regions[0].args[1:], op.operands[3:]):
                self._carry(a, init)
            self.block(op.regions[0])
            self._settle(op, op.regions[0].args[1:], op.regions[0].ops[-1].operands)
            return  # _settle gave the results their layouts
        elif c == "while":
            for r in op.regions:
                for a, init in zip(r.args, op.operands):
                    self._carry(a, init)
            for r in op.regions:
                self.block(r)
            self._settle(op, op.regions[1].args, op.regions[1].ops[-1].operands)
            for a, b in zip(op.regions[0].args, op.regions[1].args):
                if is_block(a.type):
                    a.attrs["layout"] = b.attrs["layout"]
            return  # _settle gave the results their layouts
        elif c == "if":
            for r in op.regions:
                self.block(r)
            for i, res in enumerate(op.results):
                lays = [r.ops[-1].operands[i].attrs.get("layout") for r in op.regions]
                anchored = [x for x in lays if x is not None and x != self.default(res.type)]
                self.set(res, anchored[0] if anchored else None)
            return
        elif c == "dot" and self.anchor is not None:
            self.set(op.result, self.anchor(op, self.T))
            return
        elif c in ELEMENTWISE:
            lays = [o.attrs["layout"] for o in op.operands if is_block(o.type)]
            anchored = [x for x in lays if x != self.default(op.operands[0].type)]
            for r in op.results:
                self.set(r, anchored[0] if anchored and anchored[0].numel == r.type.numel else None)
            return
        for r in op.results:
            self.set(r)

    def _carry(self, arg, init):
        if is_block(arg.type) and "layout" not in arg.attrs:
            arg.attrs["layout"] = init.attrs["layout"]

    def _settle(self, op, args, yields):
        """A carried value takes the layout its loop body produces when that is anchored."""
        for a, y, res in zip(args, yields, op.results):
            if not is_block(a.type):
                continue
            ly = y.attrs["layout"]
            if ly != a.attrs["layout"] and ly != self.default(a.type):
                a.attrs["layout"] = ly
                self.changed = True
            res.attrs["layout"] = a.attrs["layout"]


def _convert(v: Value, lay: Layout, before: Op, block) -> Value:
    op = Op("convert_layout", [v], [v.type], {}, (), before.loc)
    op.result.attrs["layout"] = lay
    op.result.name = v.name
    op.parent = block
    block.ops.insert(block.ops.index(before), op)
    return op.result


def _insert_conversions(block, asg: _Assigner):
    """Operands in a layout other than the one their op works in get a convert_layout
    (which is free for index-computable values); non-last-axis reductions get a permute."""
    for op in list(block.ops):
        for r in op.regions:
            _insert_conversions(r, asg)
        c = op.opcode
        want = None
        if c in ELEMENTWISE and c != "convert_layout":
            want = next((r.attrs["layout"] for r in op.results if is_block(r.type)), None)
            if want is None and is_block(op.operands[0].type):  # store
                lays = [o.attrs["layout"] for o in op.operands if is_block(o.type)]
                want = next((x for x in lays if x != asg.default(op.operands[0].type)), lays[0])
        if want is not None:
            for i, o in enumerate(op.operands):
                if is_block(o.type) and o.attrs["layout"] != want:
                    op.operands[i] = _convert(o, want, op, block)
        if c == "yield" and block.parent is not None:
            targets = _yield_targets(block)
            for i, (o, t) in enumerate(zip(op.operands, targets)):
                if is_block(o.type) and o.attrs["layout"] != t.attrs["layout"]:
                    op.operands[i] = _convert(o, t.attrs["layout"], op, block)
        if c in ("for", "while"):
            args = op.regions[0].args[1:] if c == "for" else op.regions[0].args
            first = 3 if c == "for" else 0
            for i, a in enumerate(args):
                o = op.operands[first + i]
                if is_block(o.type) and o.attrs["layout"] != a.attrs["layout"]:
                    op.operands[first + i] = _convert(o, a.attrs["layout"], op, block)
        if c in ("gather", "histogram"):     # the index (mask) is read in the result's (x's) slots
            want = (op.results[0] if c == "gather" else op.operands[0]).attrs.get("layout")
            for i, o in enumerate(op.operands[1:], 1):
                if is_block(o.type) and want is not None and o.attrs["layout"] != want:
                    op.operands[i] = _convert(o, want, op, block)
        if c == "scan_fn":      # every operand in the default layout of its shape
            for i, o in enumerate(op.operands):
                if o.attrs["layout"] != asg.default(o.type):
                    op.operands[i] = _convert(o, asg.default(o.type), op, block)
        if c in ("reduce", "scan") and not isinstance(op.operands[0].attrs["layout"], CyclicLayout):
            op.operands[0] = _convert(op.operands[0], asg.default(op.operands[0].type), op, block)
        if c == "reduce" and len(op.operands[0].shape) > 1 \
                and op.attrs["axis"] != len(op.operands[0].shape) - 1:
            x = op.operands[0]
            axis, rank = op.attrs["axis"], len(x.shape)
            order = tuple(i for i in range(rank) if i != axis) + (axis,)
            p = Op("permute", [x], [BlockType(x.dtype, tuple(x.shape[i] for i in order))],
                   {"order": order}, (), op.loc)
            p.result.attrs["layout"] = asg.default(x.type)
            p.parent = block
            block.ops.insert(block.ops.index(op), p)
            op.operands[0] = p.result
            op.attrs["axis"] = rank - 1


def _yield_targets(block):
    """The values a yield assigns: the carried args of a loop body, the results of an if."""
    parent = block.parent
    if parent.opcode == "for":
        return parent.regions[0].args[1:]
    if parent.opcode == "while":
        return parent.regions[1].args
    return parent.results


def _mark_icomp(block, known: set):
    for op in block.ops:
        for r in op.regions:
            _mark_icomp(r, known)
        ok = op.opcode in ICOMP_OPS and all(
            (not is_block(o.type)) or o.id in known for o in op.operands)
        for r in op.results:
            if ok and is_block(r.type):
                r.attrs["icomp"] = True
                known.add(r.id)
            elif is_block(r.type):
                r.attrs.pop("icomp", None)


def _keeps_order(op) -> bool:
    dims = [d for d in op.attrs["order"] if op.operands[0].shape[d] != 1]
    return dims == sorted(dims)


def _decide_movement(fn):
    for op in fn.walk():
        if op.opcode not in SHAPE_OPS:
            continue
        x, r = op.operands[0], op.result
        same = x.attrs["layout"] == r.attrs["layout"]
        if op.opcode in ("reshape", "convert_layout") and same:
            op.attrs["movement"] = "none"
        elif op.opcode == "permute" and same and _keeps_order(op):
            op.attrs["movement"] = "none"     # only size-1 dims move: the flat order is kept
        elif x.attrs.get("icomp"):
            op.attrs["movement"] = "recompute"
        else:
            op.attrs["movement"] = "smem"


def assign_layouts(fn, options):
    """A layout for every block value (see the module docstring)."""
    _Assigner(fn, options.num_threads).run()
    return fn


def mark_icomp(fn, options):
    """Index-computable values (any thread can compute any element)."""
    _mark_icomp(fn.body, set())
    return fn


def decide_movement(fn, options):
    """How each layout conversion moves its data (after the run facts, passes/runs.py)."""
    _decide_movement(fn)
    fn.attrs["num_threads"] = options.num_threads
    return fn
