"""Program order of global memory between the threads of a program: barriers where a scalar
access and another thread's access to the same tensor could otherwise pass each other.

A program is one sequential program to its author (and to the interpreter), but the compiled
program splits it across threads: a scalar store or scalar atomic is performed by thread 0
alone (codegen/memory.py, codegen/atomics.py), a scalar load by every thread, a block access by
the threads that own its elements. Without a barrier between them, in

    if nl.load(count) == 0:      # every thread reads
        nl.store(count, 1)       # thread 0 writes

a slow warp can read count after thread 0 wrote it, take the other branch and disagree with
its program (the spin lock of a layer norm backward lost rows this way). This pass inserts a
`barrier` before an access when, since the last barrier, an access that other threads may
perform hit the same tensor and one of the two writes (_CONFLICT): any load then a thread-0
write, a thread-0 write then any load, a block store then a scalar load or a thread-0 write,
a thread-0 write or a scalar load then a block store. Two block accesses are left alone (each
thread touches its own elements, as in Triton), and so are two thread-0 writes (one thread).

Tensors are told apart by the pointer argument an address is computed from; an address traced
to no argument may alias anything. Loops are walked twice, so that the accesses at the end of
an iteration meet those at the start of the next; both arms of an `if` start from the state
before it and the state after is their union. A scalar atomic ends with a barrier of its own
(its old value is broadcast through shared memory), so it also starts a fresh state.
"""
from __future__ import annotations

from ..ir.core import Op, is_block

_THROUGH = ("addptr", "splat", "broadcast", "expand_dims", "reshape", "convert_layout",
            "permute")
ANY = "?"   # an address whose tensor is unknown


def _root(v, params):
    """The id of the pointer argument `v` is computed from (through pointer arithmetic, shape
    changes and loop-carried pointers, followed to their initial values), or ANY."""
    for _ in range(256):
        if v.id in params:
            return v.id
        o = v.owner
        if isinstance(o, Op):
            if o.opcode in _THROUGH:
                v = o.operands[0]
            elif o.opcode in ("for", "while"):          # a loop's result: its initial value
                v = o.operands[(3 if o.opcode == "for" else 0) + v.index]
            else:
                return ANY
            continue
        loop = getattr(o, "parent", None)               # a region's argument
        if loop is None or loop.opcode not in ("for", "while"):
            return ANY
        if loop.opcode == "for":
            if v.index == 0:                            # the induction variable
                return ANY
            v = loop.operands[2 + v.index]
        else:
            v = loop.operands[v.index]
    return ANY


def _access(op, params):
    """(kind, root) of a global access, None for other ops. Kinds: 'sload' (every thread reads
    one address), 'bload' (the owners of a block's elements read), 'w0' (thread 0 writes),
    'wall' (the owners of a block's elements write)."""
    c = op.opcode
    if c not in ("load", "store", "atomic") or not op.operands[0].dtype.is_ptr():
        return None
    block = is_block(op.operands[0].type)
    if c == "load":
        return ("bload" if block else "sload"), _root(op.operands[0], params)
    return ("wall" if block else "w0"), _root(op.operands[0], params)


# (earlier, later) pairs that may be performed by different threads, one of them writing
_CONFLICT = {("sload", "w0"), ("bload", "w0"), ("w0", "sload"), ("w0", "bload"),
             ("wall", "sload"), ("wall", "w0"), ("w0", "wall"), ("sload", "wall")}


def _conflicts(state, kind, root):
    return any((k, kind) in _CONFLICT and (r == root or ANY in (r, root)) for k, r in state)


def _walk(block, state, params, need):
    """The state (set of (kind, root) since the last barrier) after `block`, adding to `need`
    the ops that must be preceded by a barrier."""
    state = set(state)
    for op in block.ops:
        if op.opcode == "barrier":
            state = set()
            continue
        if op.regions:
            if op.opcode in ("for", "while"):
                out = state
                for _ in range(2):
                    out = _regions(op, state | out, params, need)
                state = state | out
            else:
                state = _regions(op, state, params, need)
            continue
        acc = _access(op, params)
        if acc is None:
            continue
        kind, root = acc
        if _conflicts(state, kind, root):
            need.add(op)
            state = set()
        if op.opcode == "atomic" and kind == "w0":
            state = set()      # its broadcast ends with a barrier
        else:
            state.add(acc)
    return state


def _regions(op, state, params, need):
    out = set()
    for r in op.regions:
        out |= _walk(r, state, params, need)
    return out


def order_threads(fn, opts=None):
    params = {a.id for a in fn.body.args}
    need: set = set()
    _walk(fn.body, set(), params, need)
    _insert(fn.body, need)


def _insert(block, need):
    ops = []
    for op in block.ops:
        if op in need:
            b = Op("barrier", attrs={"why": "thread order"}, loc=op.loc)
            b.parent = block
            ops.append(b)
        ops.append(op)
        for r in op.regions:
            _insert(r, need)
    block.ops[:] = ops
