"""`TileValue`, the proxy a loop body computes with while tracing, and the torch-function table.

Python operators and tensor methods on a TileValue, and torch functions that receive one (through
`__torch_function__`), record ops (ops.py). Anything that would need the value itself (`if v > 0:`,
`float(v)`, iterating) raises TraceError at the user's line: the body runs once, on no data.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import ir, ops, rng
from .errors import TraceError

_NO_DATA = ("tile values have no data while tracing: Python control flow on tensor data is "
            "supported only as an `if` on a scalar inside a tile loop (use torch.where(cond, a, "
            "b) for a per-element choice, extra_mask= of hl.load / hl.store, or loop bounds read "
            "in the kernel: hl.tile(start, end))")


def _dt(x):
    return x.tracer


class UnsupportedMethod(TraceError, AttributeError):
    """A torch.Tensor method with no tile version (also an AttributeError, so hasattr() is
    False)."""


class TileValue(ir.Value):
    __slots__ = ()
    __hash__ = object.__hash__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from .trace import find_tracer
        return dispatch(find_tracer(args), func, args, kwargs or {})

    def __getattr__(self, name):
        # only called for names the class lacks: a torch.Tensor method deuteron does not trace
        if not name.startswith("_") and hasattr(torch.Tensor, name):
            raise UnsupportedMethod(f"unsupported tensor method in a tile loop: .{name}() "
                                    "(supported: elementwise math, where, sum/mean/amax/amin, "
                                    "softmax, matmul/addmm/bmm, .to/.float/.half, .T, "
                                    ".transpose/.permute, .reshape/.view/.unsqueeze/.squeeze "
                                    "of size-1 axes, v[:, None])")
        raise AttributeError(f"'TileValue' object has no attribute {name!r}")

    # --------------------------------------------------------------- no data while tracing
    def __bool__(self):
        raise TraceError(_NO_DATA)

    def __int__(self):
        raise TraceError(_NO_DATA)

    __float__ = __index__ = __int__

    def __iter__(self):
        raise TraceError("iterating over a tile value is not supported")

    def __len__(self):
        raise TraceError("len() of a tile value is not supported")

    # --------------------------------------------------------------- operators
    def __add__(self, o): return ops.binary(self.tracer, "add", self, o)
    def __radd__(self, o): return ops.binary(self.tracer, "add", o, self)
    def __sub__(self, o): return ops.binary(self.tracer, "sub", self, o)
    def __rsub__(self, o): return ops.binary(self.tracer, "sub", o, self)
    def __mul__(self, o): return ops.binary(self.tracer, "mul", self, o)
    def __rmul__(self, o): return ops.binary(self.tracer, "mul", o, self)
    def __truediv__(self, o): return ops.binary(self.tracer, "truediv", self, o)
    def __rtruediv__(self, o): return ops.binary(self.tracer, "truediv", o, self)
    def __floordiv__(self, o): return ops.binary(self.tracer, "floordiv", self, o)
    def __rfloordiv__(self, o): return ops.binary(self.tracer, "floordiv", o, self)
    def __mod__(self, o): return ops.binary(self.tracer, "mod", self, o)
    def __lt__(self, o): return ops.binary(self.tracer, "lt", self, o)
    def __le__(self, o): return ops.binary(self.tracer, "le", self, o)
    def __gt__(self, o): return ops.binary(self.tracer, "gt", self, o)
    def __ge__(self, o): return ops.binary(self.tracer, "ge", self, o)
    def __eq__(self, o): return ops.binary(self.tracer, "eq", self, o)
    def __ne__(self, o): return ops.binary(self.tracer, "ne", self, o)
    def __and__(self, o): return ops.binary(self.tracer, "and", self, o)
    def __rand__(self, o): return ops.binary(self.tracer, "and", o, self)
    def __or__(self, o): return ops.binary(self.tracer, "or", self, o)
    def __ror__(self, o): return ops.binary(self.tracer, "or", o, self)
    def __xor__(self, o): return ops.binary(self.tracer, "xor", self, o)
    def __neg__(self): return ops.unary(self.tracer, "neg", self)
    def __pos__(self): return self
    def __invert__(self): return ops.unary(self.tracer, "invert", self)
    def __abs__(self): return ops.unary(self.tracer, "abs", self)
    def __matmul__(self, o): return ops.dot(self.tracer, self, o)
    def __rmatmul__(self, o): return ops.dot(self.tracer, o, self)

    def __pow__(self, p):
        if p == 2:
            return self * self
        if p == 1:
            return self
        if p == 0.5:
            return ops.unary(self.tracer, "sqrt", self)
        if p == -0.5:
            return ops.unary(self.tracer, "rsqrt", self)
        if p == -1:
            return 1.0 / self
        if isinstance(p, int) and not isinstance(p, bool) and 2 < p <= 8:
            r = self                   # small integer powers: repeated products, as written
            for _ in range(p - 1):
                r = r * self
            return r
        raise TraceError(f"x ** {p!r} is not supported in a tile loop (integers 1..8, 0.5, "
                         "-0.5, -1 are)")

    def __getitem__(self, index):
        return ops.view(self.tracer, self, index)

    def __setitem__(self, index, value):
        raise TraceError("tile values are immutable: use torch.where to build a new one")

    # --------------------------------------------------------------- methods
    def sum(self, dim=None, keepdim=False, dtype=None):
        r = ops.reduce(self.tracer, "sum", self, dim, keepdim)
        return r if dtype is None else r.to(dtype)

    def mean(self, dim=None, keepdim=False, dtype=None):
        x = self if dtype is None else self.to(dtype)
        return ops.reduce(self.tracer, "mean", x, dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return ops.reduce(self.tracer, "max", self, dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return ops.reduce(self.tracer, "min", self, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        if isinstance(dim, ir.Value):
            return ops.binary(self.tracer, "maximum", self, dim)
        if dim is not None:
            raise TraceError("x.max(dim) returns (values, indices), which tiles do not support: "
                             "use x.amax(dim)")
        return ops.reduce(self.tracer, "max", self, None, keepdim)

    def min(self, dim=None, keepdim=False):
        if isinstance(dim, ir.Value):
            return ops.binary(self.tracer, "minimum", self, dim)
        if dim is not None:
            raise TraceError("x.min(dim) returns (values, indices), which tiles do not support: "
                             "use x.amin(dim)")
        return ops.reduce(self.tracer, "min", self, None, keepdim)

    def to(self, *args, **kwargs):
        dtype = kwargs.get("dtype", args[0] if args else None)
        return ops.cast(self.tracer, self, dtype)

    def type(self, dtype):
        return ops.cast(self.tracer, self, dtype)

    def float(self): return ops.cast(self.tracer, self, torch.float32)
    def half(self): return ops.cast(self.tracer, self, torch.float16)
    def bfloat16(self): return ops.cast(self.tracer, self, torch.bfloat16)

    @property
    def T(self):
        return ops.trans(self.tracer, self)

    def t(self):
        return ops.trans(self.tracer, self)

    def transpose(self, d0, d1):
        return ops.trans(self.tracer, self, d0, d1)

    def permute(self, *perm):
        perm = tuple(perm[0]) if len(perm) == 1 and isinstance(perm[0], (list, tuple)) else perm
        if sorted(p % self.rank for p in perm) != list(range(self.rank)):
            raise TraceError(f"permute{perm} of a tile of {self.rank} dims")
        return self.tracer.new("permute", [self], tuple(self.dims[p] for p in perm), self.dtype,
                               None, perm=tuple(p % self.rank for p in perm))

    def expand(self, *sizes):
        from .scans import expand_sizes
        return expand_sizes(self.tracer, self, sizes)

    def expand_as(self, other):
        from .scans import expand
        return expand(self.tracer, self, other.dims)

    def clamp(self, min=None, max=None):
        return _clamp(self.tracer, self, min, max)

    def where(self, cond, other):
        return ops.where(self.tracer, cond, self, other)

    @property
    def ndim(self):
        return self.rank

    @property
    def shape(self):
        """Tiles for tile dims (usable in hl.zeros / reshape shapes), ints for the others."""
        from .trace import Tile
        return tuple(1 if d is ir.ONE else d.extent if d.kind == "full" else Tile(self.tracer, d)
                     for d in self.dims)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.rank


def _unary_method(fn):
    def method(self):
        return ops.unary(self.tracer, fn, self)
    method.__name__ = fn
    return method


for _fn in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "abs",
            "floor", "ceil", "relu", "neg"):
    setattr(TileValue, _fn, _unary_method(_fn))


def _clamp(tracer, x, lo=None, hi=None):
    if lo is not None:
        x = ops.binary(tracer, "maximum", x, lo)
    if hi is not None:
        x = ops.binary(tracer, "minimum", x, hi)
    return x


def _maxmin(kind):
    def fn(tracer, x, dim=None, keepdim=False, *, out=None):
        if isinstance(dim, (ir.Value, torch.Tensor)):
            return ops.binary(tracer, "maximum" if kind == "max" else "minimum", x, dim)
        if dim is not None:
            raise TraceError(f"torch.{kind}(x, dim) returns (values, indices): use torch.a{kind}")
        return ops.reduce(tracer, kind, x, None, keepdim)
    return fn


def _addmm(tracer, inp, a, b, *, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        raise TraceError("torch.addmm in a tile loop supports beta=1 and alpha=1 only")
    # the product stays in the accumulator's precision (an fp32 acc of fp16 operands adds the
    # fp32 product, as the oracle computes), not rounded to the operands' dtype first
    acc_dtype = inp.dtype if isinstance(inp, ir.Value) else None
    return ops.binary(tracer, "add", inp, ops.dot(tracer, a, b, acc_dtype))


def _table():
    t = {}
    for fn in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf",
               "sigmoid", "abs", "floor", "ceil", "relu", "neg"):
        t[getattr(torch, fn)] = (lambda f: lambda tr, x: ops.unary(tr, f, x))(fn)
    t[F.relu] = lambda tr, x, inplace=False: ops.unary(tr, "relu", x)
    t[F.silu] = lambda tr, x, inplace=False: ops.unary(tr, "silu", x)
    t[F.sigmoid] = t[torch.sigmoid]
    t[torch.special.expit] = t[torch.sigmoid]
    for name, fn in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "truediv"),
                     ("maximum", "maximum"), ("minimum", "minimum")):
        t[getattr(torch, name)] = (lambda f: lambda tr, a, b=None, *, other=None, alpha=1:
                                   ops.binary(tr, f, a, _scaled(tr, b if other is None else other,
                                                                alpha)))(fn)
    for dunder, fn in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                       ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"), ("eq", "eq"),
                       ("ne", "ne"), ("and", "and"), ("or", "or")):
        t[getattr(torch.Tensor, f"__{dunder}__")] = (lambda f: lambda tr, a, b: ops.binary(tr, f, a, b))(fn)
        r = getattr(torch.Tensor, f"__r{dunder}__", None)
        if r is not None:
            t[r] = (lambda f: lambda tr, a, b: ops.binary(tr, f, b, a))(fn)
    t[torch.Tensor.__matmul__] = lambda tr, a, b: ops.dot(tr, a, b)
    t[torch.Tensor.__rmatmul__] = lambda tr, a, b: ops.dot(tr, b, a)
    t[torch.matmul] = lambda tr, a, b: ops.dot(tr, a, b)
    # torch.mm / torch.bmm(a, b, out_dtype): the product in fp32, then out_dtype (hl.dot's)
    t[torch.mm] = t[torch.bmm] = lambda tr, a, b, out_dtype=None: (
        ops.dot(tr, a, b) if out_dtype is None else ops.hl_dot(tr, a, b, None, out_dtype))
    t[torch.baddbmm] = _addmm
    t[torch.Tensor.transpose] = lambda tr, x, d0, d1: ops.trans(tr, ops.as_operand(tr, x), d0, d1)
    t[torch.transpose] = t[torch.Tensor.transpose]
    t[torch.addmm] = _addmm
    t[torch.where] = lambda tr, c, a, b: ops.where(tr, c, a, b)
    t[torch.clamp] = lambda tr, x, min=None, max=None: _clamp(tr, x, min, max)
    t[torch.sum] = lambda tr, x, dim=None, keepdim=False, dtype=None: TileValue.sum(
        ops.as_operand(tr, x), dim, keepdim, dtype)
    t[torch.mean] = lambda tr, x, dim=None, keepdim=False, dtype=None: TileValue.mean(
        ops.as_operand(tr, x), dim, keepdim, dtype)
    # (dim=() means every dim, as in torch; dim=0 is the first one)
    t[torch.amax] = lambda tr, x, dim=(), keepdim=False: ops.reduce(
        tr, "max", x, None if dim in ((), []) else dim, keepdim)
    t[torch.amin] = lambda tr, x, dim=(), keepdim=False: ops.reduce(
        tr, "min", x, None if dim in ((), []) else dim, keepdim)
    t[torch.max] = _maxmin("max")
    t[torch.min] = _maxmin("min")
    t[torch.softmax] = t[F.softmax] = t[torch.Tensor.softmax] = _softmax
    t[torch.var_mean] = _var_mean
    t[torch.var] = t[torch.Tensor.var] = lambda tr, x, *a, **k: _var_mean(tr, x, *a, **k)[0]
    t[torch.cumsum] = t[torch.Tensor.cumsum] = lambda tr, x, dim, dtype=None: _dtype(
        tr, ops.cumsum(tr, x, dim), dtype)
    t[F.gelu] = lambda tr, x, approximate="none": ops.gelu(tr, x, approximate)
    t[torch.Tensor.reshape] = t[torch.Tensor.view] = lambda tr, x, *shape: ops.reshape(
        tr, ops.as_operand(tr, x), shape)
    t[torch.reshape] = lambda tr, x, shape: ops.reshape(tr, ops.as_operand(tr, x), (shape,))
    t[torch.Tensor.unsqueeze] = t[torch.unsqueeze] = lambda tr, x, d: _unsqueeze(
        tr, ops.as_operand(tr, x), d)
    t[torch.Tensor.squeeze] = t[torch.squeeze] = lambda tr, x, d=None: _squeeze(
        tr, ops.as_operand(tr, x), d)
    t[torch.zeros_like] = lambda tr, x, dtype=None, **kw: ops.full(tr, [], 0, dtype or x.dtype) \
        if x.rank == 0 else _like(tr, x, 0, dtype)
    t[torch.full_like] = lambda tr, x, v, dtype=None, **kw: _like(tr, x, v, dtype)
    for f in rng.FUNCTIONS:     # torch.rand_like / randn_like / rand / randn: rng.py
        t[f] = lambda tr, *a, _f=f, **kw: rng.traced(tr, _f, *a, **kw)
    # `w.new_zeros(n)` in a tile loop (w a host tensor): a tile of n values, as hl.zeros([n])
    for m, v in (("new_zeros", 0), ("new_ones", 1), ("new_empty", 0)):
        t[getattr(torch.Tensor, m)] = (lambda v: lambda tr, x, *size, dtype=None, **kw: ops.full(
            tr, _sizes(size), v, dtype or x.dtype))(v)
    t[torch.Tensor.new_full] = lambda tr, x, size, value, dtype=None, **kw: ops.full(
        tr, _sizes((size,)), value, dtype or x.dtype)
    for m in ("to", "float", "half", "bfloat16", "type", "sum", "mean", "amax", "amin", "exp",
              "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid",
              "abs", "relu", "floor", "ceil", "neg", "__neg__", "__invert__", "__pow__", "clamp",
              "t"):
        t[getattr(torch.Tensor, m)] = (lambda m: lambda tr, x, *a, **k: getattr(TileValue, m)(
            ops.as_operand(tr, x), *a, **k))(m)
    return t


def _sizes(size) -> list:
    """new_zeros(n), new_zeros(m, n), new_zeros([m, n]) -> [sizes]."""
    if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)):
        size = size[0]
    return list(size)


def _softmax(tracer, x, dim=None, dtype=None, _stacklevel=3):
    if dim is None:
        raise TraceError("softmax in a tile loop needs dim=")
    return ops.softmax(tracer, x, dim, dtype)


def _var_mean(tracer, x, dim=None, *, correction=1, keepdim=False, unbiased=None):
    """(variance, mean) as torch.var_mean: the mean of squared deviations from the mean (the
    reduction skips padded lanes), scaled by n / (n - correction)."""
    x = ops.as_operand(tracer, x)
    if unbiased is not None:
        correction = 1 if unbiased else 0
    if dim is None:
        dim = list(range(x.rank))
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    mean = ops.reduce(tracer, "mean", x, dims, True)
    dev = ops.binary(tracer, "sub", x, mean)
    var = ops.reduce(tracer, "mean", ops.binary(tracer, "mul", dev, dev), dims, keepdim)
    if correction:
        n = 1
        for d in dims:
            e = x.dims[d % x.rank]
            if e is not ir.ONE and e.kind != "full":
                raise TraceError("var_mean with correction over a tiled dim: the count of "
                                 "elements is known only for a full slice ':' (or pass "
                                 "correction=0)")
            n *= 1 if e is ir.ONE else e.extent
        var = ops.binary(tracer, "mul", var, n / max(n - correction, 0) if n > correction
                         else float("nan"))
    if not keepdim:
        mean = ops.reduce(tracer, "mean", x, dims, False)
    return var, mean


def _unsqueeze(tracer, x, d):
    d = d % (x.rank + 1)
    return ops.view(tracer, x, tuple([slice(None)] * d + [None] + [slice(None)] * (x.rank - d)))


def _squeeze(tracer, x, d=None):
    keep = [e for i, e in enumerate(x.dims) if not (e is ir.ONE and (d is None or i == d % x.rank))]
    return ops.reshape(tracer, x, ([1 if e is ir.ONE else _TileOf(e) for e in keep],))


class _TileOf:
    """A stand-in tile for reshape shapes built from a value's own dims."""

    def __init__(self, dim):
        self.dim = dim


def _dtype(tracer, x, dtype):
    return x if dtype is None else ops.cast(tracer, x, dtype)


def _scaled(tracer, b, alpha):
    return b if alpha == 1 else ops.binary(tracer, "mul", b, alpha)


def _like(tracer, x, value, dtype):
    return tracer.new("full", [], x.dims, dtype or x.dtype, value, value=value)


TORCH_OPS = _table()


def _method(m):
    def method(self, *a, **k):
        return TORCH_OPS[getattr(torch.Tensor, m)](self.tracer, self, *a, **k)
    method.__name__ = m
    return method


for _m in ("softmax", "reshape", "view", "unsqueeze", "squeeze", "cumsum"):
    setattr(TileValue, _m, _method(_m))


def dispatch(tracer, func, args, kwargs):
    """Route a torch function call that met a tile proxy."""
    if tracer is None or tracer.program is None:
        raise TraceError("tile values and tiles exist only inside a `for ... in dt.tile(...)` loop")
    name = getattr(func, "__name__", "")
    if name == "__getitem__" and isinstance(args[0], torch.Tensor):
        return tracer.load(args[0], args[1])
    if name == "__setitem__" and isinstance(args[0], torch.Tensor):
        return tracer.store(args[0], args[1], args[2])
    fn = TORCH_OPS.get(func)
    if fn is None:
        qual = getattr(func, "__qualname__", None) or repr(func)
        qual = qual.replace("_VariableFunctionsClass.", "torch.").replace("TensorBase.", "Tensor.")
        raise TraceError(f"unsupported torch op in a tile loop: {qual} (supported: elementwise "
                         f"math, where, sum/mean/amax/amin, softmax, gelu, silu, "
                         f"matmul/addmm/bmm/baddbmm, .to)")
    return fn(tracer, *args, **kwargs)
