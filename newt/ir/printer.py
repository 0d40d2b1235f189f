"""Readable text form of a Function (NEWT_DEBUG dumps, test assertions, error messages).

    func add_kernel(%x_ptr.0: *fp32 {divisible_by_16}, %n.1: i32) {
      %2 = program_id {axis=0} : i32
      %3 = arange {start=0, end=1024} : i32[1024]  {layout=...}
      %4 = binary.add %2, %3 : i32[1024]
      %5 = for %lb, %ub, %st iter(%acc.6 = %init) {num_stages=3} : fp32[128] {
      ^(%i.7: i32, %acc.8: fp32[128]):
        ...
        yield %9
      }
    }

Value numbers are local to one printout (assigned in order of appearance), so dumps stay short
and stable; `Value.attrs` (pass facts such as layouts and vector widths) are shown after the
type, `Op.attrs` in braces after the opcode.
"""
from __future__ import annotations

import os

from .core import Block, Function, Op, Value

_INLINE_ATTR_OPS = {"binary": "op", "unary": "op", "reduce": "kind", "atomic": "kind",
                    "scan": "kind"}


def _fmt_attr(v) -> str:
    if isinstance(v, str):
        return repr(v)
    if hasattr(v, "short") and not isinstance(v, type):  # a dtype
        return v.short
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_fmt_attr(x)}" for k, x in v.items()) + "}"
    return str(v)


def _fmt_attrs(attrs: dict, skip=()) -> str:
    # False / "" flags are defaults: hiding them keeps dumps short (a constant's value is kept)
    items = [(k, v) for k, v in attrs.items()
             if k not in skip and (k == "value" or (v is not False and v != ""))]
    if not items:
        return ""
    parts = []
    for k, v in items:
        parts.append(k if v is True else f"{k}={_fmt_attr(v)}")
    return " {" + ", ".join(parts) + "}"


class _Printer:
    def __init__(self, source_lines=False):
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.source_lines = source_lines   # a `# file:line: source` comment where it changes
        self.last_loc = None

    def name(self, v: Value) -> str:
        n = self.names.get(v.id)
        if n is None:
            k = len(self.names)
            n = f"%{v.name}.{k}" if v.name else f"%{k}"
            self.names[v.id] = n
        return n

    def decl(self, v: Value) -> str:
        return f"{self.name(v)}: {v.type}{_fmt_attrs(v.attrs)}"

    def block(self, block: Block, indent: int):
        pad = "  " * indent
        if block.args:
            self.lines.append(pad[:-2] + "^(" + ", ".join(self.decl(a) for a in block.args) + "):")
        for op in block.ops:
            self.op(op, indent)

    def op(self, op: Op, indent: int):
        pad = "  " * indent
        loc = op.loc
        if self.source_lines and loc is not None and (loc.file, loc.line) != self.last_loc:
            self.last_loc = (loc.file, loc.line)
            text = loc.source_line.strip()
            self.lines.append(f"{pad}# {os.path.basename(loc.file)}:{loc.line}"
                              + (f": {text}" if text else ""))
        lhs = ""
        if op.results:
            lhs = ", ".join(self.name(r) for r in op.results) + " = "
        opname = op.opcode
        skip = ()
        key = _INLINE_ATTR_OPS.get(op.opcode)
        if key and key in op.attrs:
            opname = f"{op.opcode}.{op.attrs[key]}"
            skip = (key,)
        operands = ", ".join(self.name(v) if isinstance(v, Value) else "<?>" for v in op.operands)
        attrs = _fmt_attrs({k: v for k, v in op.attrs.items() if v is not None}, skip)
        types = ""
        if op.results:
            types = " : " + ", ".join(str(r.type) for r in op.results)
            facts = [_fmt_attrs(r.attrs) for r in op.results if r.attrs]
            if facts:
                types += " " + "".join(facts)
        line = f"{pad}{lhs}{opname}"
        if operands:
            line += " " + operands
        line += attrs + types
        if not op.regions:
            self.lines.append(line)
            return
        self.lines.append(line + " {")
        for i, r in enumerate(op.regions):
            if i:
                self.lines.append(pad + "} {")
            self.block(r, indent + 1)
        self.lines.append(pad + "}")


def format_function(fn: Function, source_lines: bool = False) -> str:
    """`source_lines`: each op's Python line as a `#` comment above it (NEWT_DEBUG, NEWT_DUMP)."""
    p = _Printer(source_lines)
    params = ", ".join(p.decl(prm.value) if prm.value is not None else f"{prm.name}: {prm.dtype.short}"
                       for prm in fn.params)
    head = f"func {fn.name}({params})" + _fmt_attrs(fn.attrs) + " {"
    p.lines.append(head)
    # block args that are not params (should not exist, but show them rather than hide them)
    param_ids = {prm.value.id for prm in fn.params if prm.value is not None}
    extra = [a for a in fn.body.args if a.id not in param_ids]
    if extra:
        p.lines.append("^(" + ", ".join(p.decl(a) for a in extra) + "):")
    for op in fn.body.ops:
        p.op(op, 1)
    p.lines.append("}")
    return "\n".join(p.lines)


def format_op(op: Op) -> str:
    p = _Printer()
    p.op(op, 0)
    return "\n".join(p.lines)


def print_function(fn: Function, file=None):
    print(format_function(fn), file=file)
