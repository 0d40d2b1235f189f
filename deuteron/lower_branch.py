"""Lowering of `if` on kernel values (branches.py): an `ir.If` -> a newt `if` / `else` whose
sides assign one variable per `phi` (what a user's name holds after the `if`).

A mixin of lower.Lowering, as lower_expr.ExprMixin is.
"""
from __future__ import annotations

from . import ir


class BranchMixin:
    def count_branch(self, node, block):
        self._use(node.cond, ("if", node), block)
        self._count(node.then, node.then)
        self._count(node.other, node.other)
        for phi in node.merges:
            self._use(phi.args[0], ("phi", node), node.then)
            self._use(phi.args[1], ("phi", node), node.other)

    def branch(self, node, depth):
        names = [self.names.fresh(phi.name or "v") for phi in node.merges]
        self.emit(f"if {self.ref(node.cond)[0]}:", depth)
        for side, items in ((0, node.then), (1, node.other)):
            if side:
                self.emit("else:", depth)
            start = len(self.lines)
            self.block(items, depth + 1)
            for phi, name in zip(node.merges, names):
                value = self.ref(phi.args[side])[0]
                if value != name:
                    self.emit(f"{name} = {value}", depth + 1)
            if len(self.lines) == start:
                self.emit("pass", depth + 1)
        for phi, name in zip(node.merges, names):
            self.env[id(phi)] = name


def blocks_in(items):
    """Every block nested in `items`: loop bodies and both sides of ifs."""
    for it in items:
        if isinstance(it, ir.Loop):
            yield it.items
            yield from blocks_in(it.items)
        elif isinstance(it, ir.If):
            for side in (it.then, it.other):
                yield side
                yield from blocks_in(side)
