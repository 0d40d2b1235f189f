"""nl.rand / randn / randint / randint4x / rand4x / randn4x and the two conversions
uint_to_uniform_float and pair_uniform_to_normal: one `philox` op plus ordinary ops, giving the
same streams as Triton's random module.

  philox:    counter = (offset, 0, 0, 0) as uint32, key = (low, high) 32 bits of the seed
             converted to uint64; n_rounds rounds of Philox4x32 -> 4 uint32 blocks
  randint:   the first of the four outputs
  rand:      uint -> uniform fp32 in [0, 1): x reinterpreted as int32, x = x < 0 ? -x - 1 : x,
             times 4.6566127342e-10 (the largest scale with MAX_INT * scale < 1 in fp32)
  randn:     Box-Muller on the first two outputs: u1 = max(1e-7, u1),
             sqrt(-2 log u1) * cos(2 pi u2)
"""
from __future__ import annotations

from .. import dtypes as D
from . import semantic
from .semantic import error, to_tensor
from .values import Tensor

_UINT_TO_FLOAT_SCALE = 4.6566127342e-10
_UINT64_TO_FLOAT_SCALE = 1.0842020432385337e-19     # 2**-63 as the fp32 multiplier
_TWO_PI = 6.283185307179586


def _philox(b, seed, offset, n_rounds):
    if isinstance(n_rounds, Tensor) or not isinstance(n_rounds, int) or n_rounds <= 0:
        error(f"n_rounds must be a positive compile-time int, got {n_rounds!r}")
    seed = to_tensor(b, seed)
    if seed.is_block() or not seed.dtype.is_int():
        error(f"the random seed must be an integer scalar, got {seed.type}")
    seed = semantic.cast(b, seed, D.uint64)
    offset = to_tensor(b, offset)
    if not offset.dtype.is_int() or offset.dtype.is_bool():
        error(f"random offsets must be integers, got {offset.dtype.name}")
    if offset.dtype.bits != 32:
        error(f"random offsets must be 32-bit integers, got {offset.dtype.name} (cast them with "
              f".to(nl.int32))")
    offset = semantic.cast(b, offset, D.uint32, bitcast=True)
    return [Tensor(v, b) for v in b.philox(seed.v, offset.v, n_rounds)]


def uint_to_uniform_float(b, x) -> Tensor:
    x = to_tensor(b, x)
    if not x.dtype.is_int() or x.dtype.bits not in (32, 64):
        error(f"uint_to_uniform_float needs 32- or 64-bit integers, got {x.dtype.name}")
    wide = x.dtype.bits == 64
    x = semantic.cast(b, x, D.int64 if wide else D.int32, bitcast=True)
    neg = semantic.binary(b, "lt", x, 0)
    flipped = semantic.binary(b, "sub", semantic.unary_operator(b, "neg", x), 1)
    x = semantic.cast(b, semantic.where(b, neg, flipped, x), D.float32)
    return semantic.binary(b, "mul", x, _UINT64_TO_FLOAT_SCALE if wide else _UINT_TO_FLOAT_SCALE)


def pair_uniform_to_normal(b, u1, u2):
    u1 = semantic.minmax(b, "maximum", 1.0e-7, u1)
    th = semantic.binary(b, "mul", _TWO_PI, u2)
    r = semantic.math_unary(b, "sqrt", semantic.binary(
        b, "mul", -2.0, semantic.math_unary(b, "log", u1)))
    return (semantic.binary(b, "mul", r, semantic.math_unary(b, "cos", th)),
            semantic.binary(b, "mul", r, semantic.math_unary(b, "sin", th)))


def randint4x(b, seed, offset, n_rounds=10):
    return tuple(_philox(b, seed, offset, n_rounds))


def randint(b, seed, offset, n_rounds=10):
    return _philox(b, seed, offset, n_rounds)[0]


def rand(b, seed, offset, n_rounds=10):
    return uint_to_uniform_float(b, randint(b, seed, offset, n_rounds))


def rand4x(b, seed, offset, n_rounds=10):
    return tuple(uint_to_uniform_float(b, i) for i in _philox(b, seed, offset, n_rounds))


def randn(b, seed, offset, n_rounds=10):
    i1, i2, _, _ = _philox(b, seed, offset, n_rounds)
    return pair_uniform_to_normal(b, uint_to_uniform_float(b, i1),
                                  uint_to_uniform_float(b, i2))[0]


def randn4x(b, seed, offset, n_rounds=10):
    u1, u2, u3, u4 = rand4x(b, seed, offset, n_rounds)
    return pair_uniform_to_normal(b, u1, u2) + pair_uniform_to_normal(b, u3, u4)
