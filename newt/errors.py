"""User-facing errors. Each points at the user's source (file:line:col, the line, a caret) or,
for runtime failures, names the kernel and what to do next."""
from __future__ import annotations


class NewtError(Exception):
    """Base of every newt error."""


class CompilationError(NewtError):
    """An unsupported construct or a type error in a kernel, at a source location."""

    def __init__(self, msg: str, loc=None):
        self.msg, self.loc = msg, loc
        super().__init__(self._format())

    def _format(self) -> str:
        return format_at(self.msg, self.loc)


def format_at(msg: str, loc) -> str:
    """`file:line:col: msg`, then the source line and a caret under the column (any `loc` with
    file, line, col and source_line; deuteron's TraceError uses it too)."""
    if loc is None:
        return msg
    where = f"{loc.file}:{loc.line}:{loc.col}"
    line = loc.source_line.rstrip("\n")
    if not line:
        return f"{where}: {msg}"
    indent = len(line) - len(line.lstrip())
    caret = " " * max(loc.col, indent) + "^"
    return f"{where}: {msg}\n    {line}\n    {caret}"


class NVRTCError(NewtError):
    """NVRTC rejected the generated CUDA C++: carries the log and the numbered source."""


class DriverError(NewtError):
    """A CUDA driver call failed: carries the CUresult name and the kernel's name."""


class LaunchError(NewtError):
    """Bad launch arguments: wrong count or names, CPU tensors, bad grid or num_warps."""


class KernelError(NewtError):
    """A kernel failed while the interpreter ran it (a Python error raised by one of its lines):
    names the kernel, the program id and the line; the original error is its __cause__."""


class OutOfBoundsError(KernelError, IndexError):
    """The interpreter caught an unmasked access outside its tensor (the GPU would read or write
    memory it does not own): names the argument, the offset, the program and the line."""
