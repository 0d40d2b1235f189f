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

from . import ir, ops, pads  # noqa: F401  (ops first: it completes proxy.py)
from .errors import Loc, TraceError, user_frame, user_loc


def _user_frame():
    f = user_frame(sys._getframe(1))
    return f, user_loc(f)


class Tile:
    """A tile of one dimension, as the loop body sees it while tracing. Index tensors with it;
    `tile.index` is the tile's offsets (int32), `tile.begin` its first offset."""

    def __init__(self, tracer, dim: ir.Dim):
        self._tracer, self.dim = tracer, dim

    @property
    def index(self):
        if self.dim.is_index:
            return self.begin
        return self._tracer.new("index", [], (self.dim,), torch.int32, None, dim=self.dim)

    @property
    def begin(self):
        return self._tracer.new("begin", [], (), torch.int32, None, dim=self.dim)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        tracer = _find_tracer(args)
        return tracer.torch_function(func, args, kwargs or {})

    def __index__(self):
        raise TraceError("a tile is not an integer: index tensors with it, or use tile.index "
                         "for its offsets")

    __int__ = __index__

    def _arith(self, *_):
        raise TraceError("arithmetic on a tile is not supported: use tile.index (its offsets) "
                         "or tile.begin (its first offset)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = _arith
    __lt__ = __le__ = __gt__ = __ge__ = _arith

    def __repr__(self):
        return f"<dt tile {self.dim.var or ''} over {self.dim.extent}>"


def _find_tracer(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            t = _find_tracer(a)
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

    def close(self):
        """Leave the body mode if a loop body raised (the generator was never resumed)."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
            self.program = None

    def next_id(self):
        return next(self._ids)

    # ------------------------------------------------------------------ tiles and loops
    def tile(self, sizes, block_size=None):
        frame, loc = _user_frame()
        multi = isinstance(sizes, (list, tuple))
        sizes = list(sizes) if multi else [sizes]
        blocks = list(block_size) if isinstance(block_size, (list, tuple)) else [block_size] * len(sizes)
        if len(blocks) != len(sizes):
            raise TraceError("dt.tile: block_size needs one entry per dimension", loc)
        for s in sizes:
            if isinstance(s, bool) or not isinstance(s, int):
                raise TraceError(f"dt.tile takes integer sizes (e.g. x.shape[0]), got {s!r}", loc)
        for b in blocks:
            if b is not None and (not isinstance(b, int) or b < 1 or b & (b - 1)):
                raise TraceError(f"dt.tile: block_size must be a power of two, got {b!r}", loc)
        names = self.loop_vars.get((loc.file, loc.line), [])
        return self._tile_gen(sizes, blocks, names, multi, loc)

    def _tile_gen(self, sizes, blocks, names, multi, loc):
        outer = self.program is None
        kind = "grid" if outer else "loop"
        dims = [ir.Dim(kind, s, b, names[i] if i < len(names) else None)
                for i, (s, b) in enumerate(zip(sizes, blocks))]
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
            self._finish_loop(loop, start, end)
            self.current_block = outer_block

    def _finish_loop(self, loop, start, end):
        from .ops import TileValue
        for name, new in end.items():
            if not isinstance(new, TileValue):
                continue
            old = start.get(name, _MISSING)
            if old is new:
                continue
            if _defined_in(new, loop) and old is not _MISSING:
                if isinstance(old, (int, float)) and not isinstance(old, bool):
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
        self.programs.append(prog)
        self.program, self.current_block = None, None
        self.on_program(prog)

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
        from . import ops
        return ops.full(self, shape, value, dtype)

    def torch_function(self, func, args, kwargs):
        from . import ops
        return ops.dispatch(self, func, args, kwargs)

    # ------------------------------------------------------------------ memory
    def parse_index(self, tensor: torch.Tensor, index):
        """Tensor indexing -> list of ("tile"|"full", Dim) / ("int", i) per tensor dim."""
        prog = self.program
        if not isinstance(index, tuple):
            index = (index,)
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise TraceError("at most one `...` in an index")
        if any(i is Ellipsis for i in index):
            k = index.index(Ellipsis)
            fill = tensor.dim() - (len(index) - 1)
            index = index[:k] + (slice(None),) * fill + index[k + 1:]
        if len(index) > tensor.dim():
            raise TraceError(f"too many indices ({len(index)}) for a tensor of {tensor.dim()} dims")
        index = index + (slice(None),) * (tensor.dim() - len(index))
        out = []
        for axis, i in enumerate(index):
            size = tensor.shape[axis]
            if isinstance(i, Tile):
                if i.dim.extent > size:
                    raise TraceError(f"tile {i.dim.describe()} is larger than dimension {axis} of "
                                     f"the tensor it indexes (size {size})")
                out.append(("index" if i.dim.is_index else "tile", i.dim))
            elif isinstance(i, slice) and i == slice(None):
                out.append(("full", prog.full_dim(size)))
            elif isinstance(i, int) and not isinstance(i, bool):
                if not -size <= i < size:
                    raise TraceError(f"index {i} out of range for dimension {axis} (size {size})")
                out.append(("int", i % size))
            else:
                raise TraceError(f"unsupported index {i!r}: index tensors with tiles, ints, "
                                 f"full slices ':' or '...'")
        return out

    def load(self, tensor: torch.Tensor, index):
        idx = self.parse_index(tensor, index)
        ref = self.program.tensor_ref(tensor)
        ref.loaded = True
        dims = tuple(d for kind, d in idx if kind in ("tile", "full"))
        return self.new("load", [], dims, tensor.dtype, 0, ref=ref, index=idx)

    def store(self, tensor: torch.Tensor, index, value):
        from .ops import as_operand
        idx = self.parse_index(tensor, index)
        dims = tuple(d for kind, d in idx if kind in ("tile", "full"))
        value = as_operand(self, value)
        vdims = getattr(value, "dims", ())
        if ir.broadcast_dims(dims, vdims) != dims:
            raise TraceError("mismatched tile shapes in store: value has dims "
                             f"[{', '.join(d.describe() for d in vdims)}], target "
                             f"[{', '.join(d.describe() for d in dims)}]")
        ref = self.program.tensor_ref(tensor)
        ref.stored = True
        self.new("store", [value], (), None, None, ref=ref, index=idx)


_MISSING = object()


def _defined_in(v, loop) -> bool:
    """True when `v` was recorded in `loop`'s body or in a loop nested in it."""
    block, parents = v.block, v.tracer.parents
    while block is not None:
        if block is loop.items:
            return True
        block = parents.get(id(block))
    return False


__all__ = ["Tracer", "Tile", "TraceError", "Loc"]
