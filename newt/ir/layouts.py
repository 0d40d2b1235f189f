"""Register layouts (in the IR: the passes attach them, codegen reads them): which thread holds which element of a block, in which slot.

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


# ----------------------------------------------------------------------------- tensor-core fragments
# (the accumulator layouts of newt/passes/tc/dot.py; the row vectors of newt/passes/tc/dot_rows.py)

class FragmentLayout(Layout):
    """A tensor-core fragment: every slot holds an element; row_col(tid, s) says which."""
    N: int

    def row_col(self, tid: str, s) -> tuple[str, str]:
        raise NotImplementedError

    def flat(self, tid, s):
        row, col = self.row_col(tid, s)
        return f"({row} * {self.N} + {col})"

    def valid(self, tid, s):
        return None


class AccLayout(FragmentLayout):
    """The m16n8 / m64nN accumulator fragment (passes/tc/dot.py's docstring draws it). `C`
    column groups (default 1): when M rows do not give every warp a 16-row strip, the warps
    form C groups of W / C consecutive warps, group c holding columns [c * Nw, (c + 1) * Nw),
    Nw = N / C, laid out within its slice as the whole fragment of AccLayout(M, Nw, T / C)
    (Triton's warpsPerCTA [W / C, C]; on Hopper each warpgroup then issues m64nNw)."""

    def __init__(self, M: int, N: int, num_threads: int, C: int = 1):
        W = num_threads // 32
        self.M, self.N, self.numel, self.num_threads = M, N, M * N, num_threads
        self.C, self.Nw, self.Wr = C, N // C, W // C       # column groups, their width, warps
        self.G = min(4, self.Wr)
        self.ngrp = self.Wr // self.G
        self.rows_grp = M // self.ngrp
        self.sub = 16 * self.G
        self.nsub = self.rows_grp // self.sub
        self.nslots = self.nsub * self.Nw // 2
        self.vec = 2

    @staticmethod
    def fits(M, N, num_threads, C: int = 1) -> bool:
        W = num_threads // 32
        return W % C == 0 and M % (16 * (W // C)) == 0 and N % (16 * C) == 0

    @staticmethod
    def col_groups(M, N, num_threads) -> int | None:
        """The fewest column groups whose fragment fits (1: no split), else None."""
        W, C = num_threads // 32, 1
        while C <= W:
            if AccLayout.fits(M, N, num_threads, C):
                return C
            C *= 2
        return None

    @property
    def groups(self) -> int:     # pairs of consecutive columns (memory.py's vector groups)
        return self.nslots // self.vec

    def key(self):
        return ("mma_acc", self.M, self.N, self.num_threads) + ((self.C,) if self.C > 1 else ())

    def py_flat(self, t, s):
        w, lane = t // 32, t % 32
        cg, wr = w // self.Wr, w % self.Wr
        g, wi = wr // self.G, wr % self.G
        half = self.Nw // 2
        ms, rem = s // half, s % half
        c8, h, e = rem // 4, (rem % 4) // 2, rem % 2
        row = g * self.rows_grp + ms * self.sub + wi * 16 + lane // 4 + 8 * h
        return row * self.N + cg * self.Nw + c8 * 8 + (lane % 4) * 2 + e

    def warp_terms(self, warp: str) -> tuple[str, str, str]:
        """C expressions of a warp's row group, its index within the group and the first
        column of its slice ("0" where constant)."""
        wr = f"({warp} % {self.Wr})" if self.C > 1 else warp
        g = f"({wr} / {self.G})" if self.ngrp > 1 else "0"
        wi = f"({warp} % {self.G})" if self.G > 1 else "0"     # (G divides Wr)
        c0 = f"({warp} / {self.Wr}) * {self.Nw}" if self.C > 1 else "0"
        return g, wi, c0

    def row_col(self, tid: str, s) -> tuple[str, str]:
        """C expressions (row, column) of slot s of thread tid."""
        half = self.Nw // 2
        lane = f"({tid} & 31)"
        g, wi, c0 = self.warp_terms(f"({tid} >> 5)")
        first = f"{c0} + " if self.C > 1 else ""
        if isinstance(s, int):
            ms, rem = s // half, s % half
            c8, h, e = rem // 4, (rem % 4) // 2, rem % 2
            row = (f"({g} * {self.rows_grp} + {wi} * 16 + ({lane} >> 2) + "
                   f"{ms * self.sub + 8 * h})")
            col = f"({first}{c8 * 8 + e} + ({lane} & 3) * 2)"
            return row, col
        s = f"({s})"
        row = (f"({g} * {self.rows_grp} + ({s} / {half}) * {self.sub} + {wi} * 16 + "
               f"({lane} >> 2) + (({s} % 4) / 2) * 8)")
        col = f"({first}(({s} % {half}) / 4) * 8 + ({lane} & 3) * 2 + {s} % 2)"
        return row, col

    def __str__(self):
        split = f", {self.C} column groups of {self.Nw}" if self.C > 1 else ""
        return f"mma_acc(M={self.M}, N={self.N}, groups={self.ngrp}x{self.G} warps{split})"

    __repr__ = __str__


class SwappedAccLayout(FragmentLayout):
    """The accumulator of C = A B computed as C^T = B^T A^T (a "swapped" dot, passes/tc/dot_tma.py:
    tf32 with B in N-major tiles, which wgmma reads only from registers). The fragment is
    AccLayout(N, M)'s, of C^T, with its rows (C's columns) permuted within each warpgroup's
    64-row sub-tile: row r = 16w + l/4 + 8h of the sub-tile holds column `perm(w, l/4, h)`.

    Why the permutation: the A fragment of C^T (rows n, columns k of B^T) is read from B's
    shared-memory tile ([K][N], 128-byte swizzle: chunk c of row k at c ^ k % 8). Lane (g, t)
    reads k = t (and t + 4) at the columns of rows g and g + 8. Mapping those two rows to two
    consecutive columns makes each pair one 8-byte load; spreading g = 0..3 over chunks {0, 4}
    (+ 2 for odd warps) makes every half-warp's 16 loads hit 8 different chunks after the
    swizzle (c ^ t for t = 0..3), so the loads are free of bank conflicts."""

    def __init__(self, M: int, N: int, num_threads: int):
        self.inner = AccLayout(N, M, num_threads)
        self.M, self.N, self.numel, self.num_threads = M, N, M * N, num_threads
        self.nslots = self.inner.nslots
        self.vec = 1

    @staticmethod
    def fits(M, N, num_threads) -> bool:
        return AccLayout.fits(N, M, num_threads)

    def key(self):
        return ("mma_acc_swapped", self.M, self.N, self.num_threads)

    @staticmethod
    def py_perm(w: int, g: int, h: int) -> int:
        """C's column within a 64-row sub-tile of C^T for its row 16w + g + 8h."""
        return 32 * (w // 2) + 8 * (w % 2) + 16 * ((g >> 1) & 1) + 4 * (g >> 2) + 2 * (g & 1) + h

    @staticmethod
    def perm(w: str, g: str) -> str:
        """C expression of py_perm(w, g, 0) (h = 1 is the next column)."""
        return (f"(32 * ({w} >> 1) + 8 * ({w} & 1) + 16 * (({g} >> 1) & 1) + 4 * ({g} >> 2) + "
                f"2 * ({g} & 1))")

    def py_flat(self, t, s):
        lay = self.inner
        f = lay.py_flat(t, s)
        row, m = f // lay.N, f % lay.N
        sub, r = row - row % 64, row % 64
        n = sub + self.py_perm(r // 16, r % 8, (r % 16) // 8)
        return m * self.N + n

    def row_col(self, tid: str, s) -> tuple[str, str]:
        """C expressions (row, column) of C held in slot s of thread tid."""
        row, m = self.inner.row_col(tid, s)
        sub = f"(({row}) & ~63)"
        r = f"(({row}) & 63)"
        n = f"({sub} + {self.perm(f'({r} >> 4)', f'({r} & 7)')} + (({r} >> 3) & 1))"
        return m, n

    def __str__(self):
        return f"mma_acc_swapped(M={self.M}, N={self.N})"

    __repr__ = __str__


class AccRowLayout(Layout):
    """A row vector of M rows (or [M, 1]) held like the rows of AccLayout(M, *): slot
    2 * ms + h of lane l of warp w is row g * rows_grp + ms * sub + wi * 16 + l / 4 + 8 h
    (names as in AccLayout). The 4 lanes of a quad hold the same rows; lane % 4 == 0 is valid."""

    # every lane holds its row's value (dot_row_bcast reads its own registers), so a value
    # moved into this layout is read by all four lanes of a quad, not just the valid one
    fill_all_lanes = True

    def __init__(self, M: int, num_threads: int):
        ref = AccLayout(M, 16, num_threads)
        self.M, self.numel, self.num_threads = M, M, num_threads
        self.G, self.ngrp, self.rows_grp, self.sub, self.nsub = \
            ref.G, ref.ngrp, ref.rows_grp, ref.sub, ref.nsub
        self.nslots = 2 * self.nsub
        self.vec = 1

    @staticmethod
    def of_acc(lay: AccLayout) -> "AccRowLayout":
        # a fragment split in column groups holds each row in C warps: the row statistics
        # (passes/tc/dot_rows.py) take only unsplit ones
        assert lay.C == 1, lay
        return AccRowLayout(lay.M, lay.num_threads)

    def key(self):
        return ("mma_row", self.M, self.num_threads)

    def py_flat(self, t, s):
        w, lane = t // 32, t % 32
        g, wi = w // self.G, w % self.G
        return g * self.rows_grp + (s // 2) * self.sub + wi * 16 + lane // 4 + 8 * (s % 2)

    def py_valid(self, t, s):
        return t % 4 == 0

    def flat(self, tid, s):
        w, lane = f"({tid} >> 5)", f"({tid} & 31)"
        g = f"({w} / {self.G})" if self.ngrp > 1 else "0"
        wi = f"({w} % {self.G})" if self.G > 1 else "0"
        if isinstance(s, int):
            return (f"({g} * {self.rows_grp} + {wi} * 16 + ({lane} >> 2) + "
                    f"{(s // 2) * self.sub + 8 * (s % 2)})")
        s = f"({s})"
        return (f"({g} * {self.rows_grp} + ({s} / 2) * {self.sub} + {wi} * 16 + "
                f"({lane} >> 2) + ({s} % 2) * 8)")

    def valid(self, tid, s):
        return f"(({tid} & 3) == 0)"

    def __str__(self):
        return f"mma_rows(M={self.M}, groups={self.ngrp}x{self.G} warps)"

    __repr__ = __str__


def acc_row_slot(lay: AccLayout, s):
    """The AccRowLayout slot holding the row of AccLayout slot s (int or C expression)."""
    half = lay.Nw // 2
    if isinstance(s, int):
        return (s // half) * 2 + (s % 4) // 2
    return f"((({s}) / {half}) * 2 + (({s}) % 4) / 2)"
