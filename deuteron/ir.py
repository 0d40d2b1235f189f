"""The trace IR: what tracing a tile loop records, and what lower.py turns into newt source.

    Dim      one axis of a tile: a `dt.tile` dimension (grid or device loop), a full slice
             (`x[tile, :]`, block = next power of two of its extent) or ONE (a size-1 axis)
    Value    one traced tile expression: op, operands, dims, torch dtype and `pad`, the value its
             padded lanes are known to hold (0 after a masked load, None when unknown). Reductions
             read `pad` to decide whether a `where(mask, v, identity)` is needed first.
    Loop     a device loop (an inner `dt.tile`): its dims, the items recorded in it, and the
             loop-carried variables found by comparing the user's locals before and after;
             a `while` on a kernel value is a Loop without dims whose test is one more
             carried value (`cond`: computed before the loop, and again at the end of its body).
    Program  one outer `dt.tile` loop = one newt kernel: grid dims, items, tensors touched.
"""
from __future__ import annotations

import dataclasses
import math

import torch


class Dim:
    """A tile axis. kind: "grid" (outer loop), "loop" (inner loop), "full" (a `:` slice)."""

    def __init__(self, kind: str, extent: int, block: int | None = None, var: str | None = None,
                 index: int = -1):
        self.kind, self.extent, self.block, self.var, self.index = kind, int(extent), block, var, index
        self.in_dot = False       # block sizes of dims a dot reads must be >= 16
        self.loop = None          # the inner Loop iterating over this dim (kind "loop")
        self.letter = None        # set by lower.py: "m" -> offs_m, mask_m, M, BLOCK_SIZE_M
        self.tunable = kind != "full" and block is None
        # block_size=1 pinned: the tile is an index (tensors indexed with it lose that dim)
        self.is_index = kind != "full" and block == 1
        self.lo, self.hi = 0, self.extent   # bounds: host ints, or scalar Values (jagged loops)
        self.users = []           # a registered block size's placeholder: the dims using it
        self.block_of = None      # hl.zeros([.., bs]) with bs registered: that config slot
        self.jagged = None        # hl.jagged_tile: the lengths Value (over enclosing tile dims)

    def describe(self) -> str:
        what = {"grid": "tile", "loop": "tile", "full": "full slice ':'"}[self.kind]
        return f"{self.var or what} (extent {self.extent})"

    def __repr__(self):
        return f"Dim({self.kind}, {self.var}, {self.extent})"


class _One:
    """A size-1 axis (keepdim reductions, `v[:, None]`)."""

    kind = "one"
    extent = 1

    def describe(self):
        return "1"

    def __repr__(self):
        return "ONE"


ONE = _One()


def same_dim(x, y) -> bool:
    """x is y, or one is the dim of a registered block size used as a size (`hl.zeros([tm,
    bs])`) and the other that block size's dim or a tile dim pinned to it: one block wide
    both, so they line up as in Helion (padded lanes of such a tile are the user's to mask)."""
    if x is y:
        return True
    bx, by = getattr(x, "block_of", None), getattr(y, "block_of", None)
    if bx is None and by is None:
        return False
    sx = getattr(getattr(x, "shared", None), "index", None)
    sy = getattr(getattr(y, "shared", None), "index", None)
    return (bx is not None and bx in (by, sy)) or (by is not None and by == sx)


def _unit(d) -> bool:
    return d.kind == "full" and d.extent == 1 and d.block_of is None


def dims_match(a, b) -> bool:
    return a is not None and len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b))


def broadcast_dims(a: tuple, b: tuple):
    """Right-aligned broadcast of two dim tuples; returns None when they disagree. Of two
    same_dim dims the block-size one is kept: it outlives the inner loop of the tile one."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else ONE
        y = b[-i] if i <= len(b) else ONE
        if x is y or y is ONE:
            out.append(x)
        elif x is ONE:
            out.append(y)
        elif _unit(y):            # `r[t, :]` of an [m, 1] tensor broadcasts as in torch
            out.append(x)
        elif _unit(x):
            out.append(y)
        elif same_dim(x, y):
            out.append(x if x.block_of is not None else y)
        else:
            return None
    return tuple(reversed(out))


@dataclasses.dataclass(eq=False)
class TensorRef:
    """A real torch tensor the kernel reads or writes; becomes `<name>_ptr` + strides."""
    tensor: torch.Tensor
    name: str = ""
    loaded: bool = False
    stored: bool = False
    local: str | None = None      # the user's variable holding it when the loop ended
    workspace: bool = False       # allocated by deuteron (split.py), not the user's


class Value:
    """A traced tile expression (the user-facing proxy methods live in proxy.py)."""

    __slots__ = ("op", "args", "dims", "dtype", "pad", "attrs", "loc", "name", "id", "block",
                 "tracer", "__weakref__")

    def __init__(self, tracer, op, args, dims, dtype, pad=None, loc=None, **attrs):
        self.tracer, self.op, self.args, self.dims, self.dtype = tracer, op, list(args), tuple(dims), dtype
        self.pad, self.attrs, self.loc, self.name = pad, attrs, loc, None
        self.id = tracer.next_id() if tracer is not None else -1
        self.block = tracer.current_block if tracer is not None else None

    @property
    def rank(self):
        return len(self.dims)

    def __repr__(self):
        return f"<dt tile value {self.op} {self.name or self.id}: {list(self.dims)} {self.dtype}>"


@dataclasses.dataclass(eq=False)
class Carried:
    name: str
    init: object           # Value defined before the loop (or a Python number)
    final: Value           # its value at the end of one iteration


@dataclasses.dataclass(eq=False)
class Loop:
    dims: list
    items: list = dataclasses.field(default_factory=list)
    carried: list = dataclasses.field(default_factory=list)
    parent: object = None
    loc: object = None
    closed: bool = False   # its body has been traced: values over its dims are out of scope
    cond: object = None    # a `while` on a kernel value (no dims): the Carried of its test


@dataclasses.dataclass(eq=False)
class If:
    """An `if` on a scalar kernel value (branches.py): both sides' items, and the `phi` values
    (recorded after it in the enclosing block) that name what a variable holds after it."""
    cond: object
    then: list = dataclasses.field(default_factory=list)
    other: list = dataclasses.field(default_factory=list)
    merges: list = dataclasses.field(default_factory=list)
    parent: object = None
    loc: object = None


@dataclasses.dataclass(eq=False)
class Program:
    """One outer tile loop: becomes one @newt.jit kernel and one launch."""
    name: str
    grid: list                                     # grid Dims, outermost first
    items: list = dataclasses.field(default_factory=list)
    tensors: list = dataclasses.field(default_factory=list)   # TensorRef, first use first
    dims: list = dataclasses.field(default_factory=list)      # every Dim, creation order
    has_dot: bool = False
    fp32_dot: bool = False
    loc: object = None
    rng: int = 0            # random ops (rng.py): the kernel then takes a `seed` argument
    seed: int = 0           # that argument's value for the launch of this run
    index: int = 0          # the program's place among the run's tile loops (its seed)
    host_seeds: list = dataclasses.field(default_factory=list)   # hl.rand seeds: arguments

    def tensor_ref(self, t: torch.Tensor) -> TensorRef:
        for r in self.tensors:
            if r.tensor is t:
                return r
        r = TensorRef(t)
        self.tensors.append(r)
        return r

    def block_dim(self, bs) -> Dim:
        """The dim of a registered block size used as a size: bs wide, no padding."""
        for d in self.dims:
            if d.block_of == bs.index:
                return d
        d = Dim("full", int(bs), block=int(bs))
        d.block_of = bs.index
        self.dims.append(d)
        return d

    def full_dim(self, extent: int) -> Dim:
        """Full slices of equal extent share one Dim, so `x[t, :] * w[:]` lines up."""
        for d in self.dims:
            if d.kind == "full" and d.extent == extent:
                return d
        d = Dim("full", extent, block=next_pow2(extent))
        self.dims.append(d)
        return d


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def identity(kind: str, dtype: torch.dtype):
    """The identity element of a reduction, used for padded lanes."""
    if kind in ("sum", "mean"):
        return 0
    if dtype.is_floating_point:
        return -math.inf if kind == "max" else math.inf
    if dtype == torch.bool:
        return kind == "min"
    info = torch.iinfo(dtype)
    return info.min if kind == "max" else info.max


DYNAMIC_HINT = 1024   # the extent the autotuner assumes for a loop whose bounds are kernel values


class BlockSize(int):
    """What `hl.register_block_size` returns: an int in host code (this run's value) that also
    names its slot of the config, so tiles given `block_size=` it share one tuned size."""

    def __new__(cls, value, index=-1, lo=1, hi=None):
        self = super().__new__(cls, value)
        self.index, self.lo, self.hi = index, lo, hi
        return self

    @property
    def value(self):
        return int(self)


def default_block(lo: int, hi: int) -> int:
    """The block size of a registered range before tuning: 64, within [lo, hi], a power of two."""
    b = next_pow2(max(lo, 1))
    while b < 64 and b * 2 <= hi:
        b *= 2
    return b


def is_zero(x) -> bool:
    """A tile bound that is the host int 0 (bounds may also be Values computed in the kernel)."""
    return isinstance(x, int) and x == 0
