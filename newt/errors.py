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
        if self.loc is None:
            return self.msg
        where = f"{self.loc.file}:{self.loc.line}:{self.loc.col}"
        line = self.loc.source_line.rstrip("\n")
        if not line:
            return f"{where}: {self.msg}"
        indent = len(line) - len(line.lstrip())
        caret = " " * max(self.loc.col, indent) + "^"
        return f"{where}: {self.msg}\n    {line}\n    {caret}"


class NVRTCError(NewtError):
    """NVRTC rejected the generated CUDA C++: carries the log and the numbered source."""


class DriverError(NewtError):
    """A CUDA driver call failed: carries the CUresult name and the kernel's name."""


class LaunchError(NewtError):
    """Bad launch arguments: wrong count or names, CPU tensors, bad grid or num_warps."""
