"""Shared-memory pass: plans reductions and places every region of the kernel's dynamic shared
memory (the layout: newt/ir/shared_memory.py).

Consumes IR after the layout pass and the tensor-core passes (persistent included). Produces:
  op.attrs["plan"]       for reduce: how the three levels split (ReducePlan, printed); for
                         scan: "warp" or "smem"
  op.attrs["smem"]       the op's SmemRegion: the scratch region of an op that exchanges data
                         between threads (reductions, scans, smem broadcasts/permutes/
                         conversions, scalar atomics whose result is used, scratch.py's ops);
                         the tensor-core regions (tc/regions.py)
  op.attrs["sync_first"] True when the op must start with a barrier because the previous
                         scratch user may still be reading the same region
  fn.attrs["smem_bytes"] the total: CompiledKernel.shared_bytes, what the launch requests
  fn.attrs["smem"]       every region (SmemPlan), printed

Ping-pong: consecutive scratch users alternate between two regions of the arena. Every user
has a barrier between its writes and its reads, so when op k+2 writes region A, every thread
has already passed op k+1's barrier and finished reading op k's region A: no leading barrier is
needed. Where the previous user is unknown (first user in a loop body or after a loop/if) the
op starts with a barrier.

After the arena come the tensor-core regions (tc/regions.py): the dot area, shared by
liveness, then the regions of their own (rings, barriers, staging). The total must fit the
device's per-block limit (`SMEM_LIMITS`, the opt-in maximum): a kernel over it is a
CompilationError naming the limit, raised here.
"""
from __future__ import annotations

import dataclasses

from ..ir.core import is_block
from ..ir.layouts import CyclicLayout
from ..ir.shared_memory import SCRATCH, SmemPlan, SmemRegion
from .scratch import SCRATCH_OPS, plan_scratch
from .tc.regions import dot_area_regions, place_dot_area, place_own_regions


def reg_bytes(dt, wide=False) -> int:
    """Bytes of one register value of `dt` (fp16/bf16 live in registers as fp32)."""
    if wide or dt.bits == 64:
        return 8
    return 4


def acc_dtype_bytes(dt) -> int:
    return reg_bytes(dt)


@dataclasses.dataclass(frozen=True)
class ReducePlan:
    """How a reduction over the last axis of a block in a cyclic layout splits into levels.

    full:  one result: per-thread tree, 32-lane butterfly, one value per warp through smem.
    chunk: rows of n >= 32*vec elements: per-thread tree over `seg` slots (k groups of vec),
           32-lane butterfly, lane 0 writes partial p of warp w at p*W + w; output m combines
           `cpr` consecutive entries.
    lanes: rows of n < 32*vec elements: per-thread tree over `seg` slots, butterfly over
           `lanes` lanes, the first lane of each row writes entry `row`; output m reads entry m.
    """
    kind: str          # "full" | "chunk" | "lanes"
    n: int             # reduced extent
    rows: int          # number of outputs
    seg: int           # slots combined per partial inside a thread
    lanes: int         # lanes combined by the butterfly
    cpr: int           # smem entries combined per output
    entries: int       # smem entries written

    def __str__(self):
        return (f"{self.kind}(n={self.n}, rows={self.rows}, seg={self.seg}, lanes={self.lanes}, "
                f"cpr={self.cpr})")


def plan_reduce(x, num_threads) -> ReducePlan:
    lay = x.attrs["layout"]
    assert isinstance(lay, CyclicLayout), "reduce input must be cyclic (layout pass converts)"
    n = x.shape[-1]
    rows = x.type.numel // n
    W = num_threads // 32
    vec, T = lay.vec, lay.num_threads
    if rows == 1:
        return ReducePlan("full", n, 1, lay.nslots, 32, W, W if W > 1 else 0)
    if n >= 32 * vec:
        k = max(1, n // (T * vec))
        partials = lay.groups // k
        return ReducePlan("chunk", n, rows, k * vec, 32, n // (32 * vec * k), partials * W)
    seg = min(n, vec)
    return ReducePlan("lanes", n, rows, seg, max(1, n // vec), 1, rows)


def scan_plan(op) -> str:
    """"warp" for a forward sum of a 1-D cyclic block (codegen/reduce.py), else "smem"."""
    x = op.operands[0]
    fast = (len(x.shape) == 1 and op.attrs["kind"] == "sum" and not op.attrs.get("reverse")
            and not x.attrs["layout"].partial and isinstance(x.attrs["layout"], CyclicLayout))
    return "warp" if fast else "smem"


def _scratch_bytes(op, num_threads) -> int:
    c = op.opcode
    if c in SCRATCH_OPS:
        return plan_scratch(op)
    if c == "reduce":
        plan = op.attrs.get("plan") or plan_reduce(op.operands[0], num_threads)
        x = op.operands[0]
        per = acc_dtype_bytes(x.dtype) + (4 if op.attrs["kind"] in ("argmax", "argmin") else 0)
        return plan.entries * per
    if c == "scan":
        x = op.operands[0]
        lay = x.attrs["layout"]
        if (op.attrs.get("plan") or scan_plan(op)) == "warp":
            return lay.groups * (num_threads // 32) * acc_dtype_bytes(x.dtype)
        return x.type.numel * acc_dtype_bytes(x.dtype)
    if c in ("broadcast", "reshape", "permute", "convert_layout"):
        if op.attrs.get("movement") == "smem":
            x = op.operands[0]
            return x.type.numel * reg_bytes(x.dtype, x.attrs.get("wide"))
        return 0
    if c == "atomic" and not is_block(op.operands[0].type):
        return 8
    return 0


class _Planner:
    def __init__(self, num_threads):
        self.T = num_threads
        self.users = []          # (op, bytes) in program order
        self.last = -1           # parity of the previous scratch user; None: unknown,
                                 # -1: none before (the kernel's start)

    def block(self, block):
        for op in block.ops:
            if op.opcode == "reduce":
                op.attrs["plan"] = plan_reduce(op.operands[0], self.T)
            if op.opcode == "scan":
                op.attrs["plan"] = scan_plan(op)
            nbytes = _scratch_bytes(op, self.T)
            if nbytes:
                parity = 0 if self.last in (None, -1) else 1 - self.last
                op.attrs["sync_first"] = self.last is None
                op.attrs["smem"] = parity      # turned into a byte offset below
                self.users.append((op, nbytes))
                self.last = parity
            if op.regions:
                self.last = None
                for r in op.regions:
                    self.block(r)
                    self.last = None


def plan_occupancy(fn, options):
    """fn.attrs["min_blocks"]: the blocks per SM asked of ptxas (__launch_bounds__). Memory-bound
    kernels want many bytes in flight, so ask for a 64-register budget (4 blocks of 256
    threads); kernels with a dot keep the whole register file for accumulators. compile()
    retries with 1 when the budget spills, and asks for one block more when ptxas leaves a
    memory-bound kernel below full occupancy (compiler._raise_occupancy)."""
    has_dot = any(op.opcode == "dot" for op in fn.walk())
    # a rough register estimate from the largest block a thread holds (a few such values
    # are live at once), so the budget rarely needs the retry
    slots = [r.attrs["layout"].nslots * (2 if r.dtype.bits == 64 or r.dtype.is_ptr() else 1)
             for op in fn.walk() for r in op.results
             if is_block(r.type) and not r.attrs.get("icomp")]
    est = 40 + 3 * max(slots, default=0)
    blocks = min(1024 // options.num_threads, 65536 // (options.num_threads * est))
    fn.attrs["min_blocks"] = 1 if has_dot else max(1, blocks)
    return fn


def plan_shared_memory(fn, options):
    p = _Planner(options.num_threads)
    p.block(fn.body)
    region = max((b for _, b in p.users), default=0)
    region = -(-region // 16) * 16
    single = len(p.users) < 2 or 2 * region > 48 * 1024
    if single and len(p.users) > 1:
        # big exchanges: one region (stay under the 48 KB default) and a barrier before each
        # user but the first instead of the second region
        for op, _ in p.users[1:]:
            op.attrs["sync_first"] = True
    scratch = [SmemRegion("scratch", SCRATCH, 0, off, region)
               for off in ((0,) if single else (0, region))] if p.users else []
    for op, _ in p.users:
        op.attrs["smem"] = scratch[0 if single else op.attrs["smem"]]
    arena = region if single else 2 * region
    area, total = place_dot_area(fn, options, arena)
    own, total = place_own_regions(fn, options, total)
    fn.attrs["smem_bytes"] = total
    if total:
        fn.attrs["smem"] = SmemPlan(tuple(scratch + area + own), total)
    return fn


def uses_arena(fn, options) -> bool:
    """Whether anything but a dot loop's ring would use shared memory: a scratch user or a
    region of the dot area (the persistent pass, which runs before this one, asks)."""
    T = options.num_threads
    return any(_scratch_bytes(op, T) for op in fn.walk()) or bool(dot_area_regions(fn, T))
