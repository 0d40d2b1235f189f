"""Random numbers in interpreted kernels: Philox4x32 keyed by (seed, offset), Triton's stream.

Counter = (offset low 32 bits, offset high 32 bits, 0, 0), key = (seed low, seed high) with the
seed widened to 64 bits; each round multiplies counters 0 and 2 by the Philox round constants,
xors the high halves with the other counters and the key, and bumps the key by the Weyl
constants. rand maps the first word to [0, 1) as Triton does (read it as int32, fold negatives
with -x - 1, scale by 4.6566127342e-10 in fp32); randn is Box-Muller on the first two words,
randn4x on both pairs.
Consumes scalar/block Tensors, produces uint32 / fp32 Tensors of the offset's shape.
"""
from __future__ import annotations

import torch

from .. import dtypes as D
from .values import Tensor, cast, to_tensor, unwrap

_M32 = 0xFFFFFFFF
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85


def _u32(t: torch.Tensor) -> torch.Tensor:
    return t & _M32


def _philox(seed, offset, n_rounds):
    seed, offset = to_tensor(seed), to_tensor(offset)
    if not offset.dtype.is_int() or not seed.dtype.is_int():
        raise TypeError("nl.rand*: seed and offset must be integers")
    s = cast(seed, D.uint64).data  # 64-bit pattern
    k0 = _u32(s)
    k1 = _u32(s >> 32)
    o = cast(offset, D.uint64).data if offset.dtype.bits > 32 else cast(offset, D.uint32).data
    c0 = _u32(o)
    c1 = _u32(o >> 32) if offset.dtype.bits > 32 else torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = k0.expand(c0.shape), k1.expand(c0.shape)
    for _ in range(int(unwrap(n_rounds))):
        hi_a, lo_a = _mul_hi_lo(_ROUND_A, c0)
        hi_b, lo_b = _mul_hi_lo(_ROUND_B, c2)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = _u32(k0 + _KEY_A), _u32(k1 + _KEY_B)
    return [Tensor(c, D.uint32) for c in (c0, c1, c2, c3)]


def _mul_hi_lo(a: int, x: torch.Tensor):
    """High and low 32 bits of the 64-bit product of constant `a` and uint32 values `x`
    (int64 multiplication wraps, which keeps all 64 bits of the unsigned product)."""
    p = a * x
    return _u32(p >> 32), _u32(p)


def randint4x(seed, offset, n_rounds=10):
    return tuple(_philox(seed, offset, n_rounds))


def randint(seed, offset, n_rounds=10):
    return _philox(seed, offset, n_rounds)[0]


def uint_to_uniform_float(x) -> Tensor:
    x = to_tensor(x)
    wide = x.dtype.bits == 64     # the frontend checked: 32- or 64-bit integers
    v = cast(x, D.int64 if wide else D.int32, bitcast=True).data
    v = torch.where(v < 0, -v - 1, v)
    scale = torch.tensor(1.0842020432385337e-19 if wide else 4.6566127342e-10,
                         dtype=torch.float32)
    return Tensor(v.to(torch.float32) * scale, D.float32)


def pair_uniform_to_normal(u1, u2):
    u1, u2 = cast(u1, D.float32).data, cast(u2, D.float32).data
    u1 = torch.clamp(u1, min=1.0e-7)
    th = torch.tensor(6.283185307179586, dtype=torch.float32) * u2
    r = torch.sqrt(torch.tensor(-2.0, dtype=torch.float32) * torch.log(u1))
    return Tensor(r * torch.cos(th), D.float32), Tensor(r * torch.sin(th), D.float32)


def rand(seed, offset, n_rounds=10):
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


def rand4x(seed, offset, n_rounds=10):
    return tuple(uint_to_uniform_float(i) for i in _philox(seed, offset, n_rounds))


def randn(seed, offset, n_rounds=10):
    return randn4x(seed, offset, n_rounds)[0]


def randn4x(seed, offset, n_rounds=10):
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    return pair_uniform_to_normal(u1, u2) + pair_uniform_to_normal(u3, u4)
