"""Integer division and remainder as the generated code defines them (codegen/header.py's
nt_div / nt_mod), on the int64 torch data the interpreter computes with (values.py).

C semantics: the quotient truncates toward zero, the remainder takes the dividend's sign. Where
C leaves it undefined, RISC-V's rules (x == (x // y) * y + x % y always holds): a zero divisor
gives a quotient of all ones and a remainder of x instead of raising; a divisor of -1 negates
(wrapping: MIN // -1 == MIN) and leaves no remainder (the CPU's division would trap on int64
MIN // -1 and kill the process).
"""
from __future__ import annotations

import torch


def signed(x: torch.Tensor, y: torch.Tensor, mod: bool) -> torch.Tensor:
    """x // y or x % y of signed values held in int64 (narrower types wrap afterwards)."""
    zero, neg1 = y == 0, y == -1
    ys = torch.where(zero | neg1, torch.ones_like(y), y)
    r = torch.fmod(x, ys) if mod else torch.div(x, ys, rounding_mode="trunc")
    r = torch.where(neg1, torch.zeros_like(r) if mod else torch.neg(r), r)
    return torch.where(zero, x if mod else torch.full_like(r, -1), r)


def unsigned64(a: torch.Tensor, b: torch.Tensor, mod: bool) -> torch.Tensor:
    """Unsigned 64-bit division of bit patterns; Python ints do the rare >= 2**63 cases."""
    a, b = torch.broadcast_tensors(a, b)
    if bool((a >= 0).all()) and bool((b > 0).all()):
        return torch.fmod(a, b) if mod else torch.div(a, b, rounding_mode="trunc")
    m = 1 << 64
    out = [((x % m) % (y % m) if mod else (x % m) // (y % m)) if y % m
           else (x % m if mod else m - 1)
           for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())]
    out = [v - m if v >= 1 << 63 else v for v in out]
    return torch.tensor(out, dtype=torch.int64).reshape(a.shape)
