"""Lowering of scans and reductions with a combine function (scans.py): the combine function's
block -> a `@newt.jit` function printed before the kernel, the scan -> `nl.associative_scan`,
hl.reduce's `creduce` -> `nl.reduce` (padded lanes set to `other` first), `item` -> one of their
results, `expand` -> `nl.broadcast_to`; and of `hl.split` / `hl.join` (shapes.py) -> `nl.split`
/ `nl.join`.

A mixin of lower.Lowering, as lower_expr.ExprMixin is: the combine block is printed with the
same statement and expression code as a loop body, into lines of its own (`self.helpers`).
"""
from __future__ import annotations

from .spelling import ATOM, literal


class ScanMixin:
    def scan_expr(self, v):
        op = v.op
        if op == "scan":
            xs = ", ".join(self.ref(x)[0] for x in v.args)
            rev = ", reverse=True" if v.attrs["reverse"] else ""
            fn = self._combine_function(v)
            return f"nl.associative_scan(({xs},), {v.attrs['axis']}, {fn}{rev})", ATOM
        if op == "creduce":
            axis, rank = v.attrs["axis"], v.args[0].rank
            xs = []
            for x, o in zip(v.args, v.attrs["others"]):
                e = self.ref(x)[0]
                if v.attrs["masked"]:
                    e = f"nl.where({self.mask(v.attrs['rdim'], axis, rank)}, {e}, {literal(o)})"
                xs.append(e)
            keep = ", keep_dims=True" if v.attrs["keepdim"] else ""
            fn = self._combine_function(v)
            return f"nl.reduce(({', '.join(xs)},), {axis}, {fn}{keep})", ATOM
        if op == "item":
            return f"{self.atom(v.args[0])}[{v.attrs['index']}]", ATOM
        if op == "split":
            return f"nl.split({self.ref(v.args[0])[0]})", ATOM
        if op == "join":
            return f"nl.join({self.ref(v.args[0])[0]}, {self.ref(v.args[1])[0]})", ATOM
        if op == "expand":
            return f"nl.broadcast_to({self.ref(v.args[0])[0]}, {self._shape(v)})", ATOM
        raise AssertionError(op)

    def _combine_function(self, v):
        params, outs, body = v.attrs["combine"]
        name = self.names.fresh("combine")
        saved = self.lines, self.env
        self.lines, self.env = [], {}
        names = []
        for p in params:
            names.append(self.names.fresh(p.attrs["name"]))
            self.env[id(p)] = names[-1]
        self._count(body, body)
        self.block([it for it in body if it.op != "param"], 1)
        self.emit("return " + ", ".join(self.ref(o)[0] for o in outs), 1)
        lines = ["@newt.jit", f"def {name}({', '.join(names)}):"] + self.lines + ["", ""]
        self.lines, self.env = saved
        self.helpers += lines
        return name
