"""Traced tile expressions: the `TileValue` proxy and every op it records.

Consumes operands met while tracing (TileValues, Python numbers, real tensors, which become full
loads); produces `ir.Value` nodes in the current block of the tracer. Each op works out three
facts up front: the dims (right-aligned broadcasting, a mismatch is a TraceError at the user's
line), the dtype (by running the same torch function on tiny meta tensors, so the kernel's dtypes
are the oracle's), and (pads.py, after creation) `pad`, the constant the padded lanes hold, which decides whether
a reduction or a dot must mask them first (-inf for max, +inf for min, 0 for sum/mean and dots).
"""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F

from . import ir
from .errors import TraceError
from .ir import ONE

# name -> the torch callable that defines its semantics (dtype inference, constant folding)
UNARY = {
    "neg": operator.neg, "invert": operator.invert, "abs": torch.abs, "exp": torch.exp,
    "exp2": torch.exp2, "log": torch.log, "log2": torch.log2, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "floor": torch.floor,
    "ceil": torch.ceil, "relu": torch.relu, "silu": F.silu,
}
BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor,
    "maximum": torch.maximum, "minimum": torch.minimum,
}


_FLOAT_RESULT = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "silu"}
_BOOL_RESULT = {"lt", "le", "gt", "ge", "eq", "ne"}


def _proto(x):
    """Stand-in for torch's promotion rules: an empty tensor for a tile value, the number itself
    for a Python scalar (weak, as in torch)."""
    if isinstance(x, ir.Value):
        return torch.empty(0, dtype=x.dtype)
    return x


def _promote(*xs):
    with torch._C.DisableTorchFunction():
        protos = [_proto(x) for x in xs]
        if not any(isinstance(p, torch.Tensor) for p in protos):   # numbers only: as torch.tensor
            protos[0] = torch.tensor(protos[0])
        dt = protos[0] if len(protos) == 1 else None
        if dt is None:
            r = torch.result_type(protos[0], protos[1])
            for p in protos[2:]:
                r = torch.result_type(torch.empty(0, dtype=r), p)
            return r
        return dt.dtype if isinstance(dt, torch.Tensor) else torch.result_type(torch.empty(0), dt)


def _infer(fn: str, *xs):
    """The dtype torch would give `fn(*xs)` (the oracle's dtype), without running torch ops."""
    if fn in _BOOL_RESULT:
        return torch.bool
    if fn == "where":
        xs = xs[1:]
    r = _promote(*xs)
    if (fn in _FLOAT_RESULT or fn == "truediv") and not r.is_floating_point:
        return torch.get_default_dtype()
    if fn == "invert" and r != torch.bool and r.is_floating_point:
        raise TraceError("~ of a floating-point tile")
    return r


def as_operand(tracer, x):
    from .trace import Tile
    if isinstance(x, ir.Value):
        return x
    if isinstance(x, Tile):
        if x.dim.is_index:           # an hl.grid index: its position
            return x.begin
        raise TraceError("a tile is not a value: use tile.index for its offsets")
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, torch.Tensor):       # a host tensor met inside a tile loop: read it whole
        return tracer.load(x, (slice(None),) * x.dim())
    raise TraceError(f"unsupported operand of type {type(x).__name__} in a tile loop")


def _dims(x):
    return x.dims if isinstance(x, ir.Value) else ()


def _bcast(*xs):
    dims = ()
    for x in xs:
        out = ir.broadcast_dims(dims, _dims(x))
        if out is None:
            raise TraceError("mismatched tile shapes: [" + ", ".join(d.describe() for d in dims)
                             + "] vs [" + ", ".join(d.describe() for d in _dims(x)) + "]")
        dims = out
    return dims


def unary(tracer, fn, x):
    x = as_operand(tracer, x)
    return tracer.new("unary", [x], x.dims, _infer(fn, x), None, fn=fn)


def _as_torch_promotes(tracer, a, b):
    """a, b cast to PyTorch's common dtype where newt's (Triton's) promotion of the two tiles
    would pick another one: fp16 with bf16 is fp16 in Triton and fp32 in torch, bf16 with an
    integer tile fp32 in Triton and bf16 in torch. The generated kernel then computes what the
    eager-PyTorch oracle computes."""
    if not (isinstance(a, ir.Value) and isinstance(b, ir.Value)) or a.dtype == b.dtype:
        return a, b
    from newt import dtypes as D
    ct = _promote(a, b)
    try:
        same = D.computation_type(D.from_torch(a.dtype), False, D.from_torch(b.dtype),
                                  False).to_torch() == ct
    except TypeError:
        same = False
    if same:
        return a, b
    return cast(tracer, a, ct), cast(tracer, b, ct)


def binary(tracer, fn, a, b):
    a, b = as_operand(tracer, a), as_operand(tracer, b)
    dims = _bcast(a, b)
    r = _infer(fn, a, b)
    a, b = _as_torch_promotes(tracer, a, b)
    return tracer.new("binary", [a, b], dims, r, None, fn=fn)


def where(tracer, c, a, b):
    c, a, b = (as_operand(tracer, v) for v in (c, a, b))
    dims = _bcast(c, a, b)
    r = _infer("where", c, a, b)
    a, b = _as_torch_promotes(tracer, a, b)
    return tracer.new("where", [c, a, b], dims, r, None)


def cast(tracer, x, dtype):
    if not isinstance(dtype, torch.dtype):
        raise TraceError(f"unsupported conversion target {dtype!r}: only dtypes inside a tile loop")
    if dtype == x.dtype:
        return x
    return tracer.new("cast", [x], x.dims, dtype, None)


def reduce(tracer, kind, x, dim=None, keepdim=False):
    x = as_operand(tracer, x)
    if not isinstance(x, ir.Value):
        raise TraceError(f"{kind}() of a number")
    if dim is None or isinstance(dim, (list, tuple)):
        axes = range(x.rank) if dim is None else [_axis(x, d) for d in dim]
        for a in sorted(set(axes), reverse=True):
            x = reduce(tracer, kind, x, a, keepdim)
        return x
    axis = _axis(x, dim)
    rdim = x.dims[axis]
    partial = None
    if tracer.program is not None:     # (outside a loop, tracer.new says so)
        partial = whole_dim(rdim, f"{kind}() over")
    if kind == "mean" and not x.dtype.is_floating_point:
        raise TraceError("mean() needs a floating-point tile (use .float() first)")
    if kind == "sum" and not x.dtype.is_floating_point and x.dtype != torch.int64:
        x = cast(tracer, x, torch.int64)     # torch sums integers and bools in int64
    if getattr(rdim, "jagged", None) is not None:
        from .jagged import guard_reduction
        x = guard_reduction(tracer, x, rdim, kind)
    ident = ir.identity(kind, x.dtype)
    dims = x.dims[:axis] + ((ONE,) if keepdim else ()) + x.dims[axis + 1:]
    dtype = torch.int32 if x.dtype == torch.bool else x.dtype
    return tracer.new("reduce", [x], dims, dtype, None, kind=kind, axis=axis, keepdim=keepdim,
                      rdim=rdim, identity=ident, partial=partial)


def whole_dim(d, what):
    """Each program holds one tile of a grid dim: summing over it sums that tile only, where
    the oracle sums the whole dim. Returns the error to raise if such a partial result reaches
    anything but `hl.atomic_add` (split-K), or None when one tile covers the dim (a pinned
    block_size >= the extent)."""
    if d is not ONE and d.kind == "grid" and not (d.block and d.block >= d.extent):
        return TraceError(f"{what} {d.describe()}, a dim of the launch grid: each program sees "
                          "only its own tile of it. Reduce over a full slice ':' or an inner "
                          "hl.tile loop instead (or pin block_size to cover the dim, or add the "
                          "partial results with hl.atomic_add)")
    return None


def _axis(x, dim):
    if not isinstance(dim, int) or not -x.rank <= dim < max(x.rank, 1):
        raise TraceError(f"dim {dim!r} out of range for a tile of {x.rank} dims")
    return dim % x.rank


def dot(tracer, a, b, acc_dtype=None):
    """a @ b; `acc_dtype`: the accumulator's dtype when the product feeds `torch.addmm(acc, a,
    b)` / `torch.baddbmm`, whose product the oracle (and the kernel) keep in that precision."""
    a, b = as_operand(tracer, a), as_operand(tracer, b)
    if isinstance(a, ir.Value) and isinstance(b, ir.Value) and a.rank == 3 and b.rank == 3:
        return _batched_dot(tracer, a, b, acc_dtype)
    if not (isinstance(a, ir.Value) and isinstance(b, ir.Value) and a.rank == 2 and b.rank == 2):
        raise TraceError("matmul in a tile loop takes two 2-D tiles (or two 3-D tiles of one "
                         "batch tile)")
    if a.dims[1] is not b.dims[0]:
        raise TraceError(f"mismatched tile shapes in matmul: {a.dims[1].describe()} vs "
                         f"{b.dims[0].describe()}")
    partial = whole_dim(a.dims[1], "matmul contracting")
    if getattr(a.dims[1], "jagged", None) is not None:
        raise TraceError("a matmul contracting a jagged tile: mask the operands with "
                         "torch.where first and contract a plain hl.tile")
    if a.dtype != b.dtype:
        raise TraceError(f"matmul of {a.dtype} and {b.dtype}: convert one side with .to()")
    for d in (a.dims[0], a.dims[1], b.dims[1]):
        if d is ONE:
            raise TraceError("matmul of a size-1 axis: use a reduction instead")
        d.in_dot = True
    prog = tracer.program
    prog.has_dot = True
    prog.fp32_dot = prog.fp32_dot or a.dtype == torch.float32
    fp8 = a.dtype.is_floating_point and a.dtype.itemsize == 1   # torch has no fp8 matmul:
    rtype = torch.float32 if fp8 else _infer("matmul", a, b)   # fp32, as the kernel's dot
    if acc_dtype is not None and acc_dtype != rtype and acc_dtype.is_floating_point:
        rtype = acc_dtype     # not rounded to the operands' dtype before it is added
    return tracer.new("dot", [a, b], (a.dims[0], b.dims[1]), rtype, None,
                      kdim=a.dims[1], precision=_fp32_precision(a.dtype), partial=partial)


def _batched_dot(tracer, a, b, acc_dtype=None):
    """[B, M, K] @ [B, K, N] over a batch tile B: the batch tile runs one batch element per
    program (its block size is pinned to 1), so the product is one 2-D dot per program."""
    bdim = a.dims[0]
    if b.dims[0] is not bdim:
        raise TraceError("batched matmul: both operands need the same batch tile")
    if bdim is not ONE:
        if bdim.kind == "full" or getattr(bdim, "shared", None) is not None or (
                bdim.block not in (None, 1)):
            raise TraceError("batched matmul: the batch dim must be an hl.tile dim the "
                             "autotuner may size (it is pinned to one element per program)")
        bdim.batch = True
    flat = [tracer.new("reshape", [x], x.dims[1:], x.dtype, None) for x in (a, b)]
    d = dot(tracer, *flat, acc_dtype=acc_dtype)
    return tracer.new("reshape", [d], (bdim,) + d.dims, d.dtype, None)


def _fp32_precision(dtype):
    if dtype != torch.float32:
        return None
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def full(tracer, shape, value, dtype):
    from .trace import Tile
    dims = []
    for s in shape:
        if isinstance(s, Tile):
            if s.dim.is_index:
                raise TraceError("a tile with block_size=1 is an index, not a dimension of a tile")
            dims.append(s.dim)
        elif isinstance(s, ir.BlockSize) and s.index >= 0:
            dims.append(tracer.program.block_dim(s))
        elif isinstance(s, int) and not isinstance(s, bool):
            dims.append(ONE if s == 1 else tracer.program.full_dim(s))
        else:
            raise TraceError(f"dt.zeros/dt.full shapes hold tiles and ints, got {s!r}")
    if not isinstance(value, (bool, int, float)):
        raise TraceError("dt.full takes a Python number as its value")
    return tracer.new("full", [], tuple(dims), dtype, value, value=value)


def view(tracer, x, index):
    """`v[:, None]` / `v[None, :]`: insert size-1 axes; `v[:, 0]` on a size-1 axis drops it."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(1 for i in index if i is not None) != x.rank or any(
            i is not None and i != slice(None) and not (
                isinstance(i, int) and not isinstance(i, bool)) for i in index):
        raise TraceError("tile values can only be indexed with ':', None and 0 on a size-1 axis "
                         "(e.g. v[:, None], v[:, 0])")
    dims, it, drop = [], iter(x.dims), False
    for i in index:
        if i is None:
            dims.append(ONE)
            continue
        d = next(it)
        if isinstance(i, int):
            if d is not ONE or i not in (0, -1):
                raise TraceError("an int index of a tile value must pick the one element of a "
                                 "size-1 axis (v[:, 0] after a keepdim reduction)")
            drop = True
            continue
        dims.append(d)
    if drop:
        return tracer.new("reshape", [x], tuple(dims), x.dtype, None)
    return tracer.new("view", [x], tuple(dims), x.dtype, None, index=index)


def trans(tracer, x, d0=0, d1=1):
    if x.rank == 2:
        return tracer.new("trans", [x], x.dims[::-1], x.dtype, None)
    if x.rank < 2:
        raise TraceError("transpose of a tile needs 2 dims")
    perm = list(range(x.rank))
    perm[d0 % x.rank], perm[d1 % x.rank] = perm[d1 % x.rank], perm[d0 % x.rank]
    return tracer.new("permute", [x], tuple(x.dims[p] for p in perm), x.dtype, None,
                      perm=tuple(perm))


def cumsum(tracer, x, dim, reverse=False):
    """Inclusive prefix sum along a whole dim (a full slice ':'): each program holds all of it.
    Padded lanes sit past the end, so they reach a forward sum never, a reverse one unless
    masked to 0 first."""
    x = as_operand(tracer, x)
    if not isinstance(x, ir.Value) or x.rank == 0:
        raise TraceError("cumsum of a number or a scalar")
    axis = _axis(x, dim)
    d = x.dims[axis]
    if d is not ONE and d.kind != "full":
        raise TraceError(f"cumsum over {d.describe()}: a prefix sum needs the whole dim in one "
                         "program; take it over a full slice ':'")
    out = x.dtype
    if not out.is_floating_point:
        out = torch.int64                       # torch's cumsum of ints and bools
    work = torch.float32 if out in (torch.float16, torch.bfloat16) else out
    x = cast(tracer, x, work)
    if reverse and d is not ONE and x.pad != 0:
        inside = tracer.new("mask", [], (d,), torch.bool, None, dim=d)   # mask_<d>
        inside = view(tracer, inside, tuple(slice(None) if i == axis else None
                                            for i in range(x.rank)))
        x = where(tracer, inside, x, 0)
    r = tracer.new("cumsum", [x], x.dims, work, None, axis=axis, reverse=reverse)
    return cast(tracer, r, out)


def arange(tracer, begin, end, dtype):
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in (begin, end)) or end <= begin:
        raise TraceError(f"hl.arange takes host ints begin < end, got {begin!r}, {end!r}")
    if begin == 0 and isinstance(end, ir.BlockSize) and end.index >= 0:
        d = tracer.program.block_dim(end)     # hl.arange(bs): lines up with hl.zeros([bs])
    else:
        d = tracer.program.full_dim(end - begin)
    return tracer.new("arange", [], (d,), dtype, None, dim=d, begin=begin)


def rand(tracer, shape, seed):
    """Philox keyed by `seed` at each element's row-major position in the untiled shape."""
    from .trace import Tile
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TraceError("hl.rand: seed must be a host int")
    dims = []
    for s in shape:
        if isinstance(s, Tile) and not s.dim.is_index:
            if isinstance(s.dim.hi, ir.Value):
                raise TraceError("hl.rand over a tile with bounds computed in the kernel")
            dims.append(s.dim)
        elif isinstance(s, int) and not isinstance(s, bool):
            dims.append(tracer.program.full_dim(s))
        else:
            raise TraceError(f"hl.rand shapes hold tiles and ints, got {s!r}")
    # the seed is an argument of the kernel, not part of its source: a new seed compiles nothing
    seeds = tracer.program.host_seeds
    seeds.append(seed)
    return tracer.new("rand", [], tuple(dims), torch.float32, None, seed=seed,
                      seed_arg=len(seeds) - 1)


def hl_dot(tracer, a, b, acc=None, out_dtype=None):
    """hl.dot: the product in fp32 for 16-bit inputs (as nl.dot accumulates), plus `acc`."""
    r = dot(tracer, a, b)
    if acc is not None and getattr(acc, "dtype", None) == torch.float32:
        r = binary(tracer, "add", acc, r)   # lowers to nl.dot(a, b, acc): fp32 throughout
    else:
        if r.dtype in (torch.float16, torch.bfloat16):
            r = cast(tracer, r, torch.float32)
        if acc is not None:
            r = binary(tracer, "add", acc, r)
    return cast(tracer, r, out_dtype) if out_dtype is not None else r


def softmax(tracer, x, dim, dtype=None):
    x = as_operand(tracer, x)
    out = dtype or x.dtype
    xf = cast(tracer, x, torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x
    m = reduce(tracer, "max", xf, dim, True)
    e = unary(tracer, "exp", binary(tracer, "sub", xf, m))
    return cast(tracer, binary(tracer, "truediv", e, reduce(tracer, "sum", e, dim, True)), out)


def gelu(tracer, x, approximate="none"):
    x = as_operand(tracer, x)
    xf = cast(tracer, x, torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x
    if approximate == "tanh":
        inner = binary(tracer, "mul", binary(tracer, "add", xf, binary(
            tracer, "mul", 0.044715, binary(tracer, "mul", xf, binary(tracer, "mul", xf, xf)))),
            0.7978845608028654)
        y = binary(tracer, "add", 1.0, unary(tracer, "tanh", inner))
    else:
        y = binary(tracer, "add", 1.0, unary(tracer, "erf", binary(tracer, "mul", xf,
                                                                     0.7071067811865476)))
    return cast(tracer, binary(tracer, "mul", binary(tracer, "mul", 0.5, xf), y), x.dtype)


def reshape(tracer, x, shape):
    """Reshapes that keep the tile dims (in order) and split or merge whole dims (shapes.py), or
    that add or drop size-1 axes; a -1 may stand for one tile dim."""
    from .trace import Tile
    shape = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else list(shape)
    from .shapes import regroup
    done = regroup(tracer, x, shape)      # whole dims split or merged, tile dims kept
    if done is not None:
        return done
    want = []
    for s in shape:
        if isinstance(s, Tile) or hasattr(s, "dim"):
            want.append(s.dim)
        elif s == 1:
            want.append(ONE)
        elif s == -1:
            want.append(None)          # filled below: the one real dim left over
        else:
            match = [d for d in x.dims if d is not ONE and d.kind == "full" and d.extent == s]
            if len(match) != 1:
                raise TraceError(f"reshape of a tile to {shape}: tile dims must stay as they "
                                 "are (only whole dims split or merge)")
            want.append(match[0])
    if None in want:
        left = [d for d in x.dims if d is not ONE and all(d is not w for w in want)]
        if len(left) != 1 or want.count(None) != 1:
            raise TraceError(f"reshape of a tile to {shape}: -1 must stand for one tile dim")
        want[want.index(None)] = left[0]
    if [d for d in want if d is not ONE] != [d for d in x.dims if d is not ONE]:
        raise TraceError(f"reshape of a tile to {shape}: tile dims must stay as they are, in "
                         "order (only whole dims split or merge)")
    if tuple(want) == x.dims:
        return x
    return tracer.new("reshape", [x], tuple(want), x.dtype, None)


from .proxy import TileValue, dispatch  # noqa: E402,F401  (the user-facing class and torch table)
