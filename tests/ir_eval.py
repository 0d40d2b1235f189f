"""A small reference evaluator of newt's IR (the opcode table, newt/ir/ops.py) on CPU torch
tensors: runs kernels built by build_ir so that tests can compare the frontend's lowering with
torch and with the interpreter (tests/test_frontend_exec.py).

Pointers are int64 values (buffer number << 40 | element index); ints are held as int64 and
wrapped to their width after every op; fp16/bf16 are computed in fp32 and rounded.
"""
import inspect

import torch

import newt
from newt import dtypes as D
from newt.frontend import build_ir

SHIFT = 40
MASK = (1 << SHIFT) - 1


def _wrap(x, dt):
    if dt.is_floating():
        return x.to(dt.to_torch()).to(torch.float64) if dt.bits < 64 else x.to(torch.float64)
    if dt.is_bool():
        return (x != 0).to(torch.int64)
    x = x.to(torch.int64)
    if dt.bits >= 64 or dt.is_ptr():
        return x
    m = 1 << dt.bits
    x = x & (m - 1)
    return torch.where(x >= m >> 1, x - m, x) if dt.is_signed() else x


_SIGNED_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _flat(buf):
    """A 1-D view of a buffer that torch can index (its uint16/32/64 indexing is missing)."""
    data = buf.view(-1)
    twin = _SIGNED_TWIN.get(data.dtype)
    return data.view(twin) if twin is not None else data


class Eval:
    def __init__(self, fn, buffers, scalars, grid):
        self.fn, self.buffers, self.grid = fn, buffers, grid
        self.env = {}
        bufs = iter(range(len(buffers)))
        for p in fn.params:
            if p.dtype.is_ptr():
                self.env[p.value.id] = torch.tensor(next(bufs) << SHIFT, dtype=torch.int64)
            else:
                self.env[p.value.id] = _wrap(torch.tensor(float(scalars[p.name])
                                             if p.dtype.is_floating() else scalars[p.name],
                                             dtype=torch.float64 if p.dtype.is_floating()
                                             else torch.int64), p.dtype)

    def run(self):
        for pid in torch.cartesian_prod(*[torch.arange(g) for g in self.grid]).reshape(
                -1, len(self.grid)).tolist():
            self.pid = pid + [0] * (3 - len(pid))
            try:
                self.block(self.fn.body, [])
            except _Return:
                pass

    def block(self, blk, args):
        for a, v in zip(blk.args, args):
            self.env[a.id] = v
        for op in blk.ops:
            if op.opcode in ("yield", "condition"):
                return [self.env[v.id] for v in op.operands]
            if op.opcode == "return":
                raise _Return()
            outs = self.op(op, [self.env[v.id] for v in op.operands])
            for r, v in zip(op.results, outs):
                self.env[r.id] = v
        return []

    # each op returns the list of its results
    def op(self, op, xs):  # noqa: C901
        c, a, res = op.opcode, op.attrs, op.results
        t = res[0].dtype if res else None
        if c == "constant":
            v = a["value"]
            if not t.is_floating() and v >= 1 << 63:   # uint64 bit pattern in an int64
                v -= 1 << 64
            return [_wrap(torch.tensor(v, dtype=torch.float64 if t.is_floating()
                                       else torch.int64), t)]
        if c == "program_id":
            return [torch.tensor(self.pid[a["axis"]])]
        if c == "num_programs":
            return [torch.tensor((list(self.grid) + [1, 1])[a["axis"]])]
        if c == "arange":
            return [torch.arange(a["start"], a["end"])]
        if c in ("splat", "broadcast"):
            return [xs[0].expand(res[0].type.shape).clone()]
        if c == "reshape":
            return [xs[0].reshape(res[0].type.shape)]
        if c == "permute":
            return [xs[0].permute(a["order"]).contiguous()]
        if c == "cast":
            src = op.operands[0].dtype
            if a.get("bitcast"):
                if src.is_ptr() or t.is_ptr():
                    return [xs[0]]
                x = xs[0].to(src.to_torch()).view(t.to_torch())
                return [_wrap(x.to(torch.float64 if t.is_floating() else torch.int64), t)]
            x = xs[0]
            if t.is_bool():
                return [(x != 0).to(torch.int64)]
            if t.is_int() and src.is_floating():
                x = torch.trunc(x)
            return [_wrap(x, t)]
        if c == "binary":
            return [self.binary(a["op"], xs[0], xs[1], op.operands[0].dtype, t)]
        if c == "unary":
            return [self.unary(a["op"], xs[0], t)]
        if c == "select":
            return [torch.where(xs[0] != 0, xs[1], xs[2])]
        if c == "fma":
            return [_wrap(xs[0] * xs[1] + xs[2], t)]
        if c == "addptr":
            return [xs[0] + xs[1]]
        if c == "load":
            return [self.load(op, xs, t)]
        if c == "store":
            self.store(op, xs)
            return []
        if c == "atomic":
            return [self.atomic(op, xs, t)]
        if c == "reduce":
            return [self.reduce(a["kind"], xs[0], a["axis"], t)]
        if c == "scan":
            x = xs[0].flip(a["axis"]) if a["reverse"] else xs[0]
            r = _wrap(torch.cumsum(x, a["axis"]), t)
            return [r.flip(a["axis"]) if a["reverse"] else r]
        if c == "dot":
            return [_wrap(xs[0].to(torch.float64) @ xs[1].to(torch.float64) + xs[2], t)]
        if c == "for":
            lb, ub, st, *carried = xs
            for i in range(int(lb), int(ub), int(st)):
                carried = self.block(op.regions[0], [torch.tensor(i)] + carried)
            return carried
        if c == "while":
            carried = xs
            while True:
                (cond,) = self.block(op.regions[0], carried)
                if not bool(cond):
                    return carried
                carried = self.block(op.regions[1], carried)
        if c == "if":
            return self.block(op.regions[0 if bool(xs[0]) else 1], [])
        if c == "assert":
            assert bool((xs[0] != 0).all()), a["msg"]
            return []
        if c in ("print", "barrier"):
            return []
        if c == "philox":
            return self.philox(xs[0], xs[1], a["n_rounds"])
        raise NotImplementedError(c)

    def binary(self, o, x, y, dt, t):
        if o in ("eq", "ne", "lt", "le", "gt", "ge"):
            return getattr(torch, o)(x, y).to(torch.int64)
        if o == "div":
            return _wrap(x / y, t)
        if o in ("idiv", "mod") and not t.is_floating():
            zero = y == 0    # masked-off lanes divide by zero: any value will do
            y = torch.where(zero, torch.ones_like(y), y)
            r = torch.div(x, y, rounding_mode="trunc") if o == "idiv" else torch.fmod(x, y)
            return _wrap(torch.where(zero, torch.full_like(r, -1), r), t)
        if o == "mod":
            return _wrap(torch.fmod(x, y), t)
        if o == "shr" and dt.kind == "uint":
            return _wrap(x >> y, t)
        if o == "umulhi":
            return _wrap((x * y) >> 32, t)
        f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "and": torch.bitwise_and,
             "or": torch.bitwise_or, "xor": torch.bitwise_xor, "shl": torch.bitwise_left_shift,
             "shr": torch.bitwise_right_shift, "maximum": torch.maximum,
             "minimum": torch.minimum}[o]
        return _wrap(f(x, y), t)

    def unary(self, o, x, t):
        if o == "not":
            return (x == 0).to(torch.int64)
        if o == "invert":
            return _wrap(~x, t)
        if o == "sigmoid":
            return _wrap(torch.sigmoid(x), t)
        if o == "sqrt_rn":
            o = "sqrt"
        return _wrap(getattr(torch, o)(x), t)

    def _addr(self, ptr):
        return ptr >> SHIFT, ptr & MASK

    def load(self, op, xs, t):
        ptr = xs[0]
        mask = xs[1] != 0 if op.attrs["has_mask"] else torch.ones_like(ptr, dtype=torch.bool)
        out = xs[2].clone() if op.attrs["has_other"] else torch.zeros_like(
            ptr, dtype=torch.float64 if t.is_floating() else torch.int64)
        buf, idx = self._addr(ptr)
        for k in buf[mask].unique().tolist():
            sel = mask & (buf == k)
            vals = _flat(self.buffers[k])[idx[sel]]
            out[sel] = vals.to(out.dtype) if t.is_floating() else _wrap(vals.to(torch.int64), t)
        return out

    def store(self, op, xs):
        ptr, val = xs[0], xs[1]
        mask = xs[2] != 0 if op.attrs["has_mask"] else torch.ones_like(ptr, dtype=torch.bool)
        buf, idx = self._addr(ptr)
        for k in buf[mask].unique().tolist():
            sel = mask & (buf == k)
            data = _flat(self.buffers[k])
            data[idx[sel]] = val.expand(ptr.shape)[sel].to(data.dtype)

    def atomic(self, op, xs, t):
        ptr, val = xs[0], xs[-1] if op.attrs["kind"] == "cas" else xs[1]
        m = xs[2] != 0 if op.attrs["has_mask"] else torch.ones_like(ptr, dtype=torch.bool)
        old = torch.zeros_like(val)
        for i in range(ptr.numel()):  # sequential: one element at a time, in order
            if not bool(m.reshape(-1)[i]):
                continue
            k, j = (int(v) for v in self._addr(ptr.reshape(-1)[i]))
            data = _flat(self.buffers[k])
            cur = _wrap(torch.tensor(data[j].item(), dtype=old.dtype), t)
            old.view(-1)[i] = cur
            v = val.reshape(-1)[i]
            kind = op.attrs["kind"]
            new = {"add": lambda: cur + v, "max": lambda: torch.maximum(cur, v),
                   "min": lambda: torch.minimum(cur, v), "xchg": lambda: v,
                   "and": lambda: cur & v, "or": lambda: cur | v, "xor": lambda: cur ^ v,
                   "cas": lambda: v if bool(cur == xs[1].reshape(-1)[i]) else cur}[kind]()
            data[j] = _wrap(new, t).to(data.dtype)
        return old

    def reduce(self, kind, x, axis, t):
        if kind == "sum":
            return _wrap(x.sum(axis), t)
        if kind in ("max", "min"):
            return getattr(x, kind)(axis).values
        key = x if kind == "argmax" else -x
        m = key.max(axis, keepdim=True).values
        idx = torch.arange(x.shape[axis]).reshape([-1 if i == axis else 1 for i in range(x.dim())])
        return torch.where(key == m, idx, x.shape[axis]).min(axis).values

    def philox(self, seed, offset, n_rounds):
        m32 = 0xFFFFFFFF
        k0, k1 = seed & m32, (seed >> 32) & m32
        c0, c1 = offset & m32, torch.zeros_like(offset)
        c2, c3 = torch.zeros_like(offset), torch.zeros_like(offset)
        k0, k1 = k0.expand(c0.shape), k1.expand(c0.shape)
        for _ in range(n_rounds):
            pa, pb = 0xD2511F53 * c0, 0xCD9E8D57 * c2
            c0, c1, c2, c3 = ((pb >> 32) & m32) ^ c1 ^ k0, pb & m32, ((pa >> 32) & m32) ^ c3 ^ k1, \
                pa & m32
            k0, k1 = (k0 + 0x9E3779B9) & m32, (k1 + 0xBB67AE85) & m32
        return [c0, c1, c2, c3]


class _Return(Exception):
    pass


def run_ir(kernel, grid, *args, **constexprs):
    """Build kernel's IR for these arguments and run it on the evaluator (tensors in place)."""
    sig, buffers, scalars = {}, [], {}
    names = [n for n in inspect.signature(kernel.fn).parameters if n not in constexprs]
    for n, v in zip(names, args):
        if isinstance(v, torch.Tensor):
            sig[n] = D.pointer_type(D.from_torch(v.dtype))
            buffers.append(v)
        else:
            sig[n] = D.float32 if isinstance(v, float) else D.int32
            scalars[n] = v
    fn = build_ir(kernel, sig, constexprs)
    Eval(fn, buffers, scalars, grid).run()
    return fn


def run_interp(kernel, grid, *args, **constexprs):
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        kernel[grid](*args, **constexprs)
    finally:
        newt.options.flags.interpret = old
