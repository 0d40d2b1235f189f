"""Conversions to narrow floats that round once (part of the interpreter's value casts,
values.py): fp64 and wide integers pass through fp32 rounded to odd, as the generated code's
nt_odd_f32 does (newt/codegen/header.py), so that the one rounding to nearest left is the
conversion's own."""
from __future__ import annotations

import torch

from .. import dtypes as D


def odd_fp32(v: torch.Tensor, src) -> torch.Tensor:
    """fp64 or 32/64-bit integer data as fp32 rounded to odd: truncated toward zero, its last
    bit set when anything was dropped. Rounding that to fp16 / bf16 / fp8 (to nearest) rounds
    the original value once: through fp32 rounded to nearest, a value just off a 16-bit tie
    could land on the tie and go the wrong way (torch's CPU conversion from fp64 does that).
    Integers matter for bf16 only: those in fp16's and fp8's ranges are exact in fp32."""
    if src.is_int():   # 32-bit integers are exact in fp64; 64-bit ones rounded to odd there
        v = int64_odd(v, src) if src.bits == 64 else v.to(torch.float64)
    f = v.to(torch.float32)
    inexact = (f.to(torch.float64) != v) & ~torch.isnan(v)
    bits = f.view(torch.int32)
    away = inexact & (f.to(torch.float64).abs() > v.abs())
    bits = torch.where(away, bits - 1, bits)
    return torch.where(inexact, bits | 1, bits).view(torch.float32)


def int64_odd(v: torch.Tensor, src) -> torch.Tensor:
    """64-bit integers as fp64 rounded to odd (53 bits kept, the last set if any was dropped)."""
    neg = (v < 0) if src is not D.uint64 else torch.zeros_like(v, dtype=torch.bool)
    # magnitudes as unsigned 64-bit patterns held in int64 (|MIN| and uint64 >= 2**63 wrap)
    mag = torch.where(neg, -v, v)
    out = torch.empty(v.shape, dtype=torch.float64)
    for i, (m, n) in enumerate(zip(mag.reshape(-1).tolist(), neg.reshape(-1).tolist())):
        m &= (1 << 64) - 1
        s = max(0, m.bit_length() - 53)
        q = (m >> s) | (1 if m & ((1 << s) - 1) else 0)
        out.view(-1)[i] = (-1.0 if n else 1.0) * float(q) * 2.0 ** s
    return out
