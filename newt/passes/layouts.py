"""Register layouts: which thread holds which element of a block, in which slot.

This file is the one reference of the layout math. The layout pass (layout.py) attaches a
Layout to every block value (`value.attrs["layout"]`); codegen asks the layout for C
expressions and never does layout arithmetic of its own.

A layout of a block of `numel` elements over `num_threads` threads says:
  - `nslots`: how many slots (registers of the element type) every thread holds;
  - `flat(t, s)`: the element (flattened row-major index) thread t holds in slot s;
  - `valid(t, s)`: whether that slot holds an element at all. Invalid slots exist when the
    block is smaller than the threads' capacity; they are never stored, never counted in a
    reduction and never used by an atomic, so no element is written or counted twice;
  - `vec`: slots come in groups of `vec` that hold `vec` consecutive elements, the first a
    multiple of `vec` (so a group is one vector access when the memory is contiguous).
Each valid element lives in exactly one (thread, slot): layouts here are never replicated.

Every layout has a Python form (`py_flat`, `py_valid`: tests check the bijection) and a C form
(`flat`, `valid`: strings over the thread-id expression and a slot expression that becomes a
compile-time constant once slot loops are unrolled). New layouts (e.g. MMA accumulators)
subclass Layout and implement the same four members.
"""
from __future__ import annotations


class Layout:
    numel: int
    num_threads: int
    nslots: int
    vec: int = 1

    def py_flat(self, t: int, s: int) -> int:
        raise NotImplementedError

    def py_valid(self, t: int, s: int) -> bool:
        return self.py_flat(t, s) < self.numel

    def flat(self, tid: str, s) -> str:
        """C expression (int) of the element held by thread `tid` in slot `s`."""
        raise NotImplementedError

    def valid(self, tid: str, s) -> str | None:
        """C expression (bool) telling whether the slot holds an element; None: always."""
        raise NotImplementedError

    def key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other):
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())


class CyclicLayout(Layout):
    """The group-cyclic layout (DESIGN.md): element i -> thread (i / vec) mod T,
    slot (i / (T*vec)) * vec + i mod vec. Inverse: flat(t, s) = (s / vec)*T*vec + t*vec + s%vec.

    Consecutive 16-byte groups go to consecutive threads round robin: a warp's access is
    coalesced and each group is one 128-bit access. `vec` is chosen by the layout pass (16 bytes
    of the narrowest element accessed in memory at this block size) and shrunk for small blocks
    so that as many threads as possible hold an element.
    """

    def __init__(self, numel: int, num_threads: int, vec: int):
        self.numel, self.num_threads = numel, num_threads
        vec = max(1, min(vec, numel // num_threads)) if numel < num_threads * vec else vec
        self.vec = vec
        per_round = num_threads * vec
        self.nslots = -(-numel // per_round) * vec
        self.partial = numel % per_round != 0   # some slots are invalid

    def key(self):
        return ("cyclic", self.numel, self.num_threads, self.vec)

    @property
    def groups(self) -> int:
        return self.nslots // self.vec

    def py_flat(self, t, s):
        v, T = self.vec, self.num_threads
        return (s // v) * T * v + t * v + s % v

    def flat(self, tid, s):
        v, T = self.vec, self.num_threads
        if isinstance(s, int):
            base = (s // v) * T * v + s % v
            return f"({tid} * {v} + {base})" if v > 1 else f"({tid} + {base})"
        s = f"({s})" if not str(s).isidentifier() else s
        if v == 1:
            return f"({s} * {T} + {tid})"
        return f"(({s} / {v}) * {T * v} + {tid} * {v} + {s} % {v})"

    def valid(self, tid, s):
        if not self.partial:
            return None
        return f"({self.flat(tid, s)} < {self.numel})"

    def __str__(self):
        return f"cyclic(vec={self.vec}, slots={self.nslots})"

    __repr__ = __str__


def coords_of(flat: str, shape: tuple) -> list[str]:
    """C expressions of the row-major coordinates of a flat index (never negative). Unsigned
    division by the powers of two folds to shifts and masks in NVRTC, and a mask of a sum
    whose other term is a multiple of the divisor drops that term (the column of every group
    of a thread is then one value), where signed division keeps sign fix-ups per group."""
    out, stride = [], 1
    strides = []
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    strides.reverse()
    u = f"(u32)({flat})"
    for d, st in zip(shape, strides):
        if d == 1:
            out.append("0")
        elif st * d == stride:      # outermost: flat < numel for every valid slot, no wrap
            out.append(flat if st == 1 else f"(i32)({u} / {st})")
        elif st == 1:
            out.append(f"(i32)({u} % {d})")
        else:
            out.append(f"(i32)(({u} / {st}) % {d})")
    return out


def flat_of(coords: list[str], shape: tuple) -> str:
    """C expression of the flat row-major index of coordinates."""
    terms, stride = [], 1
    for c, d in zip(reversed(coords), reversed(shape)):
        if d != 1:
            terms.append(c if stride == 1 else f"{c} * {stride}")
        stride *= d
    return "(" + " + ".join(reversed(terms)) + ")" if terms else "0"
