"""TraceError: what deuteron raises for a construct it cannot turn into a kernel.

Every error points at the user's source line (file:line:col, the line, a caret), found by walking
the Python stack out of deuteron and torch to the first frame of user code. Tracing runs the user's
function for real, so the frame that triggered the error is on the stack when it is raised.
"""
from __future__ import annotations

import linecache
import os
import sys

_DEUTERON_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = None


_INTERNAL: dict = {}
_POSITIONS: dict = {}


def _internal(filename: str) -> bool:
    r = _INTERNAL.get(filename)
    if r is None:
        global _TORCH_DIR
        if _TORCH_DIR is None:
            import torch
            _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
        f = os.path.abspath(filename)
        r = _INTERNAL[filename] = (f.startswith(_DEUTERON_DIR + os.sep) or f.startswith(_TORCH_DIR)
                                   or filename.startswith("<frozen"))
    return r


def user_frame(frame=None):
    """The innermost frame of user code on the current stack."""
    f = frame or sys._getframe(1)
    while f is not None and _internal(f.f_code.co_filename):
        f = f.f_back
    return f


class Loc:
    """A user source position: file, line, column (0-based) and the line's text."""

    __slots__ = ("file", "line", "col")

    def __init__(self, file: str, line: int, col: int = 0):
        self.file, self.line, self.col = file, line, col

    @property
    def source_line(self) -> str:
        return linecache.getline(self.file, self.line)

    def __repr__(self):
        return f"{self.file}:{self.line}:{self.col}"


def user_loc(frame=None) -> Loc | None:
    """The position of the innermost frame of user code on the current stack."""
    f = user_frame(frame or sys._getframe(1))
    if f is None:
        return None
    col = 0
    try:  # Python 3.11+: exact column of the instruction being executed
        positions = _POSITIONS.get(f.f_code)
        if positions is None:
            positions = _POSITIONS[f.f_code] = list(f.f_code.co_positions())
        pos = positions[f.f_lasti // 2]
        if pos[0] == f.f_lineno and pos[2] is not None:
            col = pos[2]
    except (AttributeError, IndexError):
        pass
    return Loc(f.f_code.co_filename, f.f_lineno, col)


class TraceError(Exception):
    """An unsupported construct in a @dt.kernel function, at the user's line."""

    def __init__(self, msg: str, loc: Loc | None = None):
        self.msg = msg
        self.loc = loc if loc is not None else user_loc()
        super().__init__(self._format())

    def _format(self) -> str:
        from newt.errors import format_at
        return format_at(self.msg, self.loc)
