"""Structured control flow: for, while, if, yield, condition, return, barrier.

Carried values are C locals (arrays for blocks) declared before the construct; the region's
arguments and the op's results are the same C variables (Emitter.alias), and `yield` assigns
them. All conditions are scalars, uniform across the program, so every thread takes the same
path and barriers inside loops and branches are safe.
"""
from __future__ import annotations

from ..ir.core import is_block
from .emitter import handles


def assign(em, dst_name: str, dst_val, src_val):
    """dst (a C variable holding a value of dst_val's type/layout) = src_val."""
    if is_block(dst_val.type):
        lay = dst_val.attrs["layout"]
        with em.slots(lay.nslots) as s:
            em.emit(f"{dst_name}[{s}] = {em.at(src_val, s, lay)};")
    else:
        em.emit(f"{dst_name} = {em.name(src_val)};")


def _carry(em, args, inits):
    """Declare one C variable per carried value and copy the initial values in."""
    for a, init in zip(args, inits):
        n = em.declare(a)
        assign(em, n, a, init)


def _is_const(v, positive: bool) -> bool:
    op = v.owner
    return getattr(op, "opcode", None) == "constant" and (op.attrs["value"] > 0) == positive


@handles("for")
def _for(em, op):
    lb, ub, step = op.operands[:3]
    body = op.regions[0]
    iv, carried = body.args[0], body.args[1:]
    _carry(em, carried, op.operands[3:])
    for res, a in zip(op.results, carried):
        em.alias(res, a)
    i = em.name(iv)
    if _is_const(step, True):
        cond = f"{i} < {em.name(ub)}"
    elif _is_const(step, False):
        cond = f"{i} > {em.name(ub)}"
    else:
        cond = f"({em.name(step)} > 0 ? {i} < {em.name(ub)} : {i} > {em.name(ub)})"
    head = f"for ({em.ctype(iv)} {i} = {em.name(lb)}; {cond}; {i} += {em.name(step)})"
    with em.scope(head):
        em.block(body)


@handles("while")
def _while(em, op):
    cond, body = op.regions
    _carry(em, cond.args, op.operands)
    for group in (body.args, op.results):
        for v, a in zip(group, cond.args):
            em.alias(v, a)
    with em.scope("while (true)"):
        em.block(cond)
        em.block(body)


@handles("condition")
def _condition(em, op):
    em.emit(f"if (!{em.name(op.operands[0])}) break;")


@handles("if")
def _if(em, op):
    for r in op.results:
        em.declare(r)
    then, other = op.regions
    with em.scope(f"if ({em.name(op.operands[0])})"):
        em.block(then)
    if other.ops and not (len(other.ops) == 1 and not other.ops[0].operands):
        with em.scope("else"):
            em.block(other)


@handles("yield")
def _yield(em, op):
    block = op.parent
    parent = block.parent if block is not None else None
    if parent is None or not op.operands:
        return
    if parent.opcode == "for":
        targets = block.args[1:]
    elif parent.opcode == "while":
        targets = parent.regions[0].args
    else:
        targets = parent.results
    names = [em.name(t) for t in targets]
    sources = [em.name(v) for v in op.operands]
    # parallel assignment: go through temporaries when a yield reads a variable it also writes
    clash = any(src in names and src != dst for src, dst in zip(sources, names))
    if clash:
        tmps = []
        for t, v in zip(targets, op.operands):
            tmp = em.fresh("y")
            tv = em.ctype(t)
            if is_block(t.type):
                em.emit(f"{tv} {tmp}[{em.nslots(t)}];")
            else:
                em.emit(f"{tv} {tmp};")
            assign(em, tmp, t, v)
            tmps.append(tmp)
        for t, tmp in zip(targets, tmps):
            if is_block(t.type):
                with em.slots(em.nslots(t)) as s:
                    em.emit(f"{em.name(t)}[{s}] = {tmp}[{s}];")
            else:
                em.emit(f"{em.name(t)} = {tmp};")
        return
    for t, v in zip(targets, op.operands):
        if em.name(t) != em.name(v):
            assign(em, em.name(t), t, v)


@handles("return")
def _return(em, op):
    em.emit("return;")


@handles("barrier")
def _barrier(em, op):
    em.barrier()
