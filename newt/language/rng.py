"""Kernel-language random numbers: Philox4x32 keyed by (seed, offset), the stream Triton's
`tl.rand` family gives (part of `newt.language`, re-exported as `nl.*`)."""
from __future__ import annotations

from . import builtin

# ----------------------------------------------------------------------------- random numbers

@builtin
def rand(seed, offset, n_rounds=10):
    """Uniform fp32 in [0, 1) from Philox4x32 keyed by (seed, offset); same stream as Triton's."""


@builtin
def randn(seed, offset, n_rounds=10):
    """Standard normal fp32 from Philox4x32 (Box-Muller)."""


@builtin
def randint(seed, offset, n_rounds=10):
    """A uint32 from Philox4x32 (the first of the four outputs)."""


@builtin
def randint4x(seed, offset, n_rounds=10):
    """Four uint32 streams from Philox4x32."""
