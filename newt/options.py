"""Compile options: one frozen dataclass, part of every cache key (DESIGN.md, principle 7).

Everything that changes the generated code or binary lives here, so that two compiles with equal
Options and equal specialization produce the same cubin, and the disk cache may reuse it.
"""
from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Options:
    arch: str = "sm_90a"          # exact target: sm_80, sm_86, sm_89, sm_90a
    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False           # device asserts stay in either way; debug adds -lineinfo
    nvrtc_version: str = ""       # filled by the runtime: a new NVRTC must not reuse old cubins

    def __post_init__(self):
        w = self.num_warps
        if not (isinstance(w, int) and 1 <= w <= 32 and w & (w - 1) == 0):
            raise ValueError(f"num_warps must be a power of two from 1 to 32, got {w!r}")
        if not (isinstance(self.num_stages, int) and 1 <= self.num_stages <= 8):
            raise ValueError(f"num_stages must be an int from 1 to 8, got {self.num_stages!r}")

    @property
    def num_threads(self) -> int:
        return 32 * self.num_warps

    @property
    def sm(self) -> int:
        """Compute capability as an int: sm_90a -> 90."""
        return int(self.arch[3:5])


# The few NEWT_* knobs, read in one place.
def env_flag(name: str) -> bool:
    return os.environ.get(name, "0") not in ("", "0", "false", "False")


def interpret_enabled() -> bool:
    return env_flag("NEWT_INTERPRET")


def debug_enabled() -> bool:
    return env_flag("NEWT_DEBUG")


def debug_level() -> int:
    """NEWT_DEBUG=1: the IR after the passes and the CUDA C++; NEWT_DEBUG=2: also the IR after
    every pass (newt/passes/__init__.py)."""
    v = os.environ.get("NEWT_DEBUG", "0")
    return int(v) if v.isdigit() else int(env_flag("NEWT_DEBUG"))


def cache_dir() -> str:
    d = os.environ.get("NEWT_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "newt")


class _Flags:
    """Process-wide switches, read once from the environment at import. Tests flip `interpret`
    through the `target` fixture; the launch path reads the attribute, never the environment."""

    def __init__(self):
        self.interpret = interpret_enabled()
        self.debug = debug_enabled()
        self.debug_level = debug_level()
        # newt.profiler's launch recorder while a session records kernels (profiler/kernels.py);
        # read by kernel.run, never by the kernel[grid](...) fast path
        self.launch_hook = None


flags = _Flags()
