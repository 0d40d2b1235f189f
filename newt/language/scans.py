"""Kernel-language names for reductions and scans with a user combine function, and cumprod
(part of `newt.language`, re-exported as `nl.*`).

The combine function is a `@newt.jit` function of 2*k scalars (the k operands of the left
element, then of the right one) returning k values; the compiler inlines it once into a device
function (newt/frontend/combine.py) that the scan's code calls at every step
(newt/codegen/scan_fn.py). It must be associative; it need not be commutative.
"""
from __future__ import annotations

from . import builtin

# ----------------------------------------------------------------------------- reductions, scans with combine functions


@builtin
def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduce `input` (a block, or a tuple of blocks of one shape) along `axis` (all axes if
    None) with the associative `combine_fn(a0, .., b0, ..)`, which returns one value per
    operand. Returns one block (or a tuple). The order of combination is a tree, so
    floating-point results may round differently from a sequential loop."""


@builtin
def associative_scan(input, axis, combine_fn, reverse=False):
    """Inclusive scan of `input` (a block or a tuple of blocks of one shape) along `axis` with
    the associative `combine_fn`. Element i is `combine(..combine(x0, x1).., xi)`; with
    `reverse=True` the scan runs from the end (as Triton: the element further right is the
    left argument)."""


@builtin
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """`exp(x - max) / sum(exp(x - max))` along `dim` (default 0, as Triton); the division is
    `nl.fdiv(.., ieee_rounding)`. The result has `x`'s shape (Triton subtracts a reduction
    taken with `keep_dims`, so it only broadcasts for dim 0 or with keep_dims=True)."""


@builtin
def xor_sum(input, axis=None, keep_dims=False):
    """Bitwise xor of the integer block `input` over `axis` (all axes if None)."""


@builtin
def reduce_or(input, axis, keep_dims=False):
    """Bitwise or of the integer (or bool) block `input` over `axis` (all axes if None), the
    result keeping `input`'s dtype; `keep_dims` keeps the reduced axis as size 1."""


@builtin
def map_elementwise(scalar_fn, *args, pack=1):
    """Apply the `@newt.jit` function `scalar_fn` to every element of `args` (broadcast to one
    shape): a block per value it returns (a tuple for several). Its control flow runs per
    element. `pack` is accepted; one element is passed per call."""


@builtin
def cumprod(input, axis=0, reverse=False):
    """Inclusive product along `axis`. bf16 inputs are computed and returned in fp32, as in
    Triton; other types keep their type (integers wrap)."""
