"""Which pointer parameters a kernel may write through: an analysis of the frontend's IR.

Where it sits: in the IR, beside pointers.py, read by nothing in the compile pipeline. torch.compile
support (newt/torch_ops.py) asks it which tensor arguments of a launch to declare mutated: a
tensor declared mutated that is an input of the compiled graph gets copied back into after the
graph, and a graph that mutates its inputs runs without CUDA graphs under mode="reduce-overhead".

The rule is an over-approximation, so that no write is ever missed: every value derived from a
parameter through any op (pointer arithmetic, casts to an int and back, selects, loop-carried
values) carries that parameter; a load's or an atomic's result carries none (it is memory, not
an address). A parameter is written when a value carrying it is the address of a store or an
atomic, or any operand of an op that is not known to leave memory alone (inline assembly, user
functions mapped over elements).
"""
from __future__ import annotations

from .ops import OPCODES

_ADDRESSED = {"store", "atomic"}          # operand 0 is the address written
_FROM_MEMORY = {"load", "atomic"}         # results read from memory carry no parameter
_LEAVE_MEMORY = OPCODES - _ADDRESSED - {"inline_asm", "map_fn", "scan_fn"}


def written_params(fn) -> frozenset:
    """Names of the parameters of `fn` (an ir.Function) the kernel may write memory through."""
    carried: dict = {p.value.id: frozenset((p.name,)) for p in fn.params if p.value is not None}
    empty = frozenset()

    def of(values):
        out = empty
        for v in values:
            out |= carried.get(v.id, empty)
        return out

    def add(v, names) -> bool:
        old = carried.get(v.id, empty)
        if names <= old:
            return False
        carried[v.id] = old | names
        return True

    changed = True
    while changed:       # loop-carried values feed back: repeat until nothing grows
        changed = False
        for op in fn.walk():
            c = op.opcode
            if c == "for":
                body = op.regions[0]
                nexts = body.ops[-1].operands if body.ops else []
                for i, res in enumerate(op.results):
                    names = of([op.operands[3 + i]]) | (of([nexts[i]]) if i < len(nexts) else empty)
                    changed |= add(body.args[1 + i], names) | add(res, names)
            elif c == "while":
                cond, body = op.regions
                nexts = body.ops[-1].operands if body.ops else []
                for i, res in enumerate(op.results):
                    names = of([op.operands[i]]) | (of([nexts[i]]) if i < len(nexts) else empty)
                    changed |= add(cond.args[i], names) | add(body.args[i], names) \
                        | add(res, names)
            elif c == "if":
                for i, res in enumerate(op.results):
                    for r in op.regions:
                        if r.ops and i < len(r.ops[-1].operands):
                            changed |= add(res, of([r.ops[-1].operands[i]]))
            elif c not in _FROM_MEMORY:
                names = of(op.operands)
                if names:
                    for res in op.results:
                        changed |= add(res, names)
    written = empty
    for op in fn.walk():
        if op.opcode in _ADDRESSED:
            written |= of(op.operands[:1])
        elif op.opcode not in _LEAVE_MEMORY:
            written |= of(op.operands)
    return written
