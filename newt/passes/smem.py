"""Shared-memory pass: plans reductions and sizes the one dynamic shared-memory scratch arena.

Consumes IR after the layout pass. Produces:
  op.attrs["plan"]       for reduce: how the three levels split (ReducePlan, printed)
  op.attrs["smem"]       byte offset of the op's scratch region (ops that exchange data
                         between threads: reductions, scans, smem broadcasts/permutes/
                         conversions, scalar atomics whose result is used)
  op.attrs["sync_first"] True when the op must start with a barrier because the previous
                         scratch user may still be reading the same region
  fn.attrs["smem_bytes"] the arena size CompiledKernel.shared_bytes reports

Ping-pong: consecutive scratch users alternate between two regions. Every user has a barrier
between its writes and its reads, so when op k+2 writes region A, every thread has already
passed op k+1's barrier and finished reading op k's region A: no leading barrier is needed.
Where the previous user is unknown (first user in a loop body or after a loop/if) the op
starts with a barrier.

Work that owns shared memory of its own (dot tiles) asks for it with
fn.attrs["extra_smem_bytes"]; it is placed after the scratch regions at
fn.attrs["extra_smem_offset"].

The dot area (after the arena, 1024-byte aligned: wgmma's 128-byte swizzle needs it) holds the
tiles of tensor-core dots, placed by liveness (`plan_dot_regions`): a synchronous dot's tiles
and an accumulator's staging after its loop live for one op (each starts with a barrier); a
staged loop-invariant A tile (dot_stage_a) lives until the end of the last loop that reads it;
a cp.async ring (dot_pipeline.py) is placed by codegen after the dot area. Regions whose
intervals do not meet share addresses (first fit), so the two dots of attention, and the two
key loops of causal attention, reuse one another's tiles. Results: op.attrs["smem_offset"]
(dot, dot_acc_out), StagedTile.offset, fn.attrs["dot_area"].

The total must fit the device's per-block limit (`SMEM_LIMITS`, the opt-in maximum): a kernel
over it is a CompilationError naming the limit, raised here (and by codegen's late regions).
"""
from __future__ import annotations

import dataclasses

from ..ir.core import is_block
from ..ir.layouts import CyclicLayout
from ..ir.schedule import check_limit
from .scratch import SCRATCH_OPS, plan_scratch

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


def _scratch_bytes(op, num_threads) -> int:
    c = op.opcode
    if c in SCRATCH_OPS:
        return plan_scratch(op)
    if c == "reduce":
        plan = op.attrs["plan"]
        x = op.operands[0]
        per = acc_dtype_bytes(x.dtype) + (4 if op.attrs["kind"] in ("argmax", "argmin") else 0)
        return plan.entries * per
    if c == "scan":
        x = op.operands[0]
        lay = x.attrs["layout"]
        if op.attrs.get("plan") == "warp":
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
                x = op.operands[0]
                fast = (len(x.shape) == 1 and op.attrs["kind"] == "sum"
                        and not op.attrs.get("reverse") and not x.attrs["layout"].partial
                        and isinstance(x.attrs["layout"], CyclicLayout))
                op.attrs["plan"] = "warp" if fast else "smem"
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
    for op, _ in p.users:
        op.attrs["smem"] = 0 if single else op.attrs["smem"] * region
    regions = region if single else 2 * region
    extra = fn.attrs.get("extra_smem_bytes", 0)
    if extra:
        fn.attrs["extra_smem_offset"] = regions
    fn.attrs["smem_bytes"] = regions + extra
    plan_dot_regions(fn, options)
    return fn


def _align(n, a=1024):
    return -(-n // a) * a


def _dot_regions(fn, num_threads):
    """[(bytes, start, end, setter, loc)] in program order (indices of fn.walk())."""
    from ..ir.schedule import acc_layout, acc_out_bytes
    order = {id(op): i for i, op in enumerate(fn.walk())}

    def end_of(op):                     # the last index inside op (op itself for plain ops)
        last = order[id(op)]
        for r in op.regions:
            for o in r.walk():
                last = max(last, order[id(o)])
        return last

    def loops_of(op):                   # enclosing loops, innermost first
        out, b = [], op.parent
        while b is not None and isinstance(b.parent, type(op)):
            if b.parent.opcode in ("for", "while"):
                out.append(b.parent)
            b = b.parent.parent
        return out

    regs = []
    staged = {}
    first_load = {}                     # dot -> index of its first dot_tile_load
    for op in fn.walk():
        i = order[id(op)]
        c = op.opcode
        if c == "dot_tile_load":
            first_load.setdefault(id(op.attrs["tile"].dot), i)
        plan = op.attrs.get("dot_plan")
        if c == "dot" and plan is not None and plan.engine == "mma":
            if op.attrs.get("ring") is not None:
                continue                # the ring's late region (below)
            from ..ir.schedule import dot_bytes
            live = op.attrs.get("live")        # prefetched tiles (dot_loads.py)
            start, stop = (order[id(live.x[0])], end_of(live.x[1])) if live is not None \
                else (first_load.pop(id(op), i), i)
            regs.append((dot_bytes(op, plan), start, stop,
                         lambda off, op=op: op.attrs.__setitem__("smem_offset", off), op.loc))
            tile = op.attrs.get("a_tile")
            if tile is not None:
                ls = loops_of(op)
                last = end_of(ls[-1]) if ls else i
                staged[id(tile)] = (tile, max(staged.get(id(tile), (None, 0))[1], last))
        elif c == "dot_stage_a":
            tile = op.attrs["tile"]
            t0 = staged.get(id(tile), (tile, i))
            staged[id(tile)] = (tile, t0[1])
            op.attrs["_start"] = i
        elif c == "dot_acc_out" and plan is not None and plan.engine == "mma":
            ring = op.attrs.get("ring")
            dst = op.result.attrs.get("layout")
            if dst == acc_layout(plan, num_threads):
                continue
            nbytes = acc_out_bytes(op)
            if ring is not None and ring.stages * ring.stage_bytes >= nbytes:
                continue                # reuses the ring (dot_epilogue.py)
            regs.append((nbytes, i, i,
                         lambda off, op=op: op.attrs.__setitem__("smem_offset", off), op.loc))
    for op in fn.walk():
        if op.opcode == "dot_stage_a":
            tile = op.attrs["tile"]
            _, last = staged[id(tile)]
            i = op.attrs.pop("_start")
            regs.append((tile.nbytes, i, max(i, last),
                         lambda off, t=tile: setattr(t, "offset", off), op.loc))
    # cp.async rings (dot_pipeline.py) keep their late region (codegen's dot._region, after
    # the dot area, checked against the limit there): matmul kernels stay as they were
    return regs


def plan_dot_regions(fn, options):
    """Place the dot area's regions by liveness (module docstring) and check the total."""
    fn.attrs["dot_area"] = _align(fn.attrs.get("smem_bytes", 0))
    area = fn.attrs["dot_area"]
    regs = _dot_regions(fn, options.num_threads)
    placed = []                          # (offset, bytes, start, end)
    for nbytes, start, end, setter, loc in sorted(regs, key=lambda r: (r[1], -r[0])):
        nbytes = _align(nbytes)
        live = [(o, b) for o, b, s, e in placed if s <= end and start <= e]
        off = min(c for c in [0] + [o + b for o, b in live]
                  if not any(c < o + b and o < c + nbytes for o, b in live))
        placed.append((off, nbytes, start, end))
        setter(off)
    extent = max((o + b for o, b, _, _ in placed), default=0)
    if placed:
        fn.attrs["smem_bytes"] = area + 1024 + extent      # + run-time alignment slack
    biggest = max(regs, key=lambda r: r[0])[4] if regs else None
    check_limit(fn, options, fn.attrs["smem_bytes"], biggest)
    return fn
