"""Which program of which kernel the interpreter is running, and where in the user's source.

launch.py sets `current` before running each program; ops read the program id from it, and error
messages use `user_location()` to point at the kernel line being executed (the innermost frame
outside this package).
"""
from __future__ import annotations

import dis
import functools
import linecache
import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class Program:
    __slots__ = ("kernel_name", "pid", "grid", "codes")

    def __init__(self):
        self.kernel_name, self.pid, self.grid = "<none>", (0, 0, 0), (1, 1, 1)
        self.codes = set()  # code objects of the kernel and the @jit functions it calls


current = Program()


def _is_ours(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == _PKG_DIR


def user_frame():
    f = first = sys._getframe(1)
    while f is not None and f.f_code not in current.codes:
        f = f.f_back
    if f is None:  # not inside a kernel: the first caller outside this package
        f = first
        while f is not None and _is_ours(f.f_code.co_filename):
            f = f.f_back
    return f


def describe(filename: str, lineno: int) -> str:
    line = linecache.getline(filename, lineno).strip()
    return f"{filename}:{lineno}" + (f"\n    {line}" if line else "")


def user_location() -> str:
    f = user_frame()
    return "<unknown>" if f is None else describe(f.f_code.co_filename, f.f_lineno)


def traceback_location(tb) -> str:
    """The innermost frame of a traceback that is user code (kernel source)."""
    found = None
    while tb is not None:
        if tb.tb_frame.f_code in current.codes:
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return "<unknown>" if found is None else describe(*found)


@functools.lru_cache(maxsize=None)
def _assert_jumps(code) -> frozenset:
    """Bytecode offsets of the conditional jumps that guard `assert` statements in `code`."""
    ins = list(dis.get_instructions(code))
    return frozenset(a.offset for a, b in zip(ins, ins[1:]) if b.opname == "LOAD_ASSERTION_ERROR")


def in_assert(frame) -> bool:
    """The frame is testing an `assert` statement's condition (a block then means every element:
    device_assert). Pytest rewrites the bytecode of asserts in test modules: those are
    recognised by their source line."""
    if frame.f_lasti in _assert_jumps(frame.f_code):
        return True
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip()
    return line.startswith("assert ") or line.startswith("assert(")
