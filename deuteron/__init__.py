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
from .errors import TraceError  # noqa: F401
from .kernel import Kernel, kernel  # noqa: F401
from .language import (  # noqa: F401
    Config, tile, zeros, full,
    float16, bfloat16, float32, float64, int8, int16, int32, int64, bool_,
    exp, exp2, log, log2, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, relu, abs, floor, ceil,
    where, maximum, minimum, clamp, matmul, addmm,
)

__version__ = "0.1.0"


def _dynamo_call(kernel, *args, **kwargs):
    """What torch.compile traces in place of Kernel.__call__ (torch_ops.py): imported only then."""
    from . import torch_ops
    return torch_ops.traced_call(kernel, *args, **kwargs)


Kernel.__call__._torchdynamo_inline = _dynamo_call
