"""Which names a piece of kernel source assigns and reads: the facts the control-flow walker
(control.py) needs to decide what a loop or a branch carries. Pure AST inspection; no IR.
"""
from __future__ import annotations

import ast

from .semantic import is_number
from .values import Tensor, leaves


def assigned_names(stmts) -> list:
    """Names a list of statements may assign, in first-assignment order."""
    seen: dict = {}
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                seen.setdefault(n.id, n.lineno)
    return list(seen)


_LOADS: dict = {}


def name_loads(fn_node) -> dict:
    """name -> the Name nodes that read it, in a function (cached per parsed function)."""
    d = _LOADS.get(fn_node)   # keyed by the node itself: parsed sources are cached for good
    if d is None:
        d = _LOADS[fn_node] = {}
        for n in ast.walk(fn_node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                d.setdefault(n.id, []).append(n)
    return d


def within(n, expr) -> bool:
    """True when the node `n` is part of the expression `expr`."""
    return any(n is m for m in ast.walk(expr))


def written_first(body, name) -> bool:
    """True when the first top-level statement of `body` that mentions `name` is a plain
    assignment to it whose right-hand side does not read it."""
    for s in body:
        mentions = [n for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == name]
        if not mentions:
            continue
        if not isinstance(s, (ast.Assign, ast.AnnAssign)) or s.value is None:
            return False
        return all(isinstance(n.ctx, ast.Store) for n in mentions)
    return False


def carryable(v) -> bool:
    """A value a loop or a branch can carry: blocks and numbers (a non-empty tuple of them)."""
    return all(isinstance(x, Tensor) or is_number(x) for x in leaves(v)) and \
        not (isinstance(v, (tuple, list)) and not v)
