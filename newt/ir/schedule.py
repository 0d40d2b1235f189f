"""Tensor-core schedule objects: the decisions the passes record on the IR and codegen reads.

Where it sits: in the IR, beside the layouts (layouts.py) and the pointer analyses
(pointers.py, index_forms.py). The passes create these objects and the printer shows them;
codegen (newt/codegen/tc/) follows them and never imports the passes:

    DotPlan      engine and instruction kind of each dot (passes/tc/dot.py: op.attrs["dot_plan"])
    RingPlan     a dot loop's ring of S stages, consumed D iterations late (tc/dot_pipeline.py:
                 attrs["ring"])
    TmaOperand   an operand's ring filled by TMA boxes (tc/dot_tma.py: RingPlan.tma)
    RingBox      attention's K / V tiles by boxes of N-D maps (tc/ring_tma.py: attrs["tma"])
    StoreBox     the epilogue's store by TMA boxes (tc/store_tma.py: attrs["tma_store"])
    AccColumns   a column slice of an accumulator's fragment (tc/fragment_split.py:
                 dot_acc_cols's attrs["cols"])
    PersistPlan  one CTA per SM over the programs (tc/persistent.py: fn.attrs["persistent"])
    StagedTile   a loop-invariant A tile staged once (tc/dot_rows.py: attrs["a_tile"])
    TileRef      which dot tile a dot_tile_load fills (tc/dot_loads.py: attrs["tile"])
    TmaBox       one box shape and swizzle (tile_boxes), shared with runtime/tensormap.py

Each knows its shared-memory bytes (`smem_bytes`, `nbytes`); `dot_bytes` and `acc_out_bytes`
give a synchronous dot's tiles and an accumulator's staging, `smem_limit` the arch's limit.
Where they are placed is the shared-memory pass's (newt/ir/shared_memory.py). The plans are
frozen: a pass that refines one records a changed copy (passes/tc/facts.py), and codegen keeps
the C names it declares for them in its own Emitter.state, not in the IR. Smaller decisions
remain plain attrs keys (a_src / b_src, b_kmajor, tile_ring, cp_wait, ring_issue, ring_ready,
wg_defer, rotate, recompute_index), listed where each pass sets them.
"""
from __future__ import annotations

import dataclasses

from ..errors import CompilationError
from .layouts import AccLayout, SwappedAccLayout

# K covered by one instruction is 32 bytes of the input element
_TC_INPUTS = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "float8e4nv": 1,
              "float8e5": 1}
# 8-bit floats: wgmma's type names; a mixed pair is "<A>_<B>" (newt/passes/tc/dot_fp8.py)
_FP8_KIND = {"float8e4nv": "e4m3", "float8e5": "e5m2"}
FP8_KINDS = ("e4m3", "e5m2", "e4m3_e5m2", "e5m2_e4m3")


@dataclasses.dataclass(frozen=True)
class DotPlan:
    engine: str            # "mma" | "fma"
    kind: str              # "f16" | "bf16" | "tf32" | "s8" | FP8_KINDS | "fma"
    M: int
    N: int
    K: int
    esize: int
    swap: bool = False     # computed as C^T = B^T A^T (SwappedAccLayout; passes/tc/dot_tma.py)
    wgmma: bool = False    # the instruction: wgmma.mma_async, else mma.sync (passes/tc/dot.py,
    #                        record_instructions)
    why: str = ""          # an fma plan's reason: which input or shape keeps it off tensor
    #                        cores; an mma plan's: why its warps split N (col_groups)
    col_groups: int = 1    # the accumulator's warp groups along N (AccLayout's C)

    def __str__(self):
        return f"{self.engine}:{self.kind}[{self.M}x{self.N}x{self.K}]" + \
            (" swapped" if self.swap else "") + (" wgmma" if self.wgmma else "") + \
            (f" n-split={self.col_groups}" if self.col_groups > 1 else "") + \
            (f" ({self.why})" if self.why else "")


def acc_out_bytes(op) -> int:
    """Shared-memory bytes a tensor-core dot_acc_out stages its tile through: the tile in the
    box format when it leaves by TMA (passes/tc/store_tma.py), else rows padded by 8 words
    (codegen/tc/dot_epilogue.py): a 16- or 8-bit float (the epilogue's cast done in the
    fragment, passes/tc/fragment_epilogue.py) in its own width, anything else in its register
    width. It goes through the dot's ring, which grows to it when it is larger
    (passes/tc/regions.py)."""
    sb = op.attrs.get("tma_store")
    if sb is not None:
        return sb.rows * sb.cols * sb.esize
    x = op.operands[0]
    M, N = x.shape          # the tile leaving (a column slice of the accumulator, or all of it)
    if x.dtype.name in ("float16", "bfloat16", "float8e4nv", "float8e5"):
        return M * (N * x.dtype.bits // 8 + 16)          # rows padded by 16 bytes
    return M * (N + 8) * (8 if x.dtype.bits == 64 else 4)


def acc_layout(plan: "DotPlan", num_threads: int):
    """The register layout of a tensor-core dot's accumulator."""
    if plan.swap:
        return SwappedAccLayout(plan.M, plan.N, num_threads)
    return AccLayout(plan.M, plan.N, num_threads, plan.col_groups)


def uses_wgmma(arch: str, num_threads: int, plan: DotPlan, a_src=None) -> bool:
    """Whether codegen computes a tensor-core dot with wgmma (else mma.sync): sm_90a, whole
    warpgroups (in each column group, when the warps split N: 64-row m64 tiles), 16-bit,
    tf32, fp8 or int8 inputs; A from registers (a_src "regs") only for 16-bit."""
    if plan.engine != "mma" or not (arch.startswith("sm_9") and arch.endswith("a")):
        return False
    if (num_threads // 32 // plan.col_groups) % 4:
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
    W = num_threads // 32
    # the fragment gives each warp 16-row strips (AccLayout); where M rows cannot cover every
    # warp, the warps split N too: the fewest column groups that fit (1: no split)
    C = AccLayout.col_groups(M, N, num_threads)
    if kind is None:
        why = f"{dt} x {b.dtype.name} inputs" + (f" with input_precision={prec!r}"
                                                 if dt == "float32" else "")
    elif C is None:
        why = (f"N = {N} is not a multiple of 16" if N % 16 else
               f"{M} rows do not split into 16-row strips over {W} warps, nor N = {N} into "
               f"column slices of 16 over the rest")
    elif (K * esize) % 32 or K * esize < 32:
        why = f"K = {K} is under 32 bytes or not a multiple of them"
    elif C > 1:
        return DotPlan("mma", kind, M, N, K, esize, col_groups=C,
                       why=f"{M} rows in 16-row strips over {W // C} of {W} warps: N in {C} "
                           f"column slices of {N // C}")
    else:
        return DotPlan("mma", kind, M, N, K, esize)
    return DotPlan("fma", "fma", M, N, K, esize, why=why)


def a_tile_bytes(op, plan) -> int:
    if op.attrs.get("a_src") in ("regs", "staged"):
        return 0
    return -(-plan.M * plan.K * plan.esize // 1024) * 1024


def b_tile_bytes(plan) -> int:
    return -(-plan.K * plan.N * plan.esize // 1024) * 1024


def dot_bytes(op, plan) -> int:
    """Shared memory of a synchronous tensor-core dot: its A tile (unless A comes from
    registers or a staged tile) at a 1024-byte aligned size, then its B tile (two of them,
    1024-byte aligned, when it is a ring of R buffers: attrs["tile_ring"], passes/tc/dot_loads.py)."""
    ring = op.attrs.get("tile_ring")
    if ring:
        return a_tile_bytes(op, plan) + ring * b_tile_bytes(plan)
    return a_tile_bytes(op, plan) + plan.K * plan.N * plan.esize


@dataclasses.dataclass(frozen=True, eq=False)
class StagedTile:
    """A tile staged into shared memory once and read by several dots (printed in the IR; its
    region is the dot_stage_a op's attrs["smem"], and the dots' attrs["smem_a"])."""
    M: int
    K: int
    esize: int

    @property
    def nbytes(self):
        return self.M * self.K * self.esize

    def __str__(self):
        return f"staged[{self.M}x{self.K}]"


class TileRef:
    """Which tile of which dot a dot_tile_load fills (shown as `a-tile` / `b-tile`)."""

    def __init__(self, dot, role):
        self.dot, self.role = dot, role

    def __str__(self):
        return f"{self.role}-tile"


# ----------------------------------------------------------------------------- rings, TMA, persistence
# (recorded by passes/tc/dot_pipeline.py, dot_tma.py, ring_tma.py, store_tma.py, persistent.py)

@dataclasses.dataclass(frozen=True, eq=False)
class RingPlan:
    stages: int            # S: tiles in shared memory
    defer: int             # D: a tile is consumed D iterations after its copy started
    wait_after: int        # wgmma groups left in flight after a consumption (1 or 0)
    a_bytes: int           # stage layout: A tile, then B tile (both 1024-byte aligned)
    stage_bytes: int
    early: bool = False    # consume at the iteration's first ring load, before its copies
    b_kmajor: bool = False    # B's tile is [N][K]: 4- and 1-byte inputs, and any B whose
                              # pointer block is contiguous along K (x @ W.T)
    tma: list | None = None   # [TmaOperand A, TmaOperand B] when boxes arrive by TMA
    tma_why: str = ""         # why a wgmma ring stays on cp.async (printed)

    @property
    def smem_bytes(self) -> int:
        """The ring: S stages of an A and a B tile."""
        return self.stages * self.stage_bytes

    def __str__(self):
        how = ", tma" if self.tma else (f", cp.async: {self.tma_why}" if self.tma_why else "")
        return f"ring(S={self.stages}, D={self.defer}{how})"


@dataclasses.dataclass(frozen=True, eq=False)
class TmaOperand:
    role: str                 # "a" or "b"
    map_index: int            # which extra kernel parameter holds this operand's map
    rows: int                 # the tile (= the box set) in elements
    cols: int
    esize: int
    row0: object              # scalar Value or int: the tile's first row / column at iteration 0
    col0: object
    adv_axis: int             # the axis the loop advances (0 rows, 1 cols)
    adv: int                  # elements per iteration along adv_axis
    outer: list = dataclasses.field(default_factory=list)   # scalar Values: the coordinates
                              # of the map's outer dimensions (a batch), one index each

    @property
    def smem_bytes(self) -> int:
        """One stage's tile of this operand."""
        return self.rows * self.cols * self.esize


@dataclasses.dataclass(repr=False)
class RingBox:
    """How one ring load's tile is copied: boxes of map `map_index` (rank 2 + len(coords))."""
    map_index: int
    rows: int                 # the tile: rows x cols elements, cols contiguous
    cols: int
    esize: int
    col0: int                 # first column
    row_rest: object          # the first row at iteration iv: row_rest + iv * row_c
    row_c: int                # (row_rest None, an int or a Value defined before the loop)
    coords: list              # the u terms' scalar Values, outer map dimensions in order

    @property
    def smem_bytes(self) -> int:
        return self.rows * self.cols * self.esize

    def __repr__(self):     # (the printed IR: prefetch attrs tma=[...])
        return f"box(map {self.map_index}, {self.rows}x{self.cols}, rank {2 + len(self.coords)})"


@dataclasses.dataclass
class StoreBox:
    map_index: int
    rows: int                 # the tile: BM x BN elements of `esize` bytes
    cols: int
    esize: int
    row0: object              # scalar Value or int: the tile's first row / column
    col0: object
    ptr: object               # the pointer parameter's Value, the row stride (Value or int)
    stride: object
    bound_r: object           # the mask's bounds (Value or int)
    bound_c: object
    outer: list = dataclasses.field(default_factory=list)   # scalar Values: the coordinates
                              # of the map's outer dimensions (a batch); ptr is then the
                              # scalar base P + u * s the per-element fallback stores from

    @property
    def smem_bytes(self) -> int:
        """The staged tile the boxes are stored from (in the ring's idle region)."""
        return self.rows * self.cols * self.esize

    def __repr__(self):       # (the printed IR)
        rank = f", rank {2 + len(self.outer)}" if self.outer else ""
        return f"box(map={self.map_index}, {self.rows}x{self.cols}{rank})"


@dataclasses.dataclass(frozen=True)
class AccColumns:
    """Columns [first, first + width) of an accumulator of `of` columns, in the fragment: the
    slice holds AccLayout(M, width)'s slots, and slot s of it is slot `slot(s)` of the whole
    fragment's AccLayout(M, of) (same thread, same row; both lay out each block of rows a
    thread holds 8 columns at a time, 4 slots per 8 columns, so a slice of whole 8-column
    chunks is, in every such block, the run of width / 2 slots starting at first / 2)."""
    first: int
    width: int
    of: int

    def slot(self, s):
        """The whole fragment's slot of slice slot s (an int, or a C expression)."""
        run, skip = self.width // 2, self.of // 2
        if isinstance(s, int):
            return (s // run) * skip + self.first // 2 + s % run
        return f"((({s}) / {run}) * {skip} + {self.first // 2} + ({s}) % {run})"

    def __str__(self):
        return f"cols[{self.first}:{self.first + self.width}] of {self.of}"

    __repr__ = __str__


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PersistPlan:
    ring: object              # the dot's RingPlan
    loop: object
    store: object                # the tma_store
    slice_ops: list           # top-level scalar ops computing the boxes' coordinates
    bound_ops: list           # ... and the loop's bounds (no program id among them)
    box_bytes: int            # one 64-column panel of the C tile
    n_boxes: int
    free_boxes: int           # panels staged in the freed ring stage; the rest in `extra`

    @property
    def smem_bytes(self) -> int:
        """Beyond the ring: the C panels that do not fit its freed stage."""
        return self.extra_bytes

    @property
    def extra_bytes(self) -> int:
        return (self.n_boxes - self.free_boxes) * self.box_bytes

    def __repr__(self):
        return (f"persistent(S={self.ring.stages}, C panels {self.free_boxes} in the freed "
                f"stage + {self.n_boxes - self.free_boxes})")


# ----------------------------------------------------------------------------- shared memory

# opt-in dynamic shared memory per block (bytes), by compute capability
SMEM_LIMITS = {"sm_90": 227 * 1024, "sm_80": 163 * 1024, "sm_87": 163 * 1024,
               "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_75": 64 * 1024, "sm_70": 96 * 1024}


def smem_limit(arch: str) -> int:
    base = arch.rstrip("af")
    if base in SMEM_LIMITS:
        return SMEM_LIMITS[base]
    digits = "".join(ch for ch in base if ch.isdigit())
    return SMEM_LIMITS["sm_90"] if digits and int(digits) >= 90 else 48 * 1024


def check_limit(fn, options, nbytes, loc=None):
    lim = smem_limit(options.arch)
    if nbytes > lim:
        raise CompilationError(
            f"kernel `{fn.name}` needs {nbytes} bytes of shared memory ({nbytes / 1024:.1f} KB); "
            f"{options.arch} allows at most {lim} bytes ({lim // 1024} KB) per block: use "
            f"smaller blocks or fewer stages", loc)


# ----------------------------------------------------------------------------- TMA boxes

# CUtensorMapSwizzle codes by swizzle width in bytes
SWIZZLE_CODE = {0: 0, 32: 1, 64: 2, 128: 3}
# CUtensorMapDataType codes by newt's kind names
DTYPE_CODE = {"u8": 0, "u16": 1, "u32": 2, "f16": 6, "f32": 7, "bf16": 9, "tf32": 11}


@dataclasses.dataclass(frozen=True)
class TmaBox:
    """A 2-D box of `outer` rows x `inner` elements (inner contiguous in global memory and in
    shared memory), written with a `swizzle`-byte swizzle."""
    inner: int
    outer: int
    esize: int
    swizzle: int

    @property
    def nbytes(self) -> int:
        return self.inner * self.outer * self.esize

    @property
    def swizzle_code(self) -> int:
        return SWIZZLE_CODE[self.swizzle]

    def check(self):
        assert self.inner * self.esize <= self.swizzle or self.swizzle == 0, self
        assert (self.inner * self.esize) % 16 == 0, "box rows must be whole 16-byte chunks"
        assert 1 <= self.inner <= 256 and 1 <= self.outer <= 256, "box dimensions are <= 256"


def tile_boxes(rows: int, cols: int, esize: int) -> tuple[TmaBox, list[tuple[int, int]]]:
    """The box and the (inner element offset, shared-memory byte offset) of each copy that
    fills a rows x cols tile (cols contiguous) in dot.py's Tile format."""
    sw = min(128, cols * esize)
    box = TmaBox(sw // esize, rows, esize, sw)
    box.check()
    return box, [(p * box.inner, p * rows * sw) for p in range(cols * esize // sw)]
