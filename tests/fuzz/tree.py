"""Expression trees of the differential fuzzer: one `Node` type, its newt source text and its
reference value computed with plain torch ops.

Consumed by gen.py (which builds random trees) and harness.py (which turns a tree into a kernel
and compares it). The reference follows Triton's rules as newt states them: operands of a binary
op are converted to `newt.dtypes.computation_type(...)`; fp16/bf16 arithmetic is computed in fp32
and rounded back after every op; integers wrap (held here as int64, uint64 as its bit pattern);
integer `//` and `%` truncate toward zero (C); `/` on integers divides in fp32; narrow integer
sums accumulate in (u)int32; argmax/argmin return the first index among ties.

Shapes are symbolic: "MN" (a [BM, BN] block), "M1", "1N" and "S" (a 0-d scalar). The reference
works on the real extents (M, N); the kernel computes on padded blocks under masks.

Every node also carries facts the generator needs to avoid undefined or unstable programs:
`bound` (an upper bound of |value| for floats, also in masked lanes) and `exact` (the value is
the same on every correct implementation: no transcendental, division, float sum or possible
fma contraction went into it). Discontinuous ops (comparisons, floor/ceil, float -> int casts,
argmax of floats) only take exact operands, so a 1-ulp difference cannot become a wrong answer.
"""
from __future__ import annotations

import torch

from newt import dtypes as D

MIN64 = -2 ** 63
MAXI64 = 2 ** 63 - 1
FCOMP = {D.float16: torch.float32, D.bfloat16: torch.float32, D.float32: torch.float32,
         D.float64: torch.float64}
SHAPE = {"MN": lambda M, N: (M, N), "M1": lambda M, N: (M, 1), "1N": lambda M, N: (1, N),
         "S": lambda M, N: ()}
CMP = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq,
       "!=": torch.ne}
MATH = {"exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2,
        "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
        "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "floor": torch.floor,
        "ceil": torch.ceil}


def broadcast_shape(*shapes):
    m = any(s in ("MN", "M1") for s in shapes)
    n = any(s in ("MN", "1N") for s in shapes)
    return {(True, True): "MN", (True, False): "M1", (False, True): "1N"}.get((m, n), "S")


# ----------------------------------------------------------------------------- reference values

def wrap(v: torch.Tensor, dt) -> torch.Tensor:
    """int64 values wrapped into integer dtype dt (held as int64; uint64 as its bit pattern)."""
    if dt.bits >= 64:
        return v
    if dt.kind == "uint":
        return v & ((1 << dt.bits) - 1)
    half = 1 << (dt.bits - 1)
    return ((v + half) & ((1 << dt.bits) - 1)) - half


def ordered(v: torch.Tensor, dt) -> torch.Tensor:
    """int64 keys whose signed order is dt's order."""
    return v ^ MIN64 if dt is D.uint64 else v


def from_tensor(t: torch.Tensor, dt) -> torch.Tensor:
    """A kernel buffer (CPU) as a reference value."""
    if dt.is_floating() or dt.is_bool():
        return t.clone()
    return t.view(torch.int64).clone() if dt is D.uint64 else t.to(torch.int64)


def to_tensor(v: torch.Tensor, dt) -> torch.Tensor:
    """A reference value as a tensor of dt's torch dtype (what the kernel stores)."""
    if dt.is_floating() or dt.is_bool():
        return v.to(dt.to_torch())
    if dt is D.uint64:
        return v.view(torch.uint64)
    return wrap(v, dt).to(dt.to_torch())


def cast(v: torch.Tensor, src, dst) -> torch.Tensor:
    if src is dst:
        return v
    if dst.is_bool():
        return v != 0
    if src.is_bool():
        return v.to(dst.to_torch()) if dst.is_floating() else v.to(torch.int64)
    if dst.is_fp8():          # saturating, through fp32 (cvt.rn.satfinite)
        m = torch.finfo(dst.to_torch()).max
        return v.to(torch.float32).clamp(-m, m).to(dst.to_torch())
    if dst.is_floating():
        if src is D.uint64:
            return v.view(torch.uint64).to(dst.to_torch())
        return v.to(dst.to_torch())
    if src.is_floating():   # the generator guarantees the value is in range
        return wrap(torch.trunc(v.double()).to(torch.int64), dst)
    return wrap(v, dst)


def _udivmod(a, b):
    """Unsigned 64-bit division of bit patterns by small positive divisors."""
    q = (((a >> 1) & MAXI64) // b) << 1
    r = a - q * b
    ge = r >= b
    return q + ge.long(), r - b * ge.long()


def int_binary(op, a, b, ct):
    if op in ("+", "-", "*", "&", "|", "^"):
        r = {"+": torch.add, "-": torch.sub, "*": torch.mul, "&": torch.bitwise_and,
             "|": torch.bitwise_or, "^": torch.bitwise_xor}[op](a, b)
        return (r & 1) != 0 if ct.is_bool() else wrap(r, ct)   # i1 wraps: True + True is False
    if op in ("//", "%"):
        a, b = torch.broadcast_tensors(a, b)
        if ct is D.uint64:
            q, r = _udivmod(a, b)
        else:
            q = torch.div(a, b, rounding_mode="trunc")
            r = a - q * b
        return wrap(q if op == "//" else r, ct)
    # (an amount past the width clamps to it, as PTX's shl / shr: << gives 0, >> 0 or the sign)
    if op == "<<":
        return torch.where(b >= max(ct.bits, 32), 0, wrap(a << b.clamp(max=63), ct))
    if op == ">>":
        if ct is D.uint64:
            a, b = torch.broadcast_tensors(a, b)
            logical = ((a >> 1) & MAXI64) >> (b - 1).clamp(min=0, max=63)
            return torch.where(b == 0, a, logical)
        return a >> b.clamp(max=63)
    raise AssertionError(op)


# ----------------------------------------------------------------------------- nodes

class Node:
    """One value of a generated kernel. `op` selects the meaning of `kids` and `attr`:

    load (attr: input name) | arg (attr: scalar parameter name) | lit (attr: Python number)
    | loopvar (attr: name) | cast (attr: target dtype, via_abs or "bitcast") | unary (attr: '-', '~', 'abs')
    | math (attr: function name) | bin (attr: operator) | minmax (attr: 'minimum'/'maximum')
    | cmp (attr: operator) | where | reduce (attr: (fn, axis, keep, spelling))
    | loop (attr: (trip-count parameter, carry operator)) | branch (attr: (flag, value))
    """

    def __init__(self, op, dt, shape, kids=(), attr=None, *, weak=False, bound=None, exact=True,
                 fusable=False):
        self.op, self.dt, self.shape, self.kids, self.attr = op, dt, shape, list(kids), attr
        self.weak, self.bound, self.exact, self.fusable = weak, bound, exact, fusable

    def float_dtypes(self, inexact_only=False):
        """Float dtypes that the value flows through (for tolerances)."""
        out = set()
        for k in self.kids:
            out |= k.float_dtypes(inexact_only)
        if self.dt.is_floating() and not (inexact_only and self.exact):
            out.add(self.dt)
        return out

    # ------------------------------------------------------------------ source text
    def emit(self, em) -> str:
        """The expression text of this node; statements it needs go to `em` (an Emitter)."""
        op, a = self.op, self.attr
        if op in ("load", "arg", "loopvar"):
            return a
        if op == "lit":
            return repr(a)
        k = [c.emit(em) for c in self.kids] if op not in ("loop", "branch") else None
        if op == "cast":
            src = f"nl.abs({k[0]})" if self.attr[1] else k[0]
            if a[1] == "bitcast":
                return em.tmp(f"({k[0]}).to(nl.{a[0].name}, bitcast=True)")
            return em.tmp(f"({src}).to(nl.{a[0].name})")
        if op == "unary":
            return em.tmp(f"nl.abs({k[0]})" if a == "abs" else f"{a}{k[0]}")
        if op == "math":
            return em.tmp(f"nl.{a}({k[0]})")
        if op in ("bin", "cmp"):
            return em.tmp(f"{k[0]} {a} {k[1]}")
        if op == "minmax":
            return em.tmp(f"nl.{a}({k[0]}, {k[1]})")
        if op == "where":
            return em.tmp(f"nl.where({k[0]}, {k[1]}, {k[2]})")
        if op == "reduce":
            fn, axis, keep, spell = a
            neutral = self.kids[0].neutral(fn)
            src = em.tmp(f"nl.where(mask, {k[0]}, {neutral!r})")
            if axis is None:
                return em.tmp(f"nl.{fn}({src}, axis=None)")
            if keep:
                return em.tmp(f"nl.{fn}({src}, axis={axis}, keep_dims=True)")
            r = em.tmp(f"nl.{fn}({src}, axis={axis})")
            if spell == "index":
                return em.tmp(f"{r}[None, :]" if axis == 0 else f"{r}[:, None]")
            return em.tmp(f"nl.expand_dims({r}, {axis})")
        if op == "loop":
            count, carry, var = a
            init, body = self.kids
            acc = em.tmp(f"nl.broadcast_to({init.emit(em)}, (BM, BN))")
            with em.block(f"for {var} in range({count}):"):
                b = body.emit(em)
                em.line(f"{acc} = nl.{carry}({acc}, {b})" if carry in ("minimum", "maximum")
                        else f"{acc} = {acc} {carry} {b}")
            return acc
        if op == "branch":
            flag, _ = a
            out = em.fresh()
            with em.block(f"if {flag}:"):
                em.line(f"{out} = {self.kids[0].emit(em)}")
            with em.block("else:"):
                em.line(f"{out} = {self.kids[1].emit(em)}")
            return out
        raise AssertionError(op)

    def neutral(self, fn):
        """A literal that cannot change reduction `fn` of this node's values (masked lanes)."""
        dt = self.dt
        if fn == "sum":
            return 0.0 if dt.is_floating() else 0
        low = fn in ("max", "argmax")
        if dt.is_floating():
            big = 30000.0 if dt is D.float16 else 1e30
            return -big if low else big
        if dt.kind == "uint":
            return 0 if low else (1 << dt.bits) - 1
        return -(1 << (dt.bits - 1)) if low else (1 << (dt.bits - 1)) - 1

    # ------------------------------------------------------------------ reference
    def eval(self, env) -> torch.Tensor:
        op, a = self.op, self.attr
        if op in ("load", "arg", "loopvar"):
            return env[a]
        if op == "lit":
            raise AssertionError("literals are evaluated by their parent")
        if op == "loop":
            count, carry, var = a
            acc = self.kids[0].eval(env).expand(*SHAPE["MN"](env["M"], env["N"]))
            stub = _Stub(self.dt)
            for i in range(env[count] if isinstance(count, str) else count):
                b = self.kids[1].eval(dict(env, **{var: torch.tensor(i)}))
                acc = binary_ref(carry, stub, acc, stub, b)
            return acc
        if op == "branch":
            return self.kids[0 if a[1] else 1].eval(env)
        vals = [None if k.op == "lit" else k.eval(env) for k in self.kids]
        if op == "cast":
            if a[1] == "bitcast":   # float bits as a same-width integer
                bits = vals[0].view({16: torch.int16, 32: torch.int32, 64: torch.int64}[a[0].bits])
                return wrap(bits.to(torch.int64), a[0])
            v = vals[0].abs() if a[1] else vals[0]
            return cast(v, self.kids[0].dt, a[0])
        if op == "unary":
            x, dt = vals[0], self.dt
            if dt.is_floating():
                return (-x if a == "-" else x.abs())
            if a == "~":
                return ~x if dt.is_bool() else wrap(~x, dt)
            if a == "abs":
                return x if dt.kind == "uint" else wrap(x.abs(), dt)
            return wrap(-x, dt)
        if op == "math":
            x = vals[0]
            return MATH[a](x.to(FCOMP[self.dt])).to(self.dt.to_torch())
        if op in ("bin", "minmax", "cmp"):
            (ka, kb), (va, vb) = self.kids, vals
            return binary_ref(a, ka, va, kb, vb)
        if op == "where":
            c, x, y = vals
            kx, ky = self.kids[1:]
            x, y, _ = promote(kx, x, ky, y)
            return torch.where(c, x, y)
        if op == "reduce":
            return self._reduce(vals[0], env)
        raise AssertionError(op)

    def _reduce(self, x, env):
        fn, axis, _, _ = self.attr
        src = self.kids[0].dt
        x = x.expand(*SHAPE["MN"](env["M"], env["N"]))
        if axis is None:
            if fn.startswith("arg"):   # flat indices count the padded [BM, BN] block
                pad = _const(self.kids[0].neutral(fn), src).expand(env["BM"], env["BN"])
                pad = pad.clone()
                pad[:env["M"], :env["N"]] = x
                x = pad
            x, axis = x.reshape(-1), 0
        if fn == "sum":
            if src.is_floating():
                r = x.double().sum(axis).to(src.to_torch())
            else:
                acc = src if src.bits >= 32 else (D.int32 if src.kind == "int" else D.uint32)
                r = wrap(x.sum(axis), acc)
        elif fn in ("argmax", "argmin"):
            key = x if src.is_floating() else ordered(x, src)
            r = key.argmax(axis) if fn == "argmax" else key.argmin(axis)
        else:
            key = x if src.is_floating() else ordered(x, src)
            r = torch.gather(x, axis, (key.argmax(axis, keepdim=True) if fn == "max"
                                       else key.argmin(axis, keepdim=True))).squeeze(axis)
        if self.shape == "S":
            return r.reshape(())
        return r.unsqueeze(self.attr[1])


class _Stub:
    """Operand facts for binary_ref when a loop re-applies its carry operator."""

    def __init__(self, dt):
        self.dt, self.weak, self.attr, self.op = dt, False, None, "v"


def promote(ka, va, kb, vb, div=False):
    """Both operands converted to their computation type (literals are weak)."""
    ct = D.computation_type(ka.dt, ka.weak, kb.dt, kb.weak, div)
    va = _const(ka.attr, ct) if ka.op == "lit" else cast(va, ka.dt, ct)
    vb = _const(kb.attr, ct) if kb.op == "lit" else cast(vb, kb.dt, ct)
    return va, vb, ct


def binary_ref(op, ka, va, kb, vb):
    va, vb, ct = promote(ka, va, kb, vb, op in ("/", "//", "%"))
    if op == "/" and not ct.is_floating():
        va, vb, ct = cast(va, ct, D.float32), cast(vb, ct, D.float32), D.float32
    if op in CMP:
        if ct.is_floating() or ct.is_bool():
            return CMP[op](va, vb)
        return CMP[op](ordered(va, ct), ordered(vb, ct))
    if op in ("minimum", "maximum"):
        if ct.is_floating():
            return (torch.minimum if op == "minimum" else torch.maximum)(va, vb)
        pick_a = (ordered(va, ct) <= ordered(vb, ct)) == (op == "minimum")
        return torch.where(pick_a, va, vb)
    if ct.is_floating():
        x, y = va.to(FCOMP[ct]), vb.to(FCOMP[ct])
        r = {"+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div}[op](x, y)
        return r.to(ct.to_torch())
    if ct.is_bool():
        va, vb = va.long(), vb.long()
    return int_binary(op, va, vb, ct)


def _const(value, ct) -> torch.Tensor:
    """A Python literal converted to the computation type ct."""
    if ct.is_floating():
        return torch.tensor(float(value), dtype=ct.to_torch())
    if ct.is_bool():
        return torch.tensor(bool(value))
    return wrap(torch.tensor(int(value) - (1 << 64) if int(value) > MAXI64 else int(value)), ct)
