"""The eager oracle: what `k.ref(*args)` runs. The kernel's own body runs as plain PyTorch, with
every tile the whole (remaining) range of its dimension, so the autotuner can check each
candidate against it.

language.py's names dispatch here while the oracle runs. A tile indexes tensors as the slice
`begin:end` (`RefTile`); a tile pinned to block_size=1 and an `hl.grid` index are ints
(`RefIndex`) that carry the tile attributes too, so `.begin`, `.end`, `.index`, `.block_size`
and `.id` mean in the oracle what they mean in the traced kernel.
"""
from __future__ import annotations

import itertools

import torch


def _int(x):
    """A loop bound: a Python int, or a 0-d tensor computed by the kernel (jagged offsets)."""
    return int(x.item()) if isinstance(x, torch.Tensor) else int(x)


class RefTile:
    """A tile in the eager oracle: the range begin:end of its dimension, in one piece."""

    def __init__(self, begin: int, end: int, device):
        self.begin, self.end, self._device = begin, end, device

    @property
    def block_size(self):
        return self.end - self.begin

    n = block_size

    @property
    def id(self):
        return 0

    @property
    def index(self):
        return torch.arange(self.begin, self.end, device=self._device, dtype=torch.int32)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*unwrap(args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})

    def __repr__(self):
        return f"<dt ref tile {self.begin}:{self.end}>"


class RefIndex(int):
    """A block_size=1 tile or an `hl.grid` index in the oracle: an int with the tile attributes."""

    @property
    def begin(self):
        return int(self)

    @property
    def end(self):
        return int(self) + 1

    @property
    def index(self):
        return int(self)

    block_size = 1

    @property
    def id(self):
        return int(self)


def unwrap(x):
    if isinstance(x, RefTile):
        return slice(x.begin, x.end)
    if isinstance(x, tuple):
        return tuple(unwrap(i) for i in x)
    if isinstance(x, list):
        return [unwrap(i) for i in x]
    return x


class RefRun:
    """The oracle: run the function body as eager PyTorch on `device`."""

    oracle = True

    def __init__(self, device):
        self.device = device
        self.seed = 0

    def tile(self, begins, ends, block_size, multi, index_only=False):
        blocks = list(block_size) if isinstance(block_size, (list, tuple)) else [block_size] * len(ends)
        axes = []
        for b, e, bs in zip(begins, ends, blocks):
            b, e = _int(b), _int(e)
            if bs == 1 or index_only:      # an index: iterate over it
                axes.append([RefIndex(i) for i in range(b, e)])
            else:
                axes.append([RefTile(b, e, self.device)] if e > b else [])
        it = itertools.product(*axes)
        return it if multi else (t[0] for t in it)

    def full(self, shape, value, dtype):
        dims = [s.block_size if isinstance(s, RefTile) else int(s) for s in shape]
        return torch.full(dims, value, dtype=dtype, device=self.device)
