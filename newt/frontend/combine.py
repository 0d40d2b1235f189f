"""nl.reduce / nl.associative_scan with a user combine function, nl.cumprod and
nl.map_elementwise (part of the frontend's semantic layer; names and docs in
newt/language/scans.py).

The combine function (a @newt.jit function of 2*k scalars returning k values) is built once
into an IR function of its own over scalars, CombineFn.fn: a fresh Builder whose parameters are
(a0.., b0..) of the operands' dtypes, with the user's function inlined into it by a CodeGen as
any @jit callee is. It is not part of the kernel's body (no pass sees it); the `scan_fn` op
holds it in attrs["combine"], and codegen prints it as one device function the scan calls
(newt/codegen/scan_fn.py). nl.cumprod is a scan_fn whose combine function is a multiply.
"""
from __future__ import annotations

from .. import dtypes as D
from ..ir.builder import Builder, type_like
from ..ir.verifier import verify
from .semantic import broadcast_all, cast, error, to_tensor
from .movement import const_int
from .shapes import reshape
from .values import Tensor


class CombineFn:
    """A combine function as IR: `fn` (an ir.Function over scalars) and its `results`."""

    def __init__(self, name, fn, results):
        self.name, self.fn, self.results = name, fn, results

    def __repr__(self):
        return f"{self.name}/{len(self.results)}"


def build_scalar_fn(b, fn, params, dtypes=None, what="combine_fn") -> CombineFn:
    """`fn` (a @newt.jit function) inlined into an IR function over scalar parameters
    `params` [(name, dtype)]; its results cast to `dtypes` (or kept as they come)."""
    from ..jit import JITFunction
    from .visitor import CodeGen, Context
    name = getattr(fn, "__name__", "fn")
    cb = Builder.for_function(name, params, loc=b.loc)
    args = [Tensor(v, cb) for v in cb.func.body.args]
    if isinstance(fn, JITFunction):
        try:
            bound = fn.signature.bind(*args)
        except TypeError as e:
            error(f"{what} {name}() is called with {len(args)} arguments: {e}")
        sub = CodeGen(Context(cb), fn.fn, is_kernel=False)
        sub.scope.update(bound.arguments)
        sub.visit_stmts(sub.src.node.body)
        ret = sub.ret
    elif getattr(fn, "__newt_internal__", False):
        ret = fn(cb, *args)
    else:
        error(f"{what} must be a @newt.jit function, got {fn!r}")
    rets = list(ret) if isinstance(ret, (tuple, list)) else [ret]
    if dtypes is not None and len(rets) != len(dtypes):
        error(f"{what} {name}() returned {len(rets)} value(s) for {len(dtypes)} operand(s)")
    outs = []
    for i, r in enumerate(rets):
        if r is None:
            error(f"{what} {name}() must return its result(s)")
        t = to_tensor(cb, r, dtypes[i] if dtypes else None)
        if dtypes is not None:
            t = cast(cb, t, dtypes[i])
        if t.is_block():
            error(f"{what} {name}() must compute on scalars, it returned a block")
        outs.append(t.v)
    verify(cb.func)
    return CombineFn(name, cb.func, outs)


def build_combine(b, combine_fn, dtypes) -> CombineFn:
    params = [(f"a{i}", dt) for i, dt in enumerate(dtypes)] + \
             [(f"b{i}", dt) for i, dt in enumerate(dtypes)]
    return build_scalar_fn(b, combine_fn, params, list(dtypes))


def map_elementwise(b, scalar_fn, *args, pack=1):
    """scalar_fn applied to every element of the broadcast args: one map_fn op whose function
    codegen prints once and calls per element (`pack` is accepted: one element per call)."""
    if not args:
        error("map_elementwise needs at least one argument")
    ts = broadcast_all(b, *[to_tensor(b, a) for a in args])
    for t in ts:
        if t.dtype.is_ptr():
            error("map_elementwise: pointer arguments are not supported")
    fn = build_scalar_fn(b, scalar_fn, [(f"x{i}", t.dtype) for i, t in enumerate(ts)],
                         what="scalar_fn")
    op = b.create("map_fn", [t.v for t in ts], [type_like(ts[0].type, r.dtype) for r in fn.results],
                  {"fn": fn})
    rs = [Tensor(r, b) for r in op.results]
    return rs[0] if len(rs) == 1 else tuple(rs)


def _operands(b, input):
    single = not isinstance(input, (tuple, list))
    xs = [to_tensor(b, x) for x in ([input] if single else input)]
    for x in xs:
        if x.dtype.is_ptr() or x.dtype.is_fp8():
            error(f"cannot scan or reduce {x.dtype.name} values")
    return broadcast_all(b, *xs), single


def _axis(x, axis, what):
    a = const_int(axis, f"{what} axis")
    r = len(x.shape)
    if not -r <= a < r:
        error(f"{what}: axis {a} is out of range for a block of shape {list(x.shape)}")
    return a % r


def associative_scan(b, input, axis, combine_fn, reverse=False):
    xs, single = _operands(b, input)
    if not xs[0].is_block():
        return xs[0] if single else tuple(xs)
    ax = _axis(xs[0], axis, "associative_scan")
    cf = build_combine(b, combine_fn, [x.dtype for x in xs])
    if xs[0].shape[ax] == 1:     # nothing to combine (and no scratch user without a barrier)
        return xs[0] if single else tuple(xs)
    op = b.create("scan_fn", [x.v for x in xs], [x.type for x in xs],
                  {"axis": ax, "reverse": bool(reverse), "reduce": False, "combine": cf})
    rs = [Tensor(r, b) for r in op.results]
    return rs[0] if single else tuple(rs)


def reduce(b, input, axis, combine_fn, keep_dims=False):
    xs, single = _operands(b, input)
    if not xs[0].is_block():
        return xs[0] if single else tuple(xs)
    shape = xs[0].shape
    if axis is None:
        xs = [reshape(b, x, x.numel) if len(shape) > 1 else x for x in xs]
        ax = 0
    else:
        ax = _axis(xs[0], axis, "reduce")
    cf = build_combine(b, combine_fn, [x.dtype for x in xs])
    out = tuple(s for i, s in enumerate(xs[0].shape) if i != ax)
    op = b.create("scan_fn", [x.v for x in xs], [type_like(x.type, shape=out) for x in xs],
                  {"axis": ax, "reverse": False, "reduce": True, "combine": cf})
    rs = [Tensor(r, b) for r in op.results]
    if keep_dims:
        kept = (1,) * len(shape) if axis is None else shape[:ax] + (1,) + shape[ax + 1:]
        rs = [Tensor(b.splat(r.v, kept), b) if not r.is_block() else reshape(b, r, kept)
              for r in rs]
    return rs[0] if single else tuple(rs)


def _multiply(cb, a, c):
    from .semantic import binary
    return binary(cb, "mul", a, c)


_multiply.__newt_internal__ = True
_multiply.__name__ = "mul"


def cumprod(b, input, axis=0, reverse=False):
    x = to_tensor(b, input)
    if x.dtype is D.bfloat16:        # as Triton: bf16 products are computed in fp32
        x = cast(b, x, D.float32)
    return associative_scan(b, x, axis, _multiply, reverse)


def _xor(cb, a, c):
    from .semantic import binary
    return binary(cb, "xor", a, c)


_xor.__newt_internal__ = True
_xor.__name__ = "xor"


def xor_sum(b, input, axis=None, keep_dims=False):
    x = to_tensor(b, input)
    if not x.dtype.is_int() or x.dtype.is_bool():
        error(f"xor_sum needs integers, got {x.dtype.name}")
    return reduce(b, x, axis, _xor, keep_dims)


def _or(cb, a, c):
    from .semantic import binary
    return binary(cb, "or", a, c)


_or.__newt_internal__ = True
_or.__name__ = "or"


def reduce_or(b, input, axis, keep_dims=False):
    x = to_tensor(b, input)
    if not x.dtype.is_int():
        error(f"reduce_or needs integers or bools, got {x.dtype.name}")
    return reduce(b, x, axis, _or, keep_dims)


def softmax(b, x, dim=None, keep_dims=False, ieee_rounding=False):
    from .reductions import max_, sum_
    from .semantic import binary, div_rn, math_unary
    x = to_tensor(b, x)
    d = 0 if dim is None else dim
    z = binary(b, "sub", x, max_(b, x, d, keep_dims=True))
    num = math_unary(b, "exp", z)
    den = sum_(b, num, d, keep_dims=True)
    return div_rn(b, num, den) if ieee_rounding else binary(b, "truediv", num, den)
