"""Dot decisions: which engine computes each `dot`, and the accumulator's register layout.

Where it sits: the layout pass (layout.py) calls `result_layout(op, num_threads)` for every
`dot` op; the answer anchors the accumulator (and, through elementwise ops and loop-carried
values, every epilogue value computed from it), so that bias, activation, cast and masked store
work on the tensor-core fragment in place, without a trip through shared memory. The same call
records the decision in `op.attrs["dot_plan"]` (a DotPlan, shown by the printer); codegen
(newt/codegen/dot.py) follows it.

Engines:
  "mma"   tensor cores. On sm_90a with num_warps % 4 == 0 and 16-bit, tf32, fp8 or int8 inputs
          codegen uses wgmma.mma_async (warpgroups); otherwise ldmatrix + mma.sync (sm_80+).
          Both produce the same accumulator layout (AccLayout), so the layout does not depend
          on the arch. fp8 reaches a plan only where wgmma takes it (passes/dot_fp8.py).
  "fma"   exact scalar products (fp32 with input_precision="ieee", fp64, and shapes the
          fragment layout cannot cover): result in the default group-cyclic layout.

AccLayout (the m16n8 / m64nN fragment, PTX ISA "Matrix fragments for mma.m16n8k16" and
"wgmma.mma_async register fragment D"): warps form groups of G = min(4, W) consecutive warps
(a warpgroup when G = 4); group g owns rows [g*M/ngrp, (g+1)*M/ngrp) in sub-tiles of 16*G rows;
warp i of the group owns rows 16i..16i+15 of every sub-tile and all N columns. Within a warp's
16 x N strip, lane l and register r = 4*(c/8) + 2*h + e hold row l/4 + 8h, column
8*(c/8) + 2*(l%4) + e. Slots run sub-tile by sub-tile (N/2 registers each), which is exactly the
register order of a wgmma m64nN accumulator and of consecutive mma.sync m16n8 C fragments.
"""
from __future__ import annotations

import dataclasses

from ..errors import CompilationError
from .layouts import Layout

# K covered by one instruction is 32 bytes of the input element
_TC_INPUTS = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "float8e4nv": 1,
              "float8e5": 1}
# 8-bit floats: wgmma's type names; a mixed pair is "<A>_<B>" (newt/passes/dot_fp8.py)
_FP8_KIND = {"float8e4nv": "e4m3", "float8e5": "e5m2"}
FP8_KINDS = ("e4m3", "e5m2", "e4m3_e5m2", "e5m2_e4m3")


class _FragmentLayout(Layout):
    """A tensor-core fragment: every slot holds an element; row_col(tid, s) says which."""
    N: int

    def row_col(self, tid: str, s) -> tuple[str, str]:
        raise NotImplementedError

    def flat(self, tid, s):
        row, col = self.row_col(tid, s)
        return f"({row} * {self.N} + {col})"

    def valid(self, tid, s):
        return None


class AccLayout(_FragmentLayout):
    def __init__(self, M: int, N: int, num_threads: int):
        W = num_threads // 32
        self.M, self.N, self.numel, self.num_threads = M, N, M * N, num_threads
        self.G = min(4, W)
        self.ngrp = W // self.G
        self.rows_grp = M // self.ngrp
        self.sub = 16 * self.G
        self.nsub = self.rows_grp // self.sub
        self.nslots = self.nsub * N // 2
        self.vec = 2

    @staticmethod
    def fits(M, N, num_threads) -> bool:
        W = num_threads // 32
        return M % (16 * W) == 0 and N % 16 == 0

    @property
    def groups(self) -> int:     # pairs of consecutive columns (memory.py's vector groups)
        return self.nslots // self.vec

    def key(self):
        return ("mma_acc", self.M, self.N, self.num_threads)

    def py_flat(self, t, s):
        w, lane = t // 32, t % 32
        g, wi = w // self.G, w % self.G
        half = self.N // 2
        ms, rem = s // half, s % half
        c8, h, e = rem // 4, (rem % 4) // 2, rem % 2
        row = g * self.rows_grp + ms * self.sub + wi * 16 + lane // 4 + 8 * h
        return row * self.N + c8 * 8 + (lane % 4) * 2 + e

    def row_col(self, tid: str, s) -> tuple[str, str]:
        """C expressions (row, column) of slot s of thread tid."""
        half = self.N // 2
        w = f"({tid} >> 5)"
        lane = f"({tid} & 31)"
        g = f"({w} / {self.G})" if self.ngrp > 1 else "0"
        wi = f"({w} % {self.G})" if self.G > 1 else "0"
        if isinstance(s, int):
            ms, rem = s // half, s % half
            c8, h, e = rem // 4, (rem % 4) // 2, rem % 2
            row = (f"({g} * {self.rows_grp} + {wi} * 16 + ({lane} >> 2) + "
                   f"{ms * self.sub + 8 * h})")
            col = f"({c8 * 8 + e} + ({lane} & 3) * 2)"
            return row, col
        s = f"({s})"
        row = (f"({g} * {self.rows_grp} + ({s} / {half}) * {self.sub} + {wi} * 16 + "
               f"({lane} >> 2) + (({s} % 4) / 2) * 8)")
        col = f"((({s} % {half}) / 4) * 8 + ({lane} & 3) * 2 + {s} % 2)"
        return row, col

    def __str__(self):
        return f"mma_acc(M={self.M}, N={self.N}, groups={self.ngrp}x{self.G} warps)"

    __repr__ = __str__


class SwappedAccLayout(_FragmentLayout):
    """The accumulator of C = A B computed as C^T = B^T A^T (a "swapped" dot, passes/dot_tma.py:
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


@dataclasses.dataclass
class DotPlan:
    engine: str            # "mma" | "fma"
    kind: str              # "f16" | "bf16" | "tf32" | "s8" | FP8_KINDS | "fma"
    M: int
    N: int
    K: int
    esize: int
    swap: bool = False     # computed as C^T = B^T A^T (SwappedAccLayout; passes/dot_tma.py)

    def __str__(self):
        return f"{self.engine}:{self.kind}[{self.M}x{self.N}x{self.K}]" + \
            (" swapped" if self.swap else "")


def acc_out_bytes(op) -> int:
    """Shared-memory bytes a tensor-core dot_acc_out stages its tile through: the tile in the
    box format when it leaves by TMA (passes/store_tma.py), else rows padded by 8 words
    (codegen/dot_epilogue.py). It reuses the dot's ring when the ring holds that many."""
    sb = op.attrs.get("tma_store")
    if sb is not None:
        return sb.rows * sb.cols * sb.esize
    plan = op.attrs["dot_plan"]
    return plan.M * (plan.N + 8) * 4


def acc_layout(plan: "DotPlan", num_threads: int):
    """The register layout of a tensor-core dot's accumulator."""
    if plan.swap:
        return SwappedAccLayout(plan.M, plan.N, num_threads)
    return AccLayout(plan.M, plan.N, num_threads)


def uses_wgmma(arch: str, num_threads: int, plan: DotPlan, a_src=None) -> bool:
    """Whether codegen computes a tensor-core dot with wgmma (else mma.sync): sm_90a, whole
    warpgroups, 16-bit, tf32, fp8 or int8 inputs; A from registers (a_src "regs") only for
    16-bit."""
    if plan.engine != "mma" or not (arch.startswith("sm_9") and arch.endswith("a")):
        return False
    kinds = ("f16", "bf16") if a_src == "regs" else ("f16", "bf16", "tf32", "s8") + FP8_KINDS
    return num_threads % 128 == 0 and plan.kind in kinds


def plan_dot(op, num_threads) -> DotPlan:
    a, b = op.operands[0], op.operands[1]
    (M, K), N = a.shape, b.shape[1]
    dt = a.dtype.name
    prec = op.attrs.get("input_precision", "tf32")
    kind = {"float16": "f16", "bfloat16": "bf16", "int8": "s8"}.get(dt)
    if dt == "float32" and prec in ("tf32", "tf32x3"):
        kind = "tf32"
    if dt in _FP8_KIND:
        ka, kb = _FP8_KIND[dt], _FP8_KIND[b.dtype.name]
        kind = ka if ka == kb else f"{ka}_{kb}"
    esize = _TC_INPUTS.get(dt, 8)
    if kind is not None and AccLayout.fits(M, N, num_threads) and (K * esize) % 32 == 0 \
            and (K * esize) >= 32:
        return DotPlan("mma", kind, M, N, K, esize)
    return DotPlan("fma", "fma", M, N, K, esize)


def result_layout(op, num_threads):
    """The layout pass's hook: the accumulator layout of `dot` op (None: the default)."""
    plan = op.attrs.get("dot_plan")
    if plan is None:
        try:
            plan = plan_dot(op, num_threads)
        except (ValueError, KeyError) as e:
            raise CompilationError(f"dot: {e}", op.loc) from None
        op.attrs["dot_plan"] = plan
    _route_loop_result(op)
    if op.attrs.get("ring") is not None:     # marked by dot_pipeline.py: the loads go async
        for v in op.operands[:2]:
            if v.owner.attrs.get("ring_role"):
                v.owner.opcode = "dot_ring_load"
    if plan.engine == "mma":
        return acc_layout(plan, num_threads)
    return None



def _route_loop_result(dot):
    """When `dot` is the yielded accumulator of a `for` loop, the loop's result leaves through a
    `dot_acc_out` op (codegen: fragment layout -> the default layout via shared memory, which
    also makes the epilogue's stores 16-byte and coalesced). Inserted right after the loop while
    the layout pass walks the loop's parent block, so the pass visits it next.

    Why here: the layout pass gives a loop's results the default layout after settling its
    carried values (newt/passes/layout.py, `_Assigner.op` falls through to `self.set(r)` for
    for/while), while codegen aliases results to the carried arrays, which hold the fragment
    layout. Routing the result through this op is correct either way."""
    body = dot.parent
    loop = getattr(body, "parent", None)
    if loop is None or loop.opcode != "for" or dot.attrs.get("acc_routed"):
        return
    dot.attrs["acc_routed"] = True
    yld = body.ops[-1]
    if dot.result not in yld.operands:
        return
    res = loop.results[yld.operands.index(dot.result)]
    parent = loop.parent
    uses = [o for o in parent.walk() if res in o.operands]
    if not uses or any(o.opcode == "dot_acc_out" for o in uses):
        return
    from ..ir.core import Op
    out = Op("dot_acc_out", [res], [res.type],
             {"dot_plan": dot.attrs["dot_plan"], "ring": dot.attrs.get("ring")}, (), loop.loc)
    out.parent = parent
    out.result.name = res.name
    parent.ops.insert(parent.ops.index(loop) + 1, out)
    for o in uses:
        o.operands = [out.result if v is res else v for v in o.operands]


# the codegen handlers of dot_acc_out / dot_ring_load register on import
from ..codegen import dot_ring as _dot_ring  # noqa: E402,F401
