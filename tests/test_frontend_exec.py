"""The frontend's IR, executed: a small reference evaluator of the opcode table (newt/ir/ops.py)
on CPU torch tensors runs kernels built by build_ir, and the results are compared with torch
(and with the interpreter, the language's executable spec). This checks the frontend's lowering
(promotion, broadcasting, control flow, reductions, random streams) without a GPU.

Pointers are int64 values (buffer number << 40 | element index); ints are held as int64 and
wrapped to their width after every op; fp16/bf16 are computed in fp32 and rounded.

Also a pytest plugin: `python -m pytest -p tests.test_frontend_exec tests/test_ops_*.py -k interp`
runs the whole op suite's "interp" kernels through build_ir + this evaluator instead of the
interpreter (every kernel the suite has, checked against torch, with no GPU).
"""
import inspect

import pytest
import torch

import newt
import newt.language as nl
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


# ----------------------------------------------------------------------------- kernels

@newt.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK)
    mask = cols < n_cols
    x = nl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - nl.max(x, axis=0)
    num = nl.exp(x)
    nl.store(out_ptr + row * stride + cols, num / nl.sum(num, axis=0), mask=mask)


def test_softmax_fp16():
    x = torch.randn(5, 37).half()
    out = torch.full_like(x, float("nan"))
    run_ir(softmax_kernel, (5,), out, x, 37, 37, BLOCK=64)
    torch.testing.assert_close(out, torch.softmax(x.float(), 1).half(), atol=2e-3, rtol=2e-3)


@newt.jit
def mixed_kernel(x_ptr, i_ptr, o_ptr, oi_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m, other=1.0)
    i = nl.load(i_ptr + offs, mask=m, other=1)
    y = nl.where(x > 0, x * 2, -x) + i / 3 + max(n, 5) + nl.sqrt(nl.abs(x)) + nl.fma(x, x, 1.0)
    y = nl.minimum(nl.maximum(y, -3.0), 50.0) + (i % 7) + (i // -5)
    k = (i << 2) ^ (i >> 1) | 3
    nl.store(o_ptr + offs, y, mask=m)
    nl.store(oi_ptr + offs, k.to(nl.int16), mask=m)


def test_elementwise_semantics_match_interpreter():
    n = 77
    x = torch.randn(n)
    i = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    outs = [(torch.full((n,), float("nan")), torch.full((n,), -7, dtype=torch.int16))
            for _ in range(2)]
    run_ir(mixed_kernel, (3,), x, i, *outs[0], n, BLOCK=32)
    run_interp(mixed_kernel, (3,), x, i, *outs[1], n, BLOCK=32)
    torch.testing.assert_close(outs[0][0], outs[1][0])
    assert torch.equal(outs[0][1], outs[1][1])
    want = torch.where(x > 0, x * 2, -x) + i / 3 + n + x.abs().sqrt() + (x * x + 1)
    want = want.clamp(-3, 50) + torch.fmod(i, 7) + torch.div(i, -5, rounding_mode="trunc")
    torch.testing.assert_close(outs[0][0], want)


@newt.jit
def control_kernel(x_ptr, o_ptr, n, LIMIT: nl.constexpr):
    pid = nl.program_id(0)
    if pid == 3:
        return
    total = 0.0
    best = -float("inf")
    for i in range(0, n):
        v = nl.load(x_ptr + pid * n + i)
        if v > 0:
            total += v
        else:
            total -= 1.0
        best = max(best, v)
    k = 0
    while k * k < n:
        k += 1
    for s in nl.static_range(2):
        total = total * 2 if s == 0 else total + k
    if total > LIMIT:
        total = LIMIT + 0.0
    nl.store(o_ptr + pid, total + best)


def test_control_flow():
    n, progs = 9, 5
    x = torch.randn(progs * n)
    out = torch.full((progs,), float("nan"))
    run_ir(control_kernel, (progs,), x, out, n, LIMIT=6.0)
    xs = x.reshape(progs, n)
    tot = torch.where(xs > 0, xs, torch.full_like(xs, -1.0)).sum(1) * 2 + 3
    want = torch.minimum(tot, torch.tensor(6.0)) + xs.max(1).values
    want[3] = float("nan")   # returned early: nothing stored
    torch.testing.assert_close(out, want, equal_nan=True)


@newt.jit
def reduce_kernel(x_ptr, o_ptr, i_ptr, c_ptr, M: nl.constexpr, N: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :])
    rows = nl.sum(x, axis=1, keep_dims=True)
    m, idx = nl.max(x, axis=0, return_indices=True)
    nl.store(o_ptr + rm[:, None] * N + rn[None, :], x / rows + nl.sum(x))
    nl.store(i_ptr + rn, idx + nl.argmin(x, 0) * 100)
    nl.store(c_ptr + rm[:, None] * N + rn[None, :], nl.cumsum(x, axis=1) + m[None, :])


def test_reductions():
    x = torch.rand(8, 16) + 0.5
    o, c = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    idx = torch.full((16,), -1, dtype=torch.int32)
    run_ir(reduce_kernel, (1,), x, o, idx, c, M=8, N=16)
    torch.testing.assert_close(o, x / x.sum(1, keepdim=True) + x.sum())
    assert torch.equal(idx, (x.argmax(0) + x.argmin(0) * 100).int())
    torch.testing.assert_close(c, x.cumsum(1) + x.max(0).values[None, :])


@newt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    rk = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        a = nl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K,
                    other=0.0)
        b = nl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :], mask=(k + rk)[:, None] < K,
                    other=0.0)
        acc += nl.dot(a, b)
    nl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_dot_loop():
    K = 40
    a, b = torch.randn(16, K).half(), torch.randn(K, 32).half()
    c = torch.full((16, 32), float("nan"))
    run_ir(dot_kernel, (1,), a, b, c, K, BM=16, BN=32, BK=16)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-3, rtol=1e-3)


@newt.jit
def atomic_kernel(cnt_ptr, x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.atomic_add(cnt_ptr + offs % 4, 1, mask=m)
    nl.atomic_max(x_ptr, nl.load(x_ptr + 1 + offs, mask=m, other=-1e9), mask=m)


def test_atomics():
    cnt = torch.zeros(4, dtype=torch.int32)
    x = torch.randn(1 + 50)
    x[0] = -100.0
    run_ir(atomic_kernel, (4,), cnt, x, 50, BLOCK=16)
    assert cnt.tolist() == [13, 13, 12, 12]
    assert x[0] == x[1:].max()


@newt.jit
def rand_kernel(r_ptr, n_ptr, i_ptr, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(r_ptr + offs, nl.rand(seed, offs), mask=m)
    nl.store(n_ptr + offs, nl.randn(seed, offs), mask=m)
    nl.store(i_ptr + offs, nl.randint(seed, offs).to(nl.int32, bitcast=True), mask=m)


def test_random_streams_match_interpreter():
    n = 100
    outs = [(torch.full((n,), float("nan")), torch.full((n,), float("nan")),
             torch.zeros(n, dtype=torch.int32)) for _ in range(2)]
    run_ir(rand_kernel, (2,), *outs[0], 1234, n, BLOCK=64)
    run_interp(rand_kernel, (2,), *outs[1], 1234, n, BLOCK=64)
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b)
    r = outs[0][0]
    assert 0 <= r.min() and r.max() < 1 and 0.3 < r.mean() < 0.7


# ----------------------------------------------------------------------------- larger kernels

@newt.jit
def _online_softmax_step(acc, m, den, q, k_ptrs, v_ptrs, lo, hi, stride, scale, rows, cols,
                         BN: nl.constexpr, CAUSAL: nl.constexpr):
    for start in range(lo, hi, BN):
        start = nl.multiple_of(start, BN)
        k = nl.load(k_ptrs + start * stride)
        s = nl.dot(q, nl.trans(k)) * scale
        if CAUSAL:
            s = nl.where(rows[:, None] >= start + cols[None, :], s, -float("inf"))
        m_new = nl.maximum(m, nl.max(s, 1))
        p = nl.exp(s - m_new[:, None])
        corr = nl.exp(m - m_new)
        den = den * corr + nl.sum(p, 1)
        acc = nl.dot(p.to(nl.float16), nl.load(v_ptrs + start * stride), acc * corr[:, None])
        m = m_new
    return acc, m, den


@newt.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, stride, scale, N: nl.constexpr,
                     BM: nl.constexpr, BN: nl.constexpr, D: nl.constexpr, CAUSAL: nl.constexpr):
    pid = nl.program_id(0)
    rows = pid * BM + nl.arange(0, BM)
    cols = nl.arange(0, BN)
    d = nl.arange(0, D)
    q = nl.load(q_ptr + rows[:, None] * stride + d[None, :])
    k_ptrs = k_ptr + cols[:, None] * stride + d[None, :]
    v_ptrs = v_ptr + cols[:, None] * stride + d[None, :]
    acc = nl.zeros((BM, D), nl.float32)
    m = nl.full((BM,), -float("inf"), nl.float32)
    den = nl.zeros((BM,), nl.float32)
    hi = (pid + 1) * BM if CAUSAL else N
    acc, m, den = _online_softmax_step(acc, m, den, q, k_ptrs, v_ptrs, 0, hi, stride, scale,
                                       rows, cols, BN, CAUSAL)
    nl.store(o_ptr + rows[:, None] * stride + d[None, :], (acc / den[:, None]).to(nl.float16))


@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal):
    n, d = 48, 16
    q, k, v = (torch.randn(n, d).half() for _ in range(3))
    out = torch.full((n, d), float("nan")).half()
    run_ir(attention_kernel, (n // 16,), q, k, v, out, d, 0.25, N=n, BM=16, BN=16, D=d,
           CAUSAL=causal)
    s = (q.float() @ k.float().T) * 0.25
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(out.float(), torch.softmax(s, 1) @ v.float(), atol=2e-3,
                               rtol=2e-3)


@newt.jit
def locked_accumulate_kernel(x_ptr, acc_ptr, lock_ptr, n, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    while nl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    seen = nl.load(lock_ptr + 1)
    if seen == 0:
        total = x
    else:
        total = x + nl.load(acc_ptr + offs, mask=mask)
    nl.store(acc_ptr + offs, total, mask=mask)
    nl.atomic_add(lock_ptr + 1, 1)
    nl.atomic_xchg(lock_ptr, 0)


def test_lock_and_while():
    x = torch.randn(5, 21)
    acc = torch.full((21,), float("nan"))
    lock = torch.zeros(2, dtype=torch.int32)
    run_ir(locked_accumulate_kernel, (5,), x, acc, lock, 21, BLOCK=32)
    torch.testing.assert_close(acc, x.sum(0))
    assert lock.tolist() == [0, 5]


# ----------------------------------------------------------------------------- as a pytest plugin

def _launch_via_ir(jitfn, grid, args, kwargs):
    """Stand-in for newt.interpreter.launch: build the IR, run it on the evaluator."""
    kwargs = {k: v for k, v in kwargs.items() if k not in ("num_warps", "num_stages")}
    bound = jitfn.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    meta = dict(bound.arguments)
    grid = grid(meta) if callable(grid) else grid
    grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
    sig, ce, bufs, scalars, bases = {}, {}, [], {}, []
    for n, v in bound.arguments.items():
        if n in jitfn.constexpr_names or v is None or not isinstance(
                v, (torch.Tensor, bool, int, float)):
            ce[n] = v.value if isinstance(v, nl.constexpr) else v
        elif isinstance(v, torch.Tensor):
            sig[n] = D.pointer_type(D.from_torch(v.dtype))
            bufs.append(v.as_strided((v.untyped_storage().nbytes() // v.element_size(),), (1,), 0))
            bases.append(v.storage_offset())
        else:
            sig[n] = D.int1 if isinstance(v, bool) else D.float32 if isinstance(v, float) else \
                D.int32 if -2**31 <= v < 2**31 else D.int64
            scalars[n] = int(v) if isinstance(v, bool) else v
    spec = {n: {"equal_to_1": True} for n, v in scalars.items()
            if v == 1 and sig[n].is_int() and not sig[n].is_bool()}
    fn = build_ir(jitfn, sig, ce, spec)
    ev = Eval(fn, bufs, scalars, grid)
    ptrs = [p for p in fn.params if p.dtype.is_ptr()]
    for p, base in zip(ptrs, bases):
        ev.env[p.value.id] = ev.env[p.value.id] + base
    ev.run()


def pytest_configure(config):
    import newt.interpreter
    newt.interpreter.launch = _launch_via_ir


@newt.jit
def temporaries_kernel(x_ptr, o_ptr, n, B: nl.constexpr):
    offs = nl.arange(0, B)
    t = nl.load(x_ptr + offs)
    total = t * 0
    for s in nl.static_range(2):
        total += t                      # second pass reads the loop's last t
        for i in range(n):
            t = nl.load(x_ptr + (i + 1) * B + offs)
            total += t
    nl.store(o_ptr + offs, total)


def test_temporaries_across_unrolled_iterations():
    n, b = 3, 16
    x = torch.randn((n + 1) * b)
    out = torch.full((b,), float("nan"))
    run_ir(temporaries_kernel, (1,), x, out, n, B=b)
    rows = x.reshape(n + 1, b)
    torch.testing.assert_close(out, rows[0] + 2 * rows[1:].sum(0) + rows[n])
