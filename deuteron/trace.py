"""Tracing: run the user's @dt.kernel function for real, with tile loops yielding proxies.

Consumes the user's Python function and real torch arguments; produces `ir.Program`s, one per
outer `dt.tile` loop. Host code (allocations, shape arithmetic) runs as ordinary Python. Inside a
tile loop, `dt.tile` yields `Tile` proxies once, so the body runs exactly once; indexing a real
tensor with tiles (torch hands `Tensor.__getitem__`/`__setitem__` to the proxy's
`__torch_function__`) records a load or store, and arithmetic on the loaded `TileValue`s records
the expression (ops.py). Loop-carried variables of inner loops are found by comparing the user
frame's locals before and after the body. Everything unsupported raises `TraceError` at the
user's line.
"""
from __future__ import annotations

import itertools
import sys

import torch
from torch.overrides import TorchFunctionMode

from . import ir, memory, ops, pads, rng  # noqa: F401  (ops first: it completes proxy.py)
from . import jagged as jagged_tiles
from .errors import Loc, TraceError, user_frame, user_loc
from .ir import BlockSize, default_block


def _user_frame():
    f = user_frame(sys._getframe(1))
    return f, user_loc(f)


class Tile:
    """A tile of one dimension, as the loop body sees it while tracing. Index tensors with it;
    `tile.index` is its offsets (int32), `.begin` / `.end` its first / one-past-last offset,
    `.block_size` its size and `.id` its number (begin // block_size); all are tile values, so
    they take part in arithmetic. A block_size=1 tile (an `hl.grid` index) is a scalar: arithmetic
    on the tile itself works on its position."""

    def __init__(self, tracer, dim: ir.Dim):
        self._tracer, self.dim = tracer, dim

    def _attr(self, what, dims=(), dtype=torch.int32):
        return self._tracer.new(what, [], dims, dtype, None, dim=self.dim)

    @property
    def index(self):
        if self.dim.is_index:
            return self.begin
        return self._attr("index", (self.dim,))

    @property
    def begin(self):
        return self._attr("begin")

    @property
    def end(self):
        return self._attr("end")

    @property
    def block_size(self):
        return self._attr("block_size")

    @property
    def id(self):
        return self._attr("tile_id")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        tracer = find_tracer(args)
        return tracer.torch_function(func, args, kwargs or {})

    def __index__(self):
        raise TraceError("a tile is not a host integer: index tensors with it, or use tile.index "
                         "/ tile.begin in the kernel")

    __int__ = __index__

    def _scalar(self):
        if not self.dim.is_index:
            raise TraceError("arithmetic on a tile is not supported: use tile.index (its "
                             "offsets), tile.begin, tile.end, tile.block_size or tile.id")
        return self.begin

    def __add__(self, o): return self._scalar() + o
    def __radd__(self, o): return o + self._scalar()
    def __sub__(self, o): return self._scalar() - o
    def __rsub__(self, o): return o - self._scalar()
    def __mul__(self, o): return self._scalar() * o
    def __rmul__(self, o): return o * self._scalar()
    def __floordiv__(self, o): return self._scalar() // o
    def __mod__(self, o): return self._scalar() % o
    def __lt__(self, o): return self._scalar() < o
    def __le__(self, o): return self._scalar() <= o
    def __gt__(self, o): return self._scalar() > o
    def __ge__(self, o): return self._scalar() >= o

    def __repr__(self):
        return f"<dt tile {self.dim.var or ''} over {self.dim.extent}>"


def find_tracer(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            t = find_tracer(a)
            if t is not None:
                return t
        t = getattr(a, "_tracer", None) or getattr(a, "tracer", None)
        if isinstance(t, Tracer):
            return t
    return None


def _real(t):
    return isinstance(t, torch.Tensor) and t.device.type != "meta"


def _has_proxy(xs):
    from .ops import TileValue
    for x in xs:
        if isinstance(x, (TileValue, Tile)):
            return True
        if isinstance(x, (list, tuple)) and _has_proxy(x):
            return True
    return False


class _BodyMode(TorchFunctionMode):
    """Active while a tile loop body runs: every tensor op there is device code. Indexing a real
    tensor (even `w[:]`) is a load, compute ops on real tensors read them whole; metadata
    (`x.shape`, `x.dtype`, `x.stride()`) and allocations pass through."""

    def __init__(self, tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        from .proxy import TORCH_OPS, dispatch
        kwargs = kwargs or {}
        tr = self.tracer
        if tr.program is None:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__getitem__" and _real(args[0]):
            return tr.load(args[0], args[1])
        if name == "__setitem__" and _real(args[0]):
            return tr.store(args[0], args[1], args[2])
        if _has_proxy(args) or _has_proxy(kwargs.values()) or (
                func in TORCH_OPS and any(_real(a) for a in args)):
            return dispatch(tr, func, args, kwargs)
        return func(*args, **kwargs)


class Tracer:
    """Trace-mode context of one run of the user's function (language.py dispatches to it)."""

    def __init__(self, fn_name: str, loop_vars: dict, on_program):
        self.fn_name, self.loop_vars, self.on_program = fn_name, loop_vars, on_program
        self.programs: list[ir.Program] = []
        self.program: ir.Program | None = None
        self.current_block = None
        self.tunable: list[ir.Dim] = []   # tunable tile dims of the whole run, config order
        self._ids = itertools.count()
        self.tunable_offset = 0           # tile dims of loops replayed before this tracer began
        self.parents = {}                 # id(loop items) -> enclosing items list
        self._mode = None
        self.config = None                # the config this run launches with (None: trace only)
        self.tunables: dict = {}          # hl.register_tunable: name -> fragment, first use wins
        self.seeds = rng.Seeds()          # torch.rand_like & co in tile loops (rng.py)
        self.program_offset = 0           # tile loops replayed before this tracer began

    def close(self):
        """Leave the body mode if a loop body raised (the generator was never resumed)."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
            self.program = None

    def next_id(self):
        return next(self._ids)

    # ------------------------------------------------------------------ tiles and loops
    def tile(self, begins, ends, block_size, multi, index_only=False, jagged=None):
        frame, loc = _user_frame()
        blocks = list(block_size) if isinstance(block_size, (list, tuple)) else [block_size] * len(ends)
        if len(blocks) != len(ends):
            raise TraceError("hl.tile: block_size needs one entry per dimension", loc)
        blocks = [b.value if isinstance(b, BlockSize) else b for b in blocks]
        bounds = []
        for b, e in zip(begins, ends):
            for s in (b, e):
                if isinstance(s, ops.TileValue) and self.program is not None and s.rank == 0 \
                        and not s.dtype.is_floating_point:
                    continue
                if isinstance(s, bool) or not isinstance(s, int):
                    raise TraceError(f"hl.tile takes integer bounds (e.g. x.shape[0]; an inner "
                                     f"loop also a scalar the kernel loaded), got {s!r}", loc)
            bounds.append((b, e))
        for b in blocks:
            if b is not None and (not isinstance(b, int) or b < 1 or b & (b - 1)):
                raise TraceError(f"hl.tile: block_size must be a power of two, got {b!r}", loc)
        if index_only:
            blocks = [1] * len(ends)
        names = self.loop_vars.get((loc.file, loc.line), [])
        return self._tile_gen(bounds, blocks, names, multi, loc, block_size, jagged)

    def jagged_tile(self, lengths, block_size=None):
        return jagged_tiles.tile(self, lengths, block_size)

    def _tile_gen(self, bounds, blocks, names, multi, loc, block_spec=None, jagged=None):
        outer = self.program is None
        kind = "grid" if outer else "loop"
        dims = []
        for i, ((lo, hi), b) in enumerate(zip(bounds, blocks)):
            d = ir.Dim(kind, (hi - lo) if isinstance(lo, int) and isinstance(hi, int)
                       else ir.DYNAMIC_HINT, b, names[i] if i < len(names) else None)
            if outer and not (isinstance(lo, int) and isinstance(hi, int)):
                raise TraceError("the bounds of the outermost hl.tile loop (the launch grid) "
                                 "must be host integers", loc)
            d.lo, d.hi = lo, hi
            spec = block_spec[i] if isinstance(block_spec, (list, tuple)) else block_spec
            if isinstance(spec, BlockSize):     # hl.register_block_size: shared, tuned once
                d.shared = spec
            d.jagged = jagged
            dims.append(d)
        if outer:
            name = self.fn_name if not self.programs else f"{self.fn_name}_{len(self.programs)}"
            self.program = ir.Program(name=name, grid=dims, loc=loc)
            self.current_block = self.program.items
            self._mode = _BodyMode(self)
            self._mode.__enter__()
        else:
            loop = ir.Loop(dims, parent=self.current_block, loc=loc)
            for d in dims:
                d.loop = loop
            self.current_block.append(loop)
            self.parents[id(loop.items)] = self.current_block
            outer_block, self.current_block = self.current_block, loop.items
        for d in dims:
            self.program.dims.append(d)
            shared = getattr(d, "shared", None)
            if shared is not None and shared.index >= 0:
                d.tunable, d.block = False, shared.value
                self.tunable[shared.index - self.tunable_offset].users.append(d)
            if d.tunable:
                d.index = self.tunable_offset + len(self.tunable)
                self.tunable.append(d)
        tiles = tuple(Tile(self, d) for d in dims)
        start = dict(sys._getframe(1).f_locals) if not outer else None
        yield tiles if multi else tiles[0]
        end = dict(sys._getframe(1).f_locals)
        if outer:
            self._mode.__exit__(None, None, None)
            self._mode = None
            self._finish_program(end)
        else:
            self.finish_loop(loop, start, end)
            self.current_block = outer_block

    def finish_loop(self, loop, start, end):
        """Close an inner loop (a tile loop, or a `while` on a kernel value: branches.py):
        names assigned in it that held a value before it are carried across iterations."""
        from .ops import TileValue
        for name, new in end.items():
            if not isinstance(new, TileValue):
                continue
            old = start.get(name, _MISSING)
            if old is new:
                continue
            if _defined_in(new, loop) and old is not _MISSING and _ended(old):
                # a name reused from an earlier loop whose tile has ended (`values = x[tm, tn]`
                # in two loops over n): a new value, not one carried across iterations
                if new.name is None:
                    new.name = name
            elif _defined_in(new, loop) and old is not _MISSING:
                if isinstance(old, (int, float)):     # (bools too: a while's break flag)
                    old = self.new("full", [], new.dims, new.dtype, old, value=old, hoist=loop)
                if not isinstance(old, TileValue):
                    raise TraceError(f"`{name}` is updated in a tile loop but was not a tile "
                                     f"value or a number before it", new.loc)
                if old.name is None:
                    old.name = name
                loop.carried.append(ir.Carried(name, old, new))
            elif new.name is None:
                new.name = name
        pads.settle_loop(loop)
        loop.closed = True

    def _finish_program(self, end):
        from .ops import TileValue
        prog = self.program
        for name, v in end.items():
            if isinstance(v, TileValue) and v.name is None:
                v.name = name
        for ref in prog.tensors:
            for name, v in end.items():
                if v is ref.tensor:
                    ref.name = ref.local = name
                    break
        prog.index = self.program_offset + len(self.programs)
        if prog.rng and self.config is not None:     # a run that launches: this call's seed
            prog.seed = self.seeds.of(prog.index)
        self.programs.append(prog)
        self.program, self.current_block = None, None
        self.on_program(prog)

    def note_tunable(self, name, fragment):
        """An hl.register_tunable: the search explores its fragment's choices (space.py)."""
        self.tunables.setdefault(str(name), fragment)

    def barrier(self):
        """hl.barrier: the loops are launches in stream order already; it must stand between
        them (Helion's rule), not inside one."""
        if self.program is not None:
            raise TraceError("hl.barrier() must stand between two hl.tile loops, not inside "
                             "one", user_loc())

    def register_block_size(self, lo, hi=None):
        """A config slot of its own: this run's value comes from the config (a default when
        only tracing); tiles given it as block_size take that value."""
        lo, hi = (1, int(lo)) if hi is None else (int(lo), int(hi))
        index = self.tunable_offset + len(self.tunable)
        d = ir.Dim("loop", hi)
        d.bs_range = (lo, hi)
        self.tunable.append(d)
        d.index = index
        cfg = self.config
        value = cfg.block_sizes[index] if cfg is not None and index < len(cfg.block_sizes) \
            else default_block(lo, hi)
        return BlockSize(value, index, lo, hi)

    # ------------------------------------------------------------------ values
    def new(self, op, args, dims, dtype, pad, loc=None, hoist=None, **attrs):
        from .ops import TileValue
        if self.program is None:
            raise TraceError("tile values exist only inside a `for ... in dt.tile(...)` loop")
        for a in args:
            for d in getattr(a, "dims", ()):
                lp = getattr(d, "loop", None)
                if lp is not None and lp.closed:
                    raise TraceError(
                        f"`{a.name or 'a tile value'}` has the tile dim {d.describe()} of an inner "
                        "dt.tile loop that has ended: the kernel would keep only its last tile, "
                        "the oracle the whole dim. Reduce or accumulate it inside the loop "
                        "(acc = acc + ...)", loc)
        partial = attrs.get("partial") or next(
            (a.attrs["partial"] for a in args if isinstance(a, ir.Value) and a.attrs.get("partial")), None)
        if partial is not None:
            if op == "store" or (op == "atomic" and attrs.get("fn") != "add"):
                raise partial
            if op != "atomic":
                attrs["partial"] = partial
        v = TileValue(self, op, args, dims, dtype, pad, loc or user_loc(), **attrs)
        pads.recompute(v)
        if hoist is not None:   # a loop-carried init made of a number: define it before the loop
            block = hoist.parent
            block.insert(next(i for i, it in enumerate(block) if it is hoist), v)
            v.block = block
        else:
            self.current_block.append(v)
        return v

    def full(self, shape, value, dtype):
        return ops.full(self, shape, value, dtype)

    def arange(self, begin, end, dtype):
        return ops.arange(self, begin, end, dtype)

    def rand(self, shape, seed):
        return ops.rand(self, shape, seed)

    def dot(self, a, b, acc, out_dtype):
        return ops.hl_dot(self, a, b, acc, out_dtype)

    def cumsum(self, x, dim, reverse):
        return ops.cumsum(self, x, dim, reverse)

    def associative_scan(self, combine_fn, input, dim, reverse):
        from .scans import associative_scan
        return associative_scan(self, combine_fn, input, dim, reverse)

    def combine_reduce(self, combine_fn, input, dim, other, keep_dims):
        from .scans import reduce
        return reduce(self, combine_fn, input, dim, other, keep_dims)

    def torch_function(self, func, args, kwargs):
        from . import ops
        return ops.dispatch(self, func, args, kwargs)

    # ------------------------------------------------------------------ memory (memory.py)
    def load(self, tensor: torch.Tensor, index, extra_mask=None):
        return memory.load(self, tensor, index, extra_mask)

    def store(self, tensor: torch.Tensor, index, value, extra_mask=None):
        return memory.store(self, tensor, index, value, extra_mask)

    def atomic(self, kind, tensor, index, value):
        return memory.store(self, tensor, index, value, atomic=kind)


_MISSING = object()


def _ended(v) -> bool:
    """Does tile value v have a dim of an inner loop that has ended?"""
    return any(getattr(d, "loop", None) is not None and d.loop.closed
               for d in getattr(v, "dims", ()))


def _defined_in(v, loop) -> bool:
    """True when `v` was recorded in `loop`'s body or in a loop nested in it."""
    block, parents = v.block, v.tracer.parents
    while block is not None:
        if block is loop.items:
            return True
        block = parents.get(id(block))
    return False


__all__ = ["Tracer", "Tile", "TraceError", "Loc"]
