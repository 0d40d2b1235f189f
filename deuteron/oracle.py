"""The eager oracle: what `k.ref(*args)` runs. The kernel's own body runs as plain PyTorch, with
every tile of a tuned size the whole (remaining) range of its dimension (a pinned block_size:
tiles of that size), so the autotuner can check each candidate against it.

language.py's names dispatch here while the oracle runs. A tile indexes tensors as the slice
`begin:end` (`RefTile`); a tile pinned to block_size=1 and an `hl.grid` index are ints
(`RefIndex`) that carry the tile attributes too, so `.begin`, `.end`, `.index`, `.block_size`
and `.id` mean in the oracle what they mean in the traced kernel.
"""
from __future__ import annotations

import itertools

import torch
from torch.overrides import TorchFunctionMode

from . import rng
from .ir import BlockSize


def _int(x):
    """A loop bound: a Python int, or a 0-d tensor computed by the kernel (jagged offsets)."""
    return int(x.item()) if isinstance(x, torch.Tensor) else int(x)


class RefTile:
    """A tile in the eager oracle: the range begin:end of its dimension, in one piece."""

    def __init__(self, begin: int, end: int, device, tile_id: int = 0, size: int | None = None):
        self.begin, self.end, self._device, self._id = begin, end, device, tile_id
        self._size = size

    @property
    def block_size(self):
        return self._size or self.end - self.begin

    n = block_size

    @property
    def id(self):
        return self._id

    @property
    def index(self):
        return torch.arange(self.begin, self.end, device=self._device, dtype=torch.int32)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # in a shape (`v.reshape([tile_b, 2, 32])`) a tile is its size; in an index, its range
        f = _sizes if getattr(func, "__name__", "") in _SHAPE_FUNCTIONS else unwrap
        return func(*f(args), **{k: f(v) for k, v in (kwargs or {}).items()})

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


_SHAPE_FUNCTIONS = {"reshape", "view", "expand", "broadcast_to", "new_zeros", "new_ones",
                    "new_empty", "new_full", "zeros", "ones", "empty", "full"}


def _sizes(x):
    if isinstance(x, RefTile):
        return x.end - x.begin
    if isinstance(x, (tuple, list)):
        return type(x)(_sizes(i) for i in x)
    return x


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

    def __init__(self, device, by_row=False):
        self.device = device
        self.seed = 0
        # a kernel with jagged tiles: the launch grid's tiles are one row each, so that each
        # jagged loop has one length (the kernel masks each row's lanes past its length instead)
        self.by_row, self.depth = by_row, 0
        # torch.rand_like & co (rng.py): this run's seeds, the outer loop in progress, the next
        # random op's stream in it, and how many open loops iterate (positions then unknown)
        self.seeds, self.program_index, self.rng_stream, self.partial = rng.Seeds(), -1, 0, 0

    def tile(self, begins, ends, block_size, multi, index_only=False):
        blocks = list(block_size) if isinstance(block_size, (list, tuple)) else [block_size] * len(ends)
        axes = []
        for b, e, bs in zip(begins, ends, blocks):
            b, e = _int(b), _int(e)
            if bs == 1 or index_only:      # an index: iterate over it
                axes.append([RefIndex(i) for i in range(b, e)])
            elif self.by_row and self.depth == 0:
                axes.append([RefTile(i, i + 1, self.device) for i in range(b, e)])
            elif bs is not None and bs > 1:   # a pinned size means tiles of it (an `if` on
                axes.append([RefTile(i, min(i + bs, e), self.device, k, bs)  # tile.begin sees
                             for k, i in enumerate(range(b, e, bs))])          # each)
            else:
                axes.append([RefTile(b, e, self.device)] if e > b else [])
        it = itertools.product(*axes)
        if self.depth == 0:
            self.program_index, self.rng_stream = self.program_index + 1, 0
        whole = all(len(a) == 1 and isinstance(a[0], RefTile) and a[0].begin == 0 for a in axes)
        return self._nested(it if multi else (t[0] for t in it), not whole)

    def _nested(self, it, partial=False):
        """Iterate `it` with the loop depth raised while its body runs."""
        self.depth += 1
        self.partial += partial
        try:
            yield from it
        finally:
            self.depth -= 1
            self.partial -= partial

    def jagged_tile(self, lengths, block_size=None):
        if isinstance(lengths, torch.Tensor) and lengths.numel() > 1:
            if not self.by_row or bool((lengths != lengths.reshape(-1)[0]).any()):
                raise RuntimeError("hl.jagged_tile in the oracle: the lengths must be a value "
                                   "over the launch grid's tiles (one length per row)")
            lengths = lengths.reshape(-1)[0]
        return self.tile([0], [lengths], block_size, False)

    def full(self, shape, value, dtype):
        dims = [s.end - s.begin if isinstance(s, RefTile) else int(s) for s in shape]
        return torch.full(dims, value, dtype=dtype, device=self.device)

    def register_block_size(self, lo, hi=None):
        # the largest size: the oracle's tiles are whole dims, so a block the size of the
        # dim it registers for (hl.zeros([t, bs]) + x[t, tile_n]) lines up with them
        lo, hi = (1, int(lo)) if hi is None else (int(lo), int(hi))
        return BlockSize(hi, -1, lo, hi)

    def arange(self, begin, end, dtype):
        return torch.arange(int(begin), int(end), dtype=dtype, device=self.device)

    def load(self, tensor, index, extra_mask):
        index = _outer(tensor, unwrap(index))
        v = _padded(tensor, index)[_clamped(tensor, index)]
        return torch.where(extra_mask, v, torch.zeros((), dtype=v.dtype, device=v.device))

    def store(self, tensor, index, value, extra_mask):
        index = unwrap(index)
        if any(i is None or i is Ellipsis for i in (index if isinstance(index, tuple) else (index,))):
            old = tensor[index]
            tensor[index] = torch.where(extra_mask, torch.as_tensor(value, dtype=old.dtype), old)
            return
        # only the lanes extra_mask keeps are written: the others may point anywhere
        parts = torch.broadcast_tensors(*_advanced(tensor, index))
        keep = torch.as_tensor(extra_mask, device=tensor.device).expand(parts[0].shape)
        value = torch.as_tensor(value, device=tensor.device).to(tensor.dtype).expand(keep.shape)
        tensor[tuple(p[keep] for p in parts)] = value[keep]

    def atomic(self, kind, tensor, index, value):
        index = unwrap(index)
        value = torch.as_tensor(value, device=tensor.device).to(tensor.dtype)
        if kind in ("add", "max", "min") and any(
                isinstance(i, torch.Tensor) and i.dim() > 0
                for i in (index if isinstance(index, tuple) else (index,))):
            # a scatter may hit one element twice: reduce every hit, in the tensor's storage
            parts = torch.broadcast_tensors(*_advanced(tensor, index))
            lin = sum(p * st for p, st in zip(parts, tensor.stride()))
            vals = value.expand(tensor[index].shape).reshape(lin.shape)
            flat = torch.as_strided(tensor, (tensor.untyped_storage().nbytes()
                                             // tensor.element_size() - tensor.storage_offset(),),
                                    (1,), tensor.storage_offset())
            flat.scatter_reduce_(0, lin.reshape(-1), vals.reshape(-1),
                                 {"add": "sum", "max": "amax", "min": "amin"}[kind])
            return None
        old = tensor[index]
        new = {"add": lambda: old + value, "max": lambda: torch.maximum(old, value),
               "min": lambda: torch.minimum(old, value), "and": lambda: old & value,
               "or": lambda: old | value, "xor": lambda: old ^ value,
               "xchg": lambda: value.expand(old.shape)}[kind]()
        tensor[index] = new
        return None

    def rand(self, shape, seed):
        from newt import dtypes as D
        from newt.interpreter import philox
        from newt.interpreter.values import Tensor
        offs, mult = None, 1
        for s in reversed(list(shape)):
            lo, hi = (s.begin, s.end) if isinstance(s, RefTile) else (0, int(s))
            r = torch.arange(lo, hi, dtype=torch.int64) * mult
            offs = r if offs is None else r[:, None] + offs[None]
            mult *= hi
        # int64 storage of int32 values, as the interpreter keeps integers
        out = philox.rand(int(seed), Tensor(offs, D.int32)).data
        return out.to(self.device)

    def dot(self, a, b, acc, out_dtype):
        r = matmul_in(torch.float32 if acc is None else acc.dtype, a, b)
        if acc is not None:
            r = acc + r
        return r.to(out_dtype) if out_dtype is not None else r


def _padded(tensor, index):
    """The tensor, zero-padded where a tile's slice reaches past a dim's end (lanes an
    extra_mask turns off: Helion's concatenation reads x[t, tile] over out's width)."""
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in index):
        return tensor
    need, axis = list(tensor.shape), 0
    for i in index:
        if i is None:
            continue
        if isinstance(i, slice) and i.stop is not None and i.stop > need[axis]:
            need[axis] = i.stop
        axis += 1
    if need == list(tensor.shape):
        return tensor
    big = tensor.new_zeros(need)
    big[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return big


def _clamped(tensor, index):
    """Tensor indices clamped into range: lanes that extra_mask turns off may point anywhere
    (the kernel does not read them)."""
    index = index if isinstance(index, tuple) else (index,)
    out, axis = [], 0
    for i in index:
        if i is None:
            out.append(i)
            continue
        if isinstance(i, torch.Tensor) and i.dtype != torch.bool:
            i = i.clamp(0, tensor.shape[axis] - 1)
        out.append(i)
        axis += 1
    return tuple(out)


def _outer(tensor, index):
    """Several index tensors each take their own axes of the result, as in the traced kernel
    (memory.py), not torch's one broadcast shape: then every entry becomes an index tensor
    placed on its axes (`_advanced`)."""
    entries = index if isinstance(index, tuple) else (index,)
    if sum(isinstance(i, torch.Tensor) and i.dim() > 0 for i in entries) < 2 or any(
            i is None or i is Ellipsis for i in entries):
        return index
    return _advanced(tensor, index)


def _advanced(tensor, index):
    """`index` (ints, slices, one integer tensor) as broadcast index tensors, in torch's
    positional order (the tensor index's dims where its axis is)."""
    index = index if isinstance(index, tuple) else (index,)
    index = index + (slice(None),) * (tensor.dim() - len(index))
    parts, shapes = [], []
    for axis, i in enumerate(index):
        if isinstance(i, slice):
            parts.append(torch.arange(*i.indices(tensor.shape[axis]), device=tensor.device))
        else:
            parts.append(torch.as_tensor(i, device=tensor.device))
        shapes.append(parts[-1].dim())
    total = sum(shapes)
    out, at = [], 0
    for p, n in zip(parts, shapes):
        out.append(p.reshape([1] * at + list(p.shape) + [1] * (total - at - n)))
        at += n
    return tuple(out)


def matmul_in(dtype, a, b):
    """a @ b computed in `dtype` (the accumulator's), as the kernel's dot accumulates."""
    wide = dtype if dtype.is_floating_point and dtype.itemsize >= 4 else torch.float32
    with torch._C.DisableTorchFunction():
        return torch.matmul(a.to(wide), b.to(wide))


_LOW = (torch.float16, torch.bfloat16)


def _low(t):
    return isinstance(t, torch.Tensor) and (t.dtype in _LOW or t.dtype.itemsize == 1)


class OracleMode(TorchFunctionMode):
    """Active while the oracle runs: matmuls whose torch form refuses mixed dtypes or rounds
    each product to fp8 (`torch.addmm(acc_fp32, x_fp16, y_fp16)`, `torch.baddbmm`, fp8 @ fp8)
    compute in the accumulator's precision, as the kernel does."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in rng.FUNCTIONS:
            from . import language
            run = language._active[-1] if language._active else None
            if isinstance(run, RefRun) and run.depth:      # in a tile loop: the kernel's numbers
                return rng.eager(run, func, args, kwargs)
        if func in (torch.addmm, torch.baddbmm) and len(args) >= 3:
            acc, a, b = args[:3]
            beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
            if isinstance(acc, torch.Tensor) and (acc.dtype != a.dtype or _low(a) and
                                                  a.dtype.itemsize == 1):
                return acc * beta + alpha * matmul_in(acc.dtype, a, b).to(acc.dtype)
        if func in (torch.mm, torch.bmm) and (len(args) == 3 or "out_dtype" in kwargs):
            # torch.bmm(a, b, out_dtype): accumulate in fp32, as the kernel's dot does
            out = args[2] if len(args) == 3 else kwargs["out_dtype"]
            return matmul_in(torch.float32, args[0], args[1]).to(out)
        if func in (torch.matmul, torch.mm, torch.bmm, torch.Tensor.__matmul__) and len(args) == 2:
            a, b = args
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and (
                    a.dtype.itemsize == 1 and a.dtype.is_floating_point):
                return matmul_in(torch.float32, a, b)
        return func(*args, **kwargs)
