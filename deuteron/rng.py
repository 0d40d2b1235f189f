"""torch's random tensors inside a tile loop: `torch.rand_like(v)`, `torch.randn_like(v)`,
`torch.rand([tile_m, tile_n])`, `torch.randn(...)`, as Helion's kernels write dropout.

Each element is Philox4x32 (newt's `nl.rand` / `nl.randn`, Triton's stream) keyed by a seed and
by the element's row-major position in the untiled shape, so any tiling draws the same numbers
and the oracle draws them too: `torch.manual_seed(s); k(x)` equals `torch.manual_seed(s);
k.ref(x)`. The seed is new on every call, as eager torch's numbers are: a run draws one base from
torch's default (CPU) generator at its first random op, and the i-th tile loop's kernel takes
`base + (i << 16)` as its `seed` argument (a runtime int, so a new seed compiles nothing), the
k-th random op of that loop using `seed + k`. Tracing alone draws nothing; the autotuner runs
the oracle and every candidate from the same generator state (autotune/bench.py).

Consumed by proxy.py (the torch ops while tracing), oracle.py (the same ops while `k.ref` runs),
trace.py / plan.py / kernel.py (the seed of each launch) and lower_expr.py (the `rand` node).
"""
from __future__ import annotations

import torch

from . import ir
from .errors import TraceError

FUNCTIONS = {torch.rand_like: ("rand", True), torch.randn_like: ("randn", True),
             torch.rand: ("rand", False), torch.randn: ("randn", False)}


def draw_base() -> int:
    return int(torch.randint(1 << 30, ()).item())


class Seeds:
    """The seeds of one run: drawn once, at the first random op that launches."""

    def __init__(self):
        self.base = None

    def of(self, program_index: int) -> int:
        if self.base is None:
            self.base = draw_base()
        return self.base + ((program_index & 0x3FFF) << 16)


def _float_dtype(dtype):
    if dtype is not None and dtype not in (torch.float16, torch.bfloat16, torch.float32,
                                           torch.float64):
        raise TraceError(f"torch.rand/randn in a tile loop make floats, not {dtype}")
    return dtype


def _dims_of_shape(tracer, shape):
    from .trace import Tile
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = tuple(shape[0])
    dims = []
    for s in shape:
        if isinstance(s, Tile) and not s.dim.is_index:
            dims.append(s.dim)
        elif isinstance(s, int) and not isinstance(s, bool):
            dims.append(ir.ONE if s == 1 else tracer.program.full_dim(s))
        else:
            raise TraceError(f"torch.rand/randn shapes in a tile loop hold tiles and ints, "
                             f"got {s!r}")
    return tuple(dims)


def traced(tracer, func, *args, dtype=None, **kwargs):
    """The `rand` node of torch.rand_like(v) / torch.rand(shape) (and randn) while tracing."""
    kind, like = FUNCTIONS[func]
    dims = tuple(args[0].dims) if like else _dims_of_shape(tracer, args)
    want = _float_dtype(dtype) or (args[0].dtype if like and args[0].dtype.is_floating_point
                                   else torch.float32)
    _check_positions(tracer, dims)
    prog = tracer.program
    stream = getattr(prog, "rng", 0)
    prog.rng = stream + 1
    v = tracer.new("rand", [], dims, torch.float32, None, seed=None, stream=stream,
                   normal=kind == "randn")
    from .ops import cast
    return v if want == torch.float32 else cast(tracer, v, want)


def _check_positions(tracer, dims):
    """Positions must mean the same in the kernel and in the oracle, and differ between the
    programs and iterations of every loop open here (else each would repeat one draw)."""
    where = "torch.rand_like / torch.rand in a tile loop"
    for d in dims:
        if d is ir.ONE:
            continue
        if d.jagged is not None or not isinstance(d.hi, int) or not isinstance(d.lo, int) \
                or d.lo != 0:
            raise TraceError(f"{where}: tile {d.describe()} does not start at 0 or has bounds "
                             "computed in the kernel")
    for d in tracer.program.dims:
        if d.kind == "full" or (d.loop is not None and d.loop.closed):
            continue
        if d.is_index or (d.block is not None and d.block < d.extent):
            raise TraceError(f"{where}: inside the loop of {d.describe()}, an index or a pinned "
                             "block size, every program would draw the same numbers; use "
                             "hl.rand with a seed that differs per index")
        if d not in dims:
            raise TraceError(f"{where}: the value lacks the dim of the open loop over "
                             f"{d.describe()}, so each of its tiles would draw the same numbers; "
                             "draw over a value that has it (torch.rand([.., tile, ..]))")


def eager(run, func, args, kwargs):
    """The same numbers in the oracle, where every open loop is one whole tile."""
    from newt import dtypes as D
    from newt.interpreter import philox
    from newt.interpreter.values import Tensor
    kind, like = FUNCTIONS[func]
    if run.partial:
        raise RuntimeError("torch.rand_like / torch.rand in the oracle: a loop over an index or "
                           "a pinned block size is open")
    if like:
        shape, dtype = tuple(args[0].shape), args[0].dtype
        dtype = dtype if dtype.is_floating_point else torch.float32
    else:
        shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple,
                                                                          torch.Size)) else args
        shape, dtype = tuple(int(getattr(s, "block_size", s)) for s in shape), torch.float32
    dtype = kwargs.get("dtype") or dtype
    offs, mult = torch.zeros((), dtype=torch.int64), 1
    for axis in reversed(range(len(shape))):
        r = torch.arange(shape[axis], dtype=torch.int64) * mult
        offs = r.reshape([-1] + [1] * (len(shape) - 1 - axis)) + offs
        mult *= shape[axis]
    stream = run.rng_stream
    run.rng_stream += 1
    seed = run.seeds.of(run.program_index) + stream
    draw = philox.randn if kind == "randn" else philox.rand
    out = draw(seed, Tensor(offs.expand(shape).contiguous(), D.int32)).data
    return out.to(device=run.device, dtype=dtype)


__all__ = ["FUNCTIONS", "Seeds", "traced", "eager", "draw_base"]
