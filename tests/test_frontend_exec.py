"""The frontend's IR, executed: a small reference evaluator of the opcode table (newt/ir/ops.py)
on CPU torch tensors runs kernels built by build_ir, and the results are compared with torch
(and with the interpreter, the language's executable spec). This checks the frontend's lowering
(promotion, broadcasting, control flow, reductions, random streams) without a GPU.

The evaluator is tests/ir_eval.py.

Also a pytest plugin: `python -m pytest -p tests.test_frontend_exec tests/test_ops_*.py -k interp`
runs the whole op suite's "interp" kernels through build_ir + this evaluator instead of the
interpreter (every kernel the suite has, checked against torch, with no GPU).
"""
import os
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt import dtypes as D
from newt.frontend import build_ir

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (also when loaded with -p)
from ir_eval import Eval, run_interp, run_ir  # noqa: E402


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
