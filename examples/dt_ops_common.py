"""The op registry shared by the deuteron op examples (examples/dt_ops_*.py), their interpreter
tests (tests/test_deuteron_ops.py) and the GPU benchmark (benchmarks/dt_ops.py).

An `Op` is a name, a maker of fresh random inputs (small ones for the interpreter), the deuteron
run, the torch reference and a tolerance. `check(op, device, small)` runs it with every
`torch.empty` / `torch.empty_like` of the kernels' host code filled with NaN (integers with a
sentinel), so an element a kernel forgets to write shows up.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

import torch


@dataclasses.dataclass
class Op:
    name: str
    make: Callable            # (device, small) -> args
    run: Callable             # (*args) -> output(s), through deuteron kernels
    ref: Callable             # (*args) -> output(s), eager torch
    tol: tuple = (1e-4, 1e-4)
    matmul: bool = False      # matmul-like: the benchmark also times the hand-written newt kernel
    compare: Callable | None = None   # (got, args) -> None or raise, instead of ref + tol
    eager: Callable | None = None     # (*args) -> output(s): what a user writes in eager torch,
    #                                   timed against the kernel (default: ref). ref may compute
    #                                   in fp32 for accuracy; eager uses the inputs' dtype.


def _fill(t):
    if t.dtype.is_floating_point:
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(-77)


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty / empty_like / Tensor.new_empty return NaN-filled tensors meanwhile."""
    saved = torch.empty, torch.empty_like, torch.Tensor.new_empty

    def empty(*a, **k):
        return _fill(saved[0](*a, **k))

    def empty_like(*a, **k):
        return _fill(saved[1](*a, **k))

    def new_empty(self, *a, **k):
        return _fill(saved[2](self, *a, **k))
    torch.empty, torch.empty_like, torch.Tensor.new_empty = empty, empty_like, new_empty
    try:
        yield
    finally:
        torch.empty, torch.empty_like, torch.Tensor.new_empty = saved


def _flat(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def check(op: Op, device, small=True, seed=0):
    """Run `op` on fresh random inputs and compare with torch; returns (args, output)."""
    torch.manual_seed(seed)
    args = op.make(device, small)
    with poisoned_allocations():
        got = op.run(*args)
    if op.compare is not None:
        op.compare(got, args)
        return args, got
    want = op.ref(*args)
    for g, w in zip(_flat(got), _flat(want), strict=True):
        torch.testing.assert_close(g.float() if g.dtype != w.dtype else g,
                                   w.float() if g.dtype != w.dtype else w,
                                   rtol=op.tol[0], atol=op.tol[1], equal_nan=False)
    return args, got


def run_all(ops):
    """Check every op against torch, on the GPU when there is one, else on the interpreter at
    the small sizes; one line per op, every op reported (not only the first failure)."""
    import newt
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        newt.options.flags.interpret = True
    for op in ops:
        try:
            check(op, device, small=device == "cpu")
            print(f"{op.name}: matches torch")
        except Exception as e:
            print(f"{op.name}: FAILED: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
