"""The search space, derived from a trace of the kernel on the actual arguments.

Consumes the tracer (its tunable tile dims in config order and its programs); produces configs:
the heuristic default, random samples and the one-step neighbours the pattern search walks.
Choices are pruned by what is known to matter, so the search stays small:
  - tiles a matmul reads: 64..256 on the grid dims (down to 16 for small extents), 32..128 on K;
  - row kernels (a full slice `:` in the body): rows per program 1..64, one row the default;
  - other tiles: powers of two up to the extent (at most 4096 elements per program dim);
  - num_warps 4/8 with a dot, 1..16 otherwise; num_stages only where a device loop exists;
  - group size (program ordering) only for 2-D grids with a dot;
  - each `hl.register_tunable`: its fragment's choices (autotuner.py), its default first;
  - `reduction_split` (split.py) for a program whose device loop only sums: 1, 2, 4, ... while
    each share keeps >= 1024 elements of the loop; the default brings the programs to about
    4x the SM count (132 without CUDA) when the grid alone has fewer than the SM count.
Configs that cannot be good are left out before anything compiles (`valid`):
  - a dot's shared-memory ring over 200 KB, or more than 128 fp32 accumulators per thread;
  - without a dot, more elements per thread than registers hold: at most 32 per thread up to 8
    warps, 256 / num_warps above, half that for fp64/int64 values (a block of 1024+ threads gets only 64 registers each). Those
    spill, and NVRTC takes 5-10x longer to compile them. When no config of a program meets the
    bound (huge rows), the ones closest to it stay;
  - configs at least as register-hungry as one whose ptxas report showed spills (`note_spill`:
    every block size >= its, num_warps <= its, num_stages >= its).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import random

import torch

from .. import ir
from ..ir import next_pow2
from ..autotuner import fragment_choices, fragment_default
from ..config import Config
from ..split import KNOB, split_loop


@dataclasses.dataclass
class TileInfo:
    extent: int
    kind: str          # "grid" | "loop" | "bs" (an hl.register_block_size)
    in_dot: bool
    row: int           # elements per program from full slices (1 when none)
    program: int
    bounds: tuple | None = None    # hl.register_block_size(min, max)
    batch: bool = False            # a batched matmul's batch tile: pinned to 1
    role: str | None = None        # in a dot: "mn" (an output dim) or "k" (contracted)
    outer: tuple = ()              # indices of the tiles of the loops enclosing this loop


def _pow2_range(lo, hi):
    out, b = [], lo
    while b <= hi:
        out.append(b)
        b *= 2
    return out


def _has_loop(items):
    return any(isinstance(it, ir.Loop) for it in items)


class Space:
    def __init__(self, tracer):
        self.tiles: list[TileInfo] = []
        self.programs = tracer.programs
        owner = {}
        from ..pads import all_values
        kdims = set()       # dims some dot contracts over (the others a dot reads are M / N)
        for pi, p in enumerate(self.programs):
            # (a registered block size used as a size is a tile dim here, not a row)
            row = math.prod(max(next_pow2(d.extent), 16 if d.in_dot else 1)
                            for d in p.dims if d.kind == "full" and d.block_of is None)
            for d in p.dims:
                owner[id(d)] = (pi, row)
            kdims |= {id(v.attrs["kdim"]) for v in all_values(p.items) if v.op == "dot"}
        enclosing = _enclosing_loops(self.programs)
        position = {id(d): i for i, d in enumerate(tracer.tunable)}
        for d in tracer.tunable:
            users = d.users or [d]     # a registered block size: what the tiles using it need
            pi, row = owner.get(id(users[0]), (0, 1))
            kind = "bs" if d.users or getattr(d, "bs_range", None) else d.kind   # no grid/K part
            in_dot = any(u.in_dot for u in users)
            role = ("k" if any(id(u) in kdims for u in users) else "mn") if in_dot else None
            outer, lp = [], enclosing.get(id(d.loop)) if d.loop is not None else None
            while lp is not None:
                outer += [position[id(e)] for e in lp.dims if id(e) in position]
                lp = enclosing.get(id(lp))
            self.tiles.append(TileInfo(d.extent, kind, in_dot, row, pi,
                                       getattr(d, "bs_range", None), getattr(d, "batch", False),
                                       role, tuple(outer)))
        self.has_dot = any(p.has_dot for p in self.programs)
        self.has_loops = any(_has_loop(p.items) for p in self.programs)
        self.grouped = any(p.has_dot and len(p.grid) == 2 for p in self.programs)
        self.fp32_dot = any(p.fp32_dot for p in self.programs)
        # a registered block size is never 1 where it can be more: tiles pinned to 1 are
        # indexes (they drop their dim), which would change what hl.zeros([tile, ...]) means
        self.block_choices = [[b for b in ch if b > 1 or t.kind != "bs"] or ch
                              for ch, t in ((self._choices(t), t) for t in self.tiles)]
        self.warps = [4, 8] if self.has_dot else [1, 2, 4, 8, 16]
        self.stages = ([2, 3, 4, 5] if self.has_dot else [1, 2, 3]) if self.has_loops else [3]
        self.groups = [1, 4, 8, 16] if self.grouped else [8]
        frags = getattr(tracer, "tunables", {})
        # name -> (choices, default): the registered tunables, stepped like a block size
        self.knobs = {n: (fragment_choices(f), fragment_default(f)) for n, f in sorted(frags.items())}
        self._split = _splittable(self.programs, position)
        if self._split:
            self.knobs[KNOB] = (_pow2_range(1, self._split[0][2]), 1)
        self.spilled: list[Config] = []
        # per program: the lowest register pressure any config reaches (1.0 = at the bound)
        self._floor = {}
        self._words = {}      # per program: registers per element of its widest value (fp64: 2)
        from ..pads import all_values
        for pi, prog in enumerate(self.programs):
            sizes = [v.dtype.itemsize for v in all_values(prog.items) if v.dtype is not None]
            self._words[pi] = max(1, max(sizes, default=4) // 4)
        for pi, prog in enumerate(self.programs):
            if prog.has_dot:
                continue
            least = math.prod(ch[0] for ch, t in zip(self.block_choices, self.tiles)
                              if t.program == pi) * next((t.row for t in self.tiles
                                                          if t.program == pi), 1)
            self._floor[pi] = min(_pressure(least * self._words[pi], w) for w in self.warps)

    def note_spill(self, cfg: Config):
        """ptxas reported spills for `cfg`: drop every config at least as register-hungry."""
        self.spilled.append(cfg)

    def _choices(self, t: TileInfo):
        if t.batch:
            return [1]
        if t.bounds is not None:
            lo, hi = t.bounds
            got = [b for b in self._choices(dataclasses.replace(t, bounds=None)) if lo <= b <= hi]
            return got or [next_pow2(max(lo, 1))]
        hi_ext = next_pow2(t.extent)
        if t.in_dot:
            cap, floor = (256, 64) if t.role == "mn" else (128, 32)
            hi = max(16, min(cap, hi_ext))
            return _pow2_range(min(floor, hi), hi)
        if t.row > 1:
            return _pow2_range(1, max(1, min(hi_ext, 64, 16384 // t.row)))
        return _pow2_range(1, max(1, min(hi_ext, 4096)))

    # ------------------------------------------------------------------ validity
    def program_elems(self, cfg: Config, pi: int) -> int:
        # loop tiles of sibling loops are not live together: count the largest nest only (a
        # loop's tile times those of the loops around it: a jagged loop in a loop makes 3-D
        # values)
        b = cfg.block_sizes
        mine = [(i, t) for i, t in enumerate(self.tiles) if t.program == pi]
        n = math.prod(b[i] for i, t in mine if t.kind != "loop") * max(
            [b[i] * math.prod(b[j] for j in t.outer) for i, t in mine if t.kind == "loop"],
            default=1)
        row = next((t.row for t in self.tiles if t.program == pi), 1)
        return n * row

    def valid(self, cfg: Config) -> bool:
        if len(cfg.block_sizes) != len(self.tiles):
            return False
        for s in self.spilled:
            if (all(b >= c for b, c in zip(cfg.block_sizes, s.block_sizes))
                    and cfg.num_warps <= s.num_warps and cfg.num_stages >= s.num_stages):
                return False
        for pi, prog in enumerate(self.programs):
            if prog.has_dot:     # accumulator registers and the shared-memory ring must fit
                mine = [(b, t) for b, t in zip(cfg.block_sizes, self.tiles) if t.program == pi]
                grid = math.prod(b for b, t in mine if t.role == "mn")
                k = math.prod(b for b, t in mine if t.role == "k") or 1
                if grid > 32768 or cfg.num_stages * (sum(b for b, t in mine if t.role == "mn")
                                                     * k * (4 if prog.fp32_dot else 2)) > 200 * 1024:
                    return False
                if grid > 128 * 32 * cfg.num_warps:     # accumulators per thread
                    return False
                continue
            n = self.program_elems(cfg, pi)
            if n > (1 << 16):
                return False
            if _pressure(n * self._words[pi], cfg.num_warps) > max(1.0, self._floor.get(pi, 1.0)):
                return False
            if not self.has_dot and cfg.num_warps * 32 > max(32, n):
                return False                       # more threads than elements: idle warps
        return True

    # ------------------------------------------------------------------ points
    def default(self) -> Config:
        blocks = []
        fp32 = self.fp32_dot
        for t, ch in zip(self.tiles, self.block_choices):
            if t.in_dot:
                # an M/N tile beside a whole row (a full slice in the dot, as in matmul +
                # layer norm): ~8192 accumulators per program, not 128 rows of the row
                want = (128 if t.row == 1 else max(16, 8192 // t.row)) if t.role == "mn" \
                    else (32 if fp32 else 64)
            elif t.row > 1:      # rows per program: one; rows per loop step: ~4096 elements
                want = 1 if t.kind != "loop" else max(1, 4096 // t.row)
            elif t.kind == "loop":      # ~1024 elements across a nest of loops, shared evenly
                i = len(blocks)
                levels = max(len(u.outer) + 1 for u in self.tiles
                             if u is t or i in u.outer) - len(t.outer)
                want = max(1, 1024 // math.prod(blocks[j] for j in t.outer)) ** (1 / levels)
            else:   # elementwise: about 1024 elements per program, the last dim widest
                rest = [u for u in self.tiles[len(blocks) + 1:] if u.program == t.program]
                inner = math.prod(min(next_pow2(u.extent), 1024) for u in rest)
                want = max(1, 1024 // max(1, inner))
            blocks.append(min(ch, key=lambda b: abs(math.log2(b) - math.log2(want))))
        cfg = Config(tuple(blocks), 4, 3, 8)
        if self.has_dot:
            mn = [(b, t) for b, t in zip(blocks, self.tiles) if t.role == "mn"]
            acc = math.prod(b for b, _ in mn) * max((t.row for _, t in mn), default=1)
            big = acc >= 16384 or any(b >= 128 for b, _ in mn)   # accumulators: 8 warps
            w = 8 if big else 4
            # newt's tensor-core fragment gives each warp 16-row strips of the first (row)
            # tile: fewer warps where the rows do not split over them (else the dot runs on FMA)
            while mn and w > 1 and mn[0][0] % (16 * w):
                w //= 2
            cfg = dataclasses.replace(cfg, num_warps=w)
        else:
            row = max((t.row for t in self.tiles), default=1)
            if row > 1:
                cfg = dataclasses.replace(cfg, num_warps=max(1, min(16, row // 512)))
            up = cfg
            while not self.valid(up) and up.num_warps < 16:   # more threads for big tiles first
                up = dataclasses.replace(up, num_warps=up.num_warps * 2)
            cfg = up if self.valid(up) else cfg
            while not self.valid(cfg) and cfg.num_warps > 1:
                cfg = dataclasses.replace(cfg, num_warps=cfg.num_warps // 2)
        stages = 3 if 3 in self.stages else self.stages[len(self.stages) // 2]
        knobs = {n: d for n, (_, d) in self.knobs.items()}
        if self._split:
            knobs[KNOB] = self.split_default(cfg)
        return self._with_knobs(dataclasses.replace(cfg, num_stages=stages), knobs)

    def split_default(self, cfg: Config) -> int:
        """The SPLIT that brings the first splittable program's launch to about 4x the SM
        count, when its grid alone has fewer programs than SMs (1 otherwise)."""
        grid, positions, most = self._split[0]
        programs = math.prod(-(-d.extent // (cfg.block_sizes[positions[id(d)]]
                                             if id(d) in positions else (d.block or 1)))
                             for d in grid)
        sms = sm_count()
        if programs >= sms:
            return 1
        split = 1
        while split * 2 <= most and programs * split * 2 <= 4 * sms:
            split *= 2
        return split

    def few_programs(self, cfg: Config, limit: int = 256) -> Config:
        """cfg with the launch grid's tiles grown (within their choices) until each launch has
        at most `limit` programs. For the interpreter: it runs programs one after another,
        each as whole-tile torch ops, so a big launch of small tiles spends its time in Python
        per program. Launches of at most `limit` programs keep cfg's tiles."""
        blocks = list(cfg.block_sizes)
        for pi in range(len(self.programs)):
            grid = [i for i, t in enumerate(self.tiles) if t.program == pi and t.kind == "grid"]
            while math.prod(-(-self.tiles[i].extent // blocks[i]) for i in grid) > limit:
                # the tile cut into the most pieces that may still grow
                grow = [i for i in grid if any(b > blocks[i] for b in self.block_choices[i])]
                if not grow:
                    break
                i = max(grow, key=lambda j: -(-self.tiles[j].extent // blocks[j]))
                blocks[i] = min(b for b in self.block_choices[i] if b > blocks[i])
        return dataclasses.replace(cfg, block_sizes=tuple(blocks))

    def _with_knobs(self, cfg: Config, values: dict) -> Config:
        return dataclasses.replace(cfg, tunables=tuple(sorted(values.items()))) if values else cfg

    # tensor-core matmul tilings that run well on sm_80/sm_90 (BM, BN, BK, warps, stages): the
    # pattern search moves one field at a time and cannot walk from 128x128 at 4 warps to
    # 128x256 at 8 (every step between is worse or invalid), so these are tried up front
    _DOT_PORTFOLIO = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 256, 64, 8, 4),
                      (128, 128, 64, 4, 4)]

    def portfolio(self) -> list[Config]:
        """Known-good tilings of a matmul-shaped program (two grid tiles and one loop tile in
        the dot), applied over the default; other kernels get none. Invalid ones are left out."""
        base = self.default()
        dot = [i for i, t in enumerate(self.tiles) if t.in_dot]
        grid = [i for i in dot if self.tiles[i].kind == "grid"]
        loop = [i for i in dot if self.tiles[i].kind == "loop"]
        if len(grid) != 2 or len(loop) != 1 or len({self.tiles[i].program for i in dot}) != 1:
            return []
        out = []
        for bm, bn, bk, w, st in self._DOT_PORTFOLIO:
            if self.fp32_dot:
                bk //= 2                         # tf32: half the K depth fits the same ring
            blocks = list(base.block_sizes)
            for i, want in zip((grid[0], grid[1], loop[0]), (bm, bn, bk)):
                blocks[i] = want if want in self.block_choices[i] else blocks[i]
            cfg = dataclasses.replace(base, block_sizes=tuple(blocks), num_warps=w,
                                      num_stages=st if st in self.stages else base.num_stages)
            if cfg != base and cfg not in out and self.valid(cfg):
                out.append(cfg)
        return out

    def sample(self, rng: random.Random, n: int) -> list[Config]:
        out, seen = [], set()
        for _ in range(n * 20):
            if len(out) >= n:
                break
            cfg = Config(tuple(rng.choice(ch) for ch in self.block_choices), rng.choice(self.warps),
                         rng.choice(self.stages), rng.choice(self.groups))
            cfg = self._with_knobs(cfg, {n: rng.choice(ch) for n, (ch, _) in self.knobs.items()})
            if cfg not in seen and self.valid(cfg):
                seen.add(cfg)
                out.append(cfg)
        return out

    def neighbors(self, cfg: Config) -> list[Config]:
        out = []

        def step(choices, value):
            i = choices.index(value) if value in choices else None
            if i is None:
                return []
            return [choices[j] for j in (i - 1, i + 1) if 0 <= j < len(choices)]

        for k, ch in enumerate(self.block_choices):
            for b in step(ch, cfg.block_sizes[k]):
                blocks = list(cfg.block_sizes)
                blocks[k] = b
                out.append(dataclasses.replace(cfg, block_sizes=tuple(blocks)))
        for field, ch in (("num_warps", self.warps), ("num_stages", self.stages),
                          ("group_size", self.groups)):
            for v in step(ch, getattr(cfg, field)):
                out.append(dataclasses.replace(cfg, **{field: v}))
        values = dict(cfg.tunables)
        for name, (ch, default) in self.knobs.items():
            for v in step(ch, values.get(name, default)):
                out.append(self._with_knobs(cfg, {**values, name: v}))
        return [c for c in out if self.valid(c)]

    def size(self) -> int:
        return math.prod(len(c) for c in self.block_choices) * len(self.warps) * len(
            self.stages) * len(self.groups) * math.prod(len(c) for c, _ in self.knobs.values())


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return 132        # an H100 SXM: what the heuristic assumes without a GPU to ask


def _splittable(programs, position) -> list:
    """(grid dims, {id(dim): config slot}, largest SPLIT) of each program with a device loop
    split.py may split, whose loop is long enough to split at least in two."""
    out = []
    for p in programs:
        lp = split_loop(p)
        most = 1
        while lp is not None and lp.dims[0].extent // (most * 2) >= 1024 and most < 1024:
            most *= 2
        if most > 1:
            out.append((p.grid, position, most))
    return out


def _enclosing_loops(programs) -> dict:
    """id(loop) -> the loop around it (None at a program's top level)."""
    out = {}

    def walk(items, around):
        for it in items:
            if isinstance(it, ir.Loop):
                out[id(it)] = around
                walk(it.items, it)
            elif isinstance(it, ir.If):
                walk(it.then, around)
                walk(it.other, around)
    for p in programs:
        walk(p.items, None)
    return out


def _pressure(elems: int, num_warps: int) -> float:
    """Elements per thread over what registers hold (1.0 = at the bound)."""
    return elems / (32 * num_warps) / min(32, 256 // num_warps)


def tolerance(dtype: torch.dtype, tf32: bool = False):
    """(rtol, atol) a candidate must meet against the oracle, by output dtype:
    fp64 1e-7; fp32 1e-4 (2e-2 when a matmul runs on tf32 tensor cores); fp16/bf16 2e-2;
    integers and bool exact. The absolute tolerance is scaled by max(1, RMS of the oracle's
    output) (bench.compare), so large-K products are judged at their own magnitude."""
    if dtype == torch.float64:
        return 1e-7, 1e-7
    if dtype == torch.float32:
        return (2e-2, 2e-2) if tf32 else (1e-4, 1e-4)
    if dtype in (torch.float16, torch.bfloat16):
        return 2e-2, 2e-2
    return 0.0, 0.0
