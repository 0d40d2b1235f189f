"""nl.rand / randn / randint / randint4x: one `philox` op plus ordinary ops for the conversions,
giving the same streams as Triton's random module.

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


def _uint_to_uniform_float(b, x: Tensor) -> Tensor:
    x = semantic.cast(b, x, D.int32, bitcast=True)
    neg = semantic.binary(b, "lt", x, 0)
    flipped = semantic.binary(b, "sub", semantic.unary_operator(b, "neg", x), 1)
    x = semantic.where(b, neg, flipped, x)
    return semantic.binary(b, "mul", x, _UINT_TO_FLOAT_SCALE)


def randint4x(b, seed, offset, n_rounds=10):
    return tuple(_philox(b, seed, offset, n_rounds))


def randint(b, seed, offset, n_rounds=10):
    return _philox(b, seed, offset, n_rounds)[0]


def rand(b, seed, offset, n_rounds=10):
    return _uint_to_uniform_float(b, randint(b, seed, offset, n_rounds))


def randn(b, seed, offset, n_rounds=10):
    i1, i2, _, _ = _philox(b, seed, offset, n_rounds)
    u1 = _uint_to_uniform_float(b, i1)
    u2 = _uint_to_uniform_float(b, i2)
    u1 = semantic.minmax(b, "maximum", 1.0e-7, u1)
    th = semantic.binary(b, "mul", _TWO_PI, u2)
    r = semantic.math_unary(b, "sqrt", semantic.binary(
        b, "mul", -2.0, semantic.math_unary(b, "log", u1)))
    return semantic.binary(b, "mul", r, semantic.math_unary(b, "cos", th))
