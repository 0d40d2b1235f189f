"""deuteron: a Helion-style tile layer on newt.

    @dt.kernel
    def matmul(x, y, out):
        for tile_m, tile_n in dt.tile([x.shape[0], y.shape[1]]):
            acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
            for tile_k in dt.tile(x.shape[1]):
                acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
            out[tile_m, tile_n] = acc

Pipeline: trace.py (run the function, record tile loops) -> lower.py (newt source) ->
kernel.py (exec, bind a config, launch) with autotune/ (space, search, bench, cache) choosing
the config against the eager oracle `k.ref`.
"""
from . import exc, language, runtime  # noqa: F401  (import deuteron.language as hl)
from .config import Config  # noqa: F401
from .errors import TraceError  # noqa: F401
from .kernel import Kernel, kernel  # noqa: F401
from .kernel import kernel as jit  # noqa: F401  (Helion's alias)
from .language import (  # noqa: F401
    tile, grid, jagged_tile, vtile, zeros, full, arange, register_block_size, register_reduction_dim,
    register_tunable, barrier, specialize, constexpr, static_range, load, store, atomic_add,
    atomic_max, atomic_min, atomic_and, atomic_or, atomic_xor, atomic_xchg, rand, dot, cumsum,
    associative_scan, reduce, split, join,
    tile_index, tile_begin, tile_end, tile_block_size, tile_id,
    float16, bfloat16, float32, float64, int8, int16, int32, int64, bool_,
    exp, exp2, log, log2, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, relu, abs, floor, ceil,
    where, maximum, minimum, clamp, matmul, addmm,
)

__version__ = "0.2.0"


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for host ints (Helion's `helion.cdiv`)."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n, and 1 for n <= 0 (Helion's `helion.next_power_of_2`)."""
    return 1 if n <= 0 else 1 << (int(n) - 1).bit_length()


def _dynamo_call(kernel, *args, **kwargs):
    """What torch.compile traces in place of Kernel.__call__ (torch_ops.py): imported only then."""
    from . import torch_ops
    return torch_ops.traced_call(kernel, *args, **kwargs)


Kernel.__call__._torchdynamo_inline = _dynamo_call
