"""What users write inside `@dt.kernel` functions: `dt.tile`, `dt.zeros`, `dt.full`, dtypes, the
math names, and `dt.Config`.

These names dispatch to the active run of a kernel: tracing (trace.Tracer: tiles are proxies,
the body runs once and is recorded) or the eager oracle (`RefRun`: a tile is the whole dimension,
so the same body runs as plain PyTorch). Outside a @dt.kernel function they raise.
"""
from __future__ import annotations

import dataclasses
import itertools

import torch

float16, bfloat16, float32, float64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
int8, int16, int32, int64, bool_ = torch.int8, torch.int16, torch.int32, torch.int64, torch.bool

# math names (torch's: they trace through __torch_function__ and run eagerly in the oracle)
exp, log, sqrt, rsqrt, sin, cos, tanh, erf = (torch.exp, torch.log, torch.sqrt, torch.rsqrt,
                                             torch.sin, torch.cos, torch.tanh, torch.erf)
exp2, log2 = torch.exp2, torch.log2
sigmoid, relu, abs, floor, ceil = torch.sigmoid, torch.relu, torch.abs, torch.floor, torch.ceil
where, maximum, minimum, clamp, matmul, addmm = (torch.where, torch.maximum, torch.minimum,
                                                 torch.clamp, torch.matmul, torch.addmm)

_active: list = []     # the run in progress (innermost last); pushed/popped by kernel.py only


def _run():
    if not _active:
        raise RuntimeError("dt.tile / dt.zeros / dt.full can only be used inside a @dt.kernel "
                           "function while it runs")
    return _active[-1]


def tile(sizes, block_size=None):
    """`for t in dt.tile(n)` / `for tm, tn in dt.tile([m, n])`: iterate over tiles of the given
    extents. The outermost tile loop of a kernel becomes the launch grid, inner ones device loops.
    `block_size` pins the tile size (one int, or one per dim); otherwise the autotuner picks it.
    A tile pinned to block_size=1 is an index: tensors indexed with it lose that dim, as with an
    int (e.g. the batch*head dim of attention)."""
    return _run().tile(sizes, block_size)


def zeros(shape, dtype=torch.float32):
    """A tile of zeros; `shape` lists tiles (and ints), e.g. `dt.zeros([tile_m, tile_n])`."""
    return _run().full(shape, 0, dtype)


def full(shape, value, dtype=torch.float32):
    """A tile filled with the Python number `value`."""
    return _run().full(shape, value, dtype)


@dataclasses.dataclass(frozen=True)
class Config:
    """One point of the search space. `block_sizes` lists the tile size of every tunable
    `dt.tile` dimension in the order the kernel meets them; `group_size` is the program
    ordering of kernels with a matmul (GROUP_SIZE_M of the tutorial kernel)."""
    block_sizes: tuple = ()
    num_warps: int = 4
    num_stages: int = 3
    group_size: int = 8

    def __post_init__(self):
        object.__setattr__(self, "block_sizes", tuple(int(b) for b in self.block_sizes))

    def __str__(self):
        return (f"dt.Config(block_sizes={list(self.block_sizes)}, num_warps={self.num_warps}, "
                f"num_stages={self.num_stages}, group_size={self.group_size})")

    def to_dict(self):
        return dataclasses.asdict(self) | {"block_sizes": list(self.block_sizes)}

    @classmethod
    def from_dict(cls, d):
        return cls(block_sizes=tuple(d["block_sizes"]), num_warps=int(d["num_warps"]),
                   num_stages=int(d["num_stages"]), group_size=int(d.get("group_size", 8)))


# ----------------------------------------------------------------------------- the eager oracle

class RefTile:
    """A tile in the eager oracle: the whole dimension. Indexes tensors as `slice(0, n)`."""

    def __init__(self, n: int):
        self.n, self.begin, self.block_size = n, 0, n

    @property
    def index(self):
        return torch.arange(self.n, device=_run().device, dtype=torch.int32)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*_unwrap(args), **{k: _unwrap(v) for k, v in (kwargs or {}).items()})

    def __repr__(self):
        return f"<dt ref tile 0:{self.n}>"


def _unwrap(x):
    if isinstance(x, RefTile):
        return slice(0, x.n)
    if isinstance(x, tuple):
        return tuple(_unwrap(i) for i in x)
    if isinstance(x, list):
        return [_unwrap(i) for i in x]
    return x


class RefRun:
    """The oracle: run the function body as eager PyTorch on `device`."""

    def __init__(self, device):
        self.device = device

    def tile(self, sizes, block_size=None):
        multi = isinstance(sizes, (list, tuple))
        sizes = list(sizes) if multi else [sizes]
        blocks = list(block_size) if isinstance(block_size, (list, tuple)) else [block_size] * len(sizes)
        # a tile pinned to block_size=1 is an index: iterate over it; the others are whole dims
        axes = [range(int(s)) if b == 1 else [RefTile(int(s))] for s, b in zip(sizes, blocks)]
        it = itertools.product(*axes)
        return it if multi else (t[0] for t in it)

    def full(self, shape, value, dtype):
        dims = [s.n if isinstance(s, RefTile) else int(s) for s in shape]
        return torch.full(dims, value, dtype=dtype, device=self.device)
