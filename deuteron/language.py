"""What users write inside `@dt.kernel` functions: `import deuteron.language as hl` holds every
`hl.*` name deuteron supports, with Helion's meaning (`hl.tile`, `hl.grid`, `hl.zeros`, `hl.full`,
`hl.arange`, `hl.register_block_size`, `hl.register_tunable`, `hl.barrier`, `hl.specialize`,
`hl.load` / `hl.store` with `extra_mask`, the atomics, `hl.rand`, `hl.static_range`, `hl.dot`,
`hl.cumsum`, `hl.reduce`, the tile attribute functions), plus dtypes, math names and `Config`.

These names dispatch to the active run of a kernel: tracing (trace.Tracer: tiles are proxies,
the body runs once and is recorded), the eager oracle (oracle.RefRun: a tile is the whole range
of its dimension, so the same body runs as plain PyTorch) or a replayed launch plan (plan.py).
Outside a @dt.kernel function they raise.
"""
from __future__ import annotations

import builtins

import torch

from .config import Config  # noqa: F401  (hl.Config / dt.Config)

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
        raise RuntimeError("hl.tile, hl.zeros and the other hl.* functions can only be used "
                           "inside a @dt.kernel function while it runs")
    return _active[-1]


def _bounds(begin_or_end, end_or_none):
    if end_or_none is None:
        ends = begin_or_end
        multi = isinstance(ends, (list, tuple))
        ends = list(ends) if multi else [ends]
        return [0] * len(ends), ends, multi
    multi = isinstance(begin_or_end, (list, tuple))
    begins = list(begin_or_end) if multi else [begin_or_end]
    ends = list(end_or_none) if isinstance(end_or_none, (list, tuple)) else [end_or_none]
    if len(begins) != len(ends):
        raise ValueError("hl.tile(begin, end): begin and end need one entry per dimension")
    return begins, ends, multi


def tile(begin_or_end, end_or_none=None, block_size=None):
    """`for t in hl.tile(n)`, `for tm, tn in hl.tile([m, n])`, `for t in hl.tile(begin, end)`:
    iterate over tiles of the given ranges. The outermost tile loop of a kernel becomes the
    launch grid, inner ones device loops. `block_size` pins the tile size (one int, or one per
    dim; or a value of `hl.register_block_size`); otherwise the autotuner picks it. A tile pinned
    to block_size=1 is an index: tensors indexed with it lose that dim, as with an int (e.g.
    the batch*head dim of attention). Bounds of an inner loop may be values the kernel loaded
    (jagged offsets)."""
    begins, ends, multi = _bounds(begin_or_end, end_or_none)
    return _run().tile(begins, ends, block_size, multi)


def jagged_tile(lengths, block_size=None):
    """`for t in hl.jagged_tile(n)` inside a tile loop, `n` a value over that loop's tile (one
    length per row, e.g. `offsets[tile_b.index + 1] - offsets[tile_b]`): tiles of 0..n[row] for
    each row at once. The loop runs to the largest length of the rows a program holds; loads,
    stores and reductions that involve the tile and the rows skip each row's lanes past its
    length (they read 0 and are not written or reduced). A host int or a scalar `n` is
    `hl.tile(n)`."""
    return _run().jagged_tile(lengths, block_size)


vtile = jagged_tile


def grid(begin_or_end, end_or_none=None):
    """`for i in hl.grid(n)`: iterate over single indices (a tile of block_size=1): tensors indexed
    with `i` lose that dim; `i` takes part in integer arithmetic."""
    begins, ends, multi = _bounds(begin_or_end, end_or_none)
    return _run().tile(begins, ends, 1, multi, index_only=True)


def zeros(shape, dtype=torch.float32):
    """A tile of zeros; `shape` lists tiles (and ints), e.g. `dt.zeros([tile_m, tile_n])`."""
    return _run().full(shape, 0, dtype)


def full(shape, value, dtype=torch.float32):
    """A tile filled with the Python number `value`."""
    return _run().full(shape, value, dtype)


def arange(begin_or_end, end_or_none=None, step=1, dtype=torch.int32):
    """`hl.arange(n)` / `hl.arange(begin, end)`: the tile of integers begin..end-1 (int32), a
    full dim of the tile it takes part in. Bounds are host ints (a registered block size is
    one)."""
    begin, end = (0, begin_or_end) if end_or_none is None else (begin_or_end, end_or_none)
    if step != 1:
        raise ValueError("hl.arange: only step=1")
    return _run().arange(begin, end, dtype)


def register_block_size(min_or_max, max_or_none=None):
    """A block size the autotuner picks (a power of two in [min, max]), usable as an int in
    host code and as `block_size=` of any number of `hl.tile` loops, which then share it."""
    return _run().register_block_size(min_or_max, max_or_none)


def register_reduction_dim(size):
    """A dim that kernels take whole (Helion's older spelling for marking a reduction dim):
    deuteron takes a host int as a full dim wherever a tile shape lists it, so this returns
    the size as an int."""
    return int(size)


def register_tunable(name, fragment):
    """A named value the autotuner picks among the fragment's choices
    (`deuteron.autotuner.PowerOfTwoFragment`, `IntegerFragment`, `EnumFragment`,
    `BooleanFragment`); `dt.Config(name=value)` sets it, the fragment's default otherwise."""
    from .autotuner import fragment_default
    run = _run()
    note = getattr(run, "note_tunable", None)
    if note is not None:
        note(name, fragment)
    cfg = getattr(run, "config", None)
    default = fragment_default(fragment)
    return cfg.tunable(name, default) if cfg is not None else default


def barrier():
    """Helion's grid-wide barrier between two `hl.tile` loops: every tile of the loop before it
    finishes before any tile of the loop after it starts. Each top-level tile loop of a
    deuteron kernel is a launch of its own on one stream, which already orders them, so the
    barrier only checks where it stands (between loops, not inside one)."""
    run = _run()
    check = getattr(run, "barrier", None)
    if check is not None:
        check()


def specialize(value):
    """Bake a host value (a size) into the kernel: deuteron takes host ints as they are."""
    if isinstance(value, (list, tuple)):
        return type(value)(specialize(v) for v in value)
    return int(value)


class constexpr:
    """`hl.constexpr` as an annotation (`eps: hl.constexpr`): host numbers are baked in anyway."""

    def __init__(self, value=None):
        self.value = value


def static_range(begin_or_end, end_or_none=None, step=1):
    """A loop the kernel unrolls: a plain Python range, run while tracing."""
    if end_or_none is None:
        return builtins.range(int(begin_or_end))
    return builtins.range(int(begin_or_end), int(end_or_none), int(step))


def load(tensor, index, extra_mask=None, eviction_policy=None):
    """`tensor[index]`, with lanes where `extra_mask` is False reading 0."""
    if extra_mask is None:
        return tensor[tuple(index) if isinstance(index, list) else index]
    return _run().load(tensor, _index(index), extra_mask)


def store(tensor, index, value, extra_mask=None):
    """`tensor[index] = value`, skipping lanes where `extra_mask` is False."""
    if extra_mask is None:
        tensor[_index(index)] = value
        return None
    return _run().store(tensor, _index(index), value, extra_mask)


def _index(index):
    return tuple(index) if isinstance(index, list) else index


def _atomic(kind):
    def atomic(target, index, value, sem="relaxed"):
        return _run().atomic(kind, target, _index(index), value)
    atomic.__name__ = f"atomic_{kind}"
    what = {"add": "target[index] + value", "max": "max(target[index], value)",
            "min": "min(target[index], value)", "and": "target[index] & value",
            "or": "target[index] | value", "xor": "target[index] ^ value",
            "xchg": "value"}[kind]
    atomic.__doc__ = (f"`target[index] = {what}`, atomically per element (relaxed; a scatter "
                      "may hit one element many times). Returns None (Helion returns the old "
                      "values).")
    return atomic


atomic_add, atomic_max, atomic_min = _atomic("add"), _atomic("max"), _atomic("min")
atomic_and, atomic_or, atomic_xor, atomic_xchg = (_atomic("and"), _atomic("or"), _atomic("xor"),
                                                 _atomic("xchg"))


def rand(shape, seed, device=None):
    """Uniform fp32 in [0, 1) over a tile shape: Philox keyed by `seed` (a host int) and each
    element's position in the whole (untiled) shape, so any tiling draws the same numbers."""
    return _run().rand(shape, seed)


def cumsum(x, dim, reverse=False):
    """Inclusive prefix sum of a tile value along `dim`, which must be a whole dim (a full
    slice ':'); `reverse=True` sums from the end."""
    run = _run()
    if getattr(run, "oracle", False):
        return x.flip(dim).cumsum(dim).flip(dim) if reverse else x.cumsum(dim)
    return run.cumsum(x, dim, reverse)


def associative_scan(combine_fn, input, dim, reverse=False):
    """Inclusive scan of a tile value (or a tuple of them, broadcast to one shape) along `dim`
    with `combine_fn(left..., right...)`, an associative function of the elements (one argument
    per operand for each side) returning one value per operand; `reverse=True` scans from the
    end. The dim is a full slice ':' or the launch grid's tile (each program then scans its own
    tile, a partial result only `hl.atomic_add` may take)."""
    run = _run()
    if getattr(run, "oracle", False):
        from .scans import eager_scan
        return eager_scan(combine_fn, input, dim, reverse)
    return run.associative_scan(combine_fn, input, dim, reverse)


def reduce(combine_fn, input_tensor, dim=None, other=0, keep_dims=False):
    """A tile value (or a tuple of them, broadcast to one shape) reduced along `dim` (every dim
    when None) with `combine_fn`, an associative and commutative function of the elements: one
    value per operand for each side, unpacked (`f(a0, a1, b0, b1)`) or, for several operands,
    as two tuples (`f((a0, a1), (b0, b1))`); it returns one value per operand. Padded lanes of
    the reduced dim hold `other` (one number, or one per operand): make it the combine's
    identity. The dim is a full slice ':', an inner loop's tile (each iteration reduces its
    own tile) or the launch grid's tile when one tile covers it. Returns a value (or a tuple),
    the dim dropped unless `keep_dims`."""
    run = _run()
    if getattr(run, "oracle", False):
        from .scans import eager_reduce
        return eager_reduce(combine_fn, input_tensor, dim, other, keep_dims)
    return run.combine_reduce(combine_fn, input_tensor, dim, other, keep_dims)


def split(x):
    """The two halves of a tile value whose last dim has 2 elements (`x[..., 0]`, `x[..., 1]`)."""
    run = _run()
    if getattr(run, "oracle", False):
        return tuple(x.unbind(-1))
    from .shapes import split as traced
    return traced(run, x)


def join(a, b):
    """Two tile values (broadcast to one shape) stacked along a new last dim of 2."""
    run = _run()
    if getattr(run, "oracle", False):
        a, b = torch.broadcast_tensors(torch.as_tensor(a), torch.as_tensor(b))
        dtype = torch.promote_types(a.dtype, b.dtype)
        return torch.stack([a.to(dtype), b.to(dtype)], -1)
    from .shapes import join as traced
    return traced(run, a, b)


def dot(a, b, acc=None, out_dtype=None):
    """`a @ b` (+ `acc`), computed in fp32 (the accumulator's precision) for 16-bit inputs."""
    run = _run()
    return run.dot(a, b, acc, out_dtype)


def tile_index(t):
    return t.index


def tile_begin(t):
    return t.begin


def tile_end(t):
    return t.end


def tile_block_size(t):
    return t.block_size


def tile_id(t):
    return t.id


from .oracle import RefRun, RefTile  # noqa: E402,F401  (kernel.py runs the oracle)
