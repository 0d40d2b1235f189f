"""sort: a bitonic sorting network along one axis, in the scratch arena (op.attrs["smem"]).

The block is staged at flat indices (gather.stage), then every (k, j) step of the network has
each thread compare-exchange the pairs (i, i ^ j along the axis) of the elements it owns
round-robin (i = tid, tid + T, ...), with a barrier after each step; the result slots read
their flat index at the end. The sorted axis has a power-of-two size n: log2(n) *
(log2(n) + 1) / 2 steps. Floats order NaN above every number, as torch.sort does.
"""
from __future__ import annotations

from .emitter import handles
from .gather import stage, unstage


def less(dt, a: str, b: str) -> str:
    """C expression: a sorts before b (ascending)."""
    if dt.is_floating():
        return f"({a} < {b} || ({b} != {b} && {a} == {a}))"
    return f"({a} < {b})"


@handles("sort")
def _sort(em, op):
    x, r = op.operands[0], op.result
    axis, desc = op.attrs["axis"], op.attrs["descending"]
    ct, dt = em.ctype(x), x.dtype
    n = x.shape[axis]
    stride = 1
    for d in x.shape[axis + 1:]:
        stride *= d
    total = x.type.numel
    buf = em.fresh("sbuf")
    em.emit(f"{ct}* {buf} = {em.smem(op, ct)};")
    stage(em, op, x, buf)
    with em.scope(f"for (int k = 2; k <= {n}; k <<= 1)"):
        with em.scope("for (int j = k >> 1; j > 0; j >>= 1)"):
            with em.scope(f"for (int i = tid; i < {total}; i += {em.T})"):
                em.emit(f"int c = (i / {stride}) % {n}, p = c ^ j;")
                with em.scope("if (p > c)"):
                    em.emit(f"int i2 = i + (p - c) * {stride};")
                    em.emit(f"{ct} a = {buf}[i], b = {buf}[i2];")
                    up = "((c & k) == 0)" if not desc else "((c & k) != 0)"
                    em.emit(f"bool swap = {up} ? {less(dt, 'b', 'a')} : {less(dt, 'a', 'b')};")
                    em.emit(f"if (swap) {{ {buf}[i] = b; {buf}[i2] = a; }}")
            em.barrier()
    unstage(em, r, buf, f"({ct})0")
