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


@builtin
def rand4x(seed, offset, n_rounds=10):
    """Four uniform fp32 streams in [0, 1) from Philox4x32 (`rand` is the first)."""


@builtin
def randn4x(seed, offset, n_rounds=10):
    """Four standard normal fp32 streams: Box-Muller on the two pairs of `rand4x` (`randn` is
    the first)."""


@builtin
def uint_to_uniform_float(x):
    """A random 32- or 64-bit integer block as fp32 in [0, 1), as `rand` maps Philox's output:
    read as signed, negatives folded with `-x - 1`, times 2**-31 (2**-63 for 64 bits)."""


@builtin
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniform blocks to two standard normal blocks, `(r * cos(t), r * sin(t))`
    with `r = sqrt(-2 log(max(u1, 1e-7)))`, `t = 2 pi u2`."""
