"""Launch errors name the user's line that launched the kernel.

Where it sits: beside jit.py: the slow paths of a launch (a key not seen before, a bad grid, a
value that does not fit its type, a failed cuLaunchKernel) are wrapped by
`reported_at_launch_site`; the per-call path is not.
"""
from __future__ import annotations

import functools
import sys

from .errors import DriverError, LaunchError, NewtError


def launch_site() -> str | None:
    """`file:line` and source of the innermost frame outside newt: the user's launch."""
    import linecache
    import os
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(here)
                             or f.f_code.co_filename.startswith("<newt launcher")
                             or f.f_code.co_filename == functools.__file__):
        f = f.f_back
    if f is None:
        return None
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f": {line}" if line else "")


def reported_at_launch_site(method):
    """A launch error raised by `method` also names the user's line that launched the kernel
    (the traceback shows it too, but under frames of newt's own)."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except NewtError as e:
            if isinstance(e, (LaunchError, DriverError)) and not getattr(e, "_newt_site", False):
                site = launch_site()
                if site and e.args and isinstance(e.args[0], str):
                    e.args = (f"{e.args[0]}\n  launched at {site}",) + e.args[1:]
                e._newt_site = True
            raise
    return wrapper
