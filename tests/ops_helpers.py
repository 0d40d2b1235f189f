"""Shared pieces of the op test suite (tests/test_ops_*.py): dtype lists, random inputs per dtype,
poisoned outputs, int64 reference arithmetic for types torch lacks ops for, tolerances.

Every op test runs its kernel on the `target` fixture (interp, cuda) and compares with torch.
"""
from __future__ import annotations

import torch

from newt import dtypes

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
SIGNED = [torch.int8, torch.int16, torch.int32, torch.int64]
UNSIGNED = [torch.uint8, torch.uint16, torch.uint32, torch.uint64]
INTS = SIGNED + UNSIGNED
ALL = FLOATS + INTS + [torch.bool]
SIZES = [1, 7, 1000, 1025]   # odd sizes on purpose: masks must matter
BLOCK = 256

_BITS = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64, torch.uint8: 8,
         torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}


def name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def nl_dtype(dt: torch.dtype):
    return dtypes.from_torch(dt)


def is_unsigned(dt):
    return dt in UNSIGNED


def bits(dt):
    return _BITS[dt]


def rand(shape, dt, device, low=None, high=None):
    """Fresh random data of dtype `dt` (never zeros). Ints cover [low, high) or the full range."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dt.is_floating_point:
        return torch.randn(shape, dtype=torch.float32).to(dt).to(device)
    if dt == torch.bool:
        return (torch.rand(shape) < 0.5).to(device)
    b = bits(dt)
    if low is None:
        low, high = (0, 2 ** b) if is_unsigned(dt) else (-2 ** (b - 1), 2 ** (b - 1))
    if b == 64:
        low, high = max(low, -2 ** 63), min(high, 2 ** 63 - 1)
        v = torch.randint(low, high, shape, dtype=torch.int64)
        return from_i64(v, dt).to(device)
    return from_i64(torch.randint(low, high, shape, dtype=torch.int64), dt).to(device)


def poison(shape, dt, device):
    """An output buffer full of values no correct kernel writes: NaN, or a sentinel."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dt.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dt, device=device)
    if dt == torch.bool:
        return torch.ones(shape, dtype=torch.bool, device=device)
    return from_i64(torch.full(shape, 0x5A5A5A5A5A5A5A5A & ((1 << (bits(dt) - 1)) - 1) or 77,
                               dtype=torch.int64), dt).to(device)


def to_i64(t: torch.Tensor) -> torch.Tensor:
    """Any integer tensor as int64 on the CPU (uint64: the same bits)."""
    t = t.cpu()
    if t.dtype == torch.uint64:
        return t.view(torch.int64)
    return t.to(torch.int64)


def from_i64(v: torch.Tensor, dt) -> torch.Tensor:
    """int64 values (wrapped to dt's range) as a tensor of integer dtype `dt`."""
    v = wrap(v, dt)
    if dt == torch.uint64:
        return v.view(torch.uint64)
    return v.to(dt)


def wrap(v: torch.Tensor, dt) -> torch.Tensor:
    b = bits(dt)
    if b == 64:
        return v
    if is_unsigned(dt):
        return v & ((1 << b) - 1)
    return ((v + (1 << (b - 1))) & ((1 << b) - 1)) - (1 << (b - 1))


def tol(dt):
    if dt in (torch.float16, torch.bfloat16):
        return dict(rtol=1e-2, atol=1e-2)
    if dt == torch.float32:
        return dict(rtol=1e-5, atol=1e-5)
    if dt == torch.float64:
        return dict(rtol=1e-12, atol=1e-12)
    return dict(rtol=0, atol=0)


def check(actual: torch.Tensor, expected: torch.Tensor, **kw):
    """Compare on the CPU; integers exactly (as int64 bit patterns), floats with dtype tolerances."""
    actual, expected = actual.cpu(), expected.cpu()
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype in _BITS or actual.dtype == torch.bool:
        a = to_i64(actual) if actual.dtype != torch.bool else actual
        e = to_i64(expected.to(actual.dtype)) if actual.dtype != torch.bool else expected.bool()
        if not torch.equal(a, e):
            bad = (a != e).nonzero()[:5].flatten().tolist()
            raise AssertionError(f"mismatch at {bad}: got {a.flatten()[bad[:1]].tolist()}, "
                                 f"expected {e.flatten()[bad[:1]].tolist()}")
        return
    t = dict(tol(actual.dtype), equal_nan=False)
    t.update(kw)
    torch.testing.assert_close(actual, expected.to(actual.dtype), **t)


def check_untouched(t: torch.Tensor):
    """`t` (a slice of a poisoned output) still holds the poison: nothing wrote there."""
    check(t, poison(t.shape, t.dtype, "cpu"), equal_nan=True)
