"""CUDA graph capture and a kernel's first call: what may happen inside a capture.

Called by kernel.py only where a call would autotune (no tuned config in memory or on disk): a
tuning times candidate launches and compares them with the oracle, which needs synchronizing
calls a stream capture forbids (they would invalidate the capture and leave the stream in an
error state). Inside a capture the call stops before any GPU work with an error saying to warm
the kernel up first; the capture itself stays valid. A first call whose config is known (pinned,
a single candidate, or tuned earlier) traces, compiles and launches inside the capture as newt's
first launches do.
"""
from __future__ import annotations


class CaptureError(RuntimeError):
    """A call that cannot run inside a CUDA graph capture; nothing was launched."""


def refuse_tuning_in_capture(kernel):
    """Called while a capture runs (kernel.capturing) by a call that would autotune."""
    raise CaptureError(
        f"deuteron kernel {kernel.__name__}: this call would autotune (no tuned config for "
        "these shapes yet), and a CUDA graph capture cannot hold the timing runs. Warm it up "
        "first: call it once with the same shapes before capturing (a warm-up call), or pin a "
        "config with @dt.kernel(config=...). Nothing was launched; the capture is still valid.")
