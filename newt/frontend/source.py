"""Kernel source: the parsed `def` of a Python function and the locations of its nodes in the
user's file (real file line numbers, so errors point where the user looks).

Parsing is cached per code object: building IR for a kernel a second time (another
specialization) does not re-read or re-parse the source.
"""
from __future__ import annotations

import ast
import inspect
import linecache

from ..errors import CompilationError
from ..ir.core import Loc


class Source:
    __slots__ = ("fn", "node", "file", "first_line", "lines", "indent", "name", "_locs")

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        code = fn.__code__
        self.file = code.co_filename
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise CompilationError(f"cannot read the source of {fn.__qualname__}: {e} (kernels "
                                   f"must be defined in a file, or registered in linecache)")
        first = max(first, 1)
        self.first_line = first
        self.lines = lines
        indent = len(lines[0]) - len(lines[0].lstrip())
        self.indent = indent
        text = "".join(ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines)
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            raise CompilationError(f"syntax error in kernel source: {e.msg}",
                                   self._loc(e.lineno or 1, e.offset or 0))
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not defs:
            raise CompilationError(f"{self.name} is not a function defined with `def` "
                                   f"(lambdas cannot be kernels)", self._loc(1, 0))
        self.node = defs[0]
        self._locs = {}

    def _loc(self, lineno: int, col: int) -> Loc:
        line = self.first_line + lineno - 1
        if 0 < lineno <= len(self.lines):
            src = self.lines[lineno - 1]
        else:
            src = linecache.getline(self.file, line)
        return Loc(self.file, line, col + self.indent, src.rstrip("\n"), self.name)

    def loc(self, node) -> Loc:
        key = (getattr(node, "lineno", 1), getattr(node, "col_offset", 0))
        loc = self._locs.get(key)
        if loc is None:
            loc = self._locs[key] = self._loc(*key)
        return loc

    def text(self, node) -> str:
        try:
            return ast.unparse(node)
        except Exception:  # noqa: BLE001
            return "<expr>"


_cache: dict = {}


def get_source(fn) -> Source:
    code = getattr(fn, "__code__", None)
    if code is None:
        raise CompilationError(f"{fn!r} is not a Python function")
    src = _cache.get(code)
    if src is None:
        src = _cache[code] = Source(fn)
    return src
