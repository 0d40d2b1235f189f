"""Kernel-language names that reach below the block model: compiler assumptions and inline
PTX (part of `newt.language`, re-exported as `nl.*`)."""
from __future__ import annotations

from . import builtin

# ----------------------------------------------------------------------------- assumptions, inline assembly, division


@builtin
def assume(cond):
    """Hint: `cond` (a scalar or block condition) is true. Compiles to nothing; the interpreter
    ignores it as well."""


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    """Run the PTX `asm` once per element of the (broadcast) `args`: `$0`.. are the outputs
    (one per `dtype`, a dtype or a tuple of dtypes), then the inputs; `constraints` is the
    comma-separated list of register constraints ("=r,r": one 32-bit output, one input; `r` 32-
    bit, `l` 64-bit, `h` 16-bit, `f` fp32, `d` fp64). Returns a block (or a tuple of blocks).
    Differences from Triton: only `pack=1` (one element per call); the interpreter cannot run
    PTX, so a kernel using it raises there."""


@builtin
def fdiv(x, y, ieee_rounding=False):
    """`x / y` in floating point: as the `/` operator (fp32: Triton's `div.full`), or correctly
    rounded with `ieee_rounding=True` (as `nl.div_rn`)."""
