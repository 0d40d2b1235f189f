"""Kernel-language names that move elements between positions of a block: joins and splits,
flips, gathers, sorts, top-k and histograms (part of `newt.language`, re-exported as `nl.*`).

Names only, as in newt/language/__init__.py: the compiler builds IR for them
(newt/frontend/movement.py) and the interpreter runs them with torch (newt/interpreter/ops.py).
"""
from __future__ import annotations

from . import builtin

# ----------------------------------------------------------------------------- joins, splits, gathers


@builtin
def join(a, b):
    """Stack two blocks (broadcast to one shape S) along a new last axis: shape S + [2],
    `join(a, b)[..., 0] == a`. Scalars give a block of 2."""


@builtin
def split(a):
    """The inverse of `join`: a block whose last axis has size 2 -> the two blocks
    `(a[..., 0], a[..., 1])` (scalars when `a` is 1-D). Also a method: `a.split()`."""


@builtin
def interleave(a, b):
    """`join(a, b)` with its last two axes merged: a[..., 0], b[..., 0], a[..., 1], ..."""


@builtin
def cat(input, other, can_reorder=False):
    """`input` and `other` (one shape) concatenated along their first axis: a block with that
    axis doubled. Triton only promises some order of the elements (`can_reorder=True`); newt
    keeps the concatenation order."""


@builtin
def ravel(x, can_reorder=False):
    """`x` as a 1-D block (row-major order)."""


@builtin
def swizzle2d(i, j, size_i, size_j, size_g):
    """Reorder the (i, j) indices of a size_i x size_j grid so that consecutive linear indices
    walk groups of `size_g` rows column by column (the last group may have fewer rows):
    returns the new (i, j). Used to order matmul tiles for L2 reuse."""


@builtin
def flip(x, dim=None):
    """`x` reversed along `dim` (default: the last axis)."""


@builtin
def gather(src, index, axis):
    """`out[i][j][k] = src[i][index[i][j][k]][k]` for axis 1 (likewise for any axis): a block of
    `index`'s shape. `index` is an integer block of `src`'s rank whose other dims equal
    `src`'s. An index outside `[0, src.shape[axis])` gives 0 (Triton: undefined)."""


# ----------------------------------------------------------------------------- sorting, histograms


@builtin
def sort(x, dim=None, descending=False):
    """`x` sorted along `dim` (default: the last axis; its size a power of two), ascending
    unless `descending`. NaN sorts above every number (last ascending, first descending), as
    in torch.sort. Through shared memory: a bitonic sorting network."""


@builtin
def topk(x, k, dim=None):
    """The `k` largest elements of `x` along `dim` (default: the last axis), in descending
    order: a block whose `dim` has size `k` (a power of two, at most the axis' size)."""


@builtin
def histogram(input, num_bins, mask=None):
    """Counts of the values of the 1-D integer block `input` in bins 0..num_bins-1 of width 1:
    an int32 block of `num_bins` (a power of two). Elements where `mask` is false, and values
    outside [0, num_bins), are not counted (Triton: out-of-range values are undefined)."""
