"""Op suite, control flow: for over range / nl.range / nl.static_range with runtime and constexpr
bounds, while, if/else on runtime scalars, constexpr branches pruned (even around None
arguments), early return, calls to other @newt.jit functions (also passed as constexprs), and
Python `assert` kept as a device assert. Runs on targets interp and cuda."""
import subprocess
import sys
import textwrap

import pytest
import torch

import newt
import newt.language as nl
from lang_helpers import where  # noqa: F401  (fixture)
from ops_helpers import check, poison, rand


@newt.jit
def row_sum_kernel(x_ptr, out_ptr, N, stride, LOOP: nl.constexpr, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    acc = nl.zeros((BLOCK,), dtype=nl.float32)
    if LOOP == "range":
        for start in range(0, N, BLOCK):             # runtime bounds, step
            offs = start + nl.arange(0, BLOCK)
            acc += nl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)
    elif LOOP == "nl_range":
        for i in nl.range(nl.cdiv(N, BLOCK), num_stages=2):
            offs = i * BLOCK + nl.arange(0, BLOCK)
            acc += nl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)
    else:
        nl.static_assert(LOOP == "while")
        start = 0
        while start < N:
            offs = start + nl.arange(0, BLOCK)
            acc += nl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)
            start += BLOCK
    nl.store(out_ptr + row, nl.sum(acc, axis=0))


@pytest.mark.parametrize("N", [0, 1, 100, 1000])
@pytest.mark.parametrize("loop", ["range", "nl_range", "while"])
def test_loops(target, device, loop, N):
    M = 3
    x = rand((M, max(N, 1)), torch.float32, device)
    out = poison(M, torch.float32, device)
    row_sum_kernel[(M,)](x, out, N, x.stride(0), LOOP=loop, BLOCK=64)
    check(out, x.cpu()[:, :N].sum(1), rtol=1e-5, atol=1e-4)


@newt.jit
def static_loop_kernel(x_ptr, out_ptr, UNROLL: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    acc = nl.zeros((BLOCK,), dtype=nl.float32)
    for i in nl.static_range(UNROLL):
        acc += nl.load(x_ptr + i * BLOCK + offs) * (i + 1)
    for i in range(1, 4, 2):                         # constexpr bounds: i is a scalar
        acc += i
    nl.store(out_ptr + offs, acc)


def test_static_range(target, device):
    x = rand(4 * 32, torch.float32, device)
    out = poison(32, torch.float32, device)
    static_loop_kernel[(1,)](x, out, UNROLL=4, BLOCK=32)
    ref = sum(x.cpu()[i * 32:(i + 1) * 32] * (i + 1) for i in range(4)) + 4
    check(out, ref)


@newt.jit
def branch_kernel(x_ptr, out_ptr, n, limit, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    if pid >= limit:                                 # early return
        return
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    if pid % 2 == 0:
        y = x * 2
    elif pid % 3 == 0:
        y = x - 1
    else:
        y = -x
    s = nl.sum(x, axis=0)
    if s > 0:                                        # a runtime scalar condition from data
        y = y + 1000
    nl.store(out_ptr + offs, y, mask=mask)


def test_if_else_and_early_return(target, device):
    n, B, limit = 1000, 64, 11
    x = rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    branch_kernel[(newt.cdiv(n, B),)](x, out, n, limit, BLOCK=B)
    xs, ref = x.cpu(), poison(n, torch.float32, "cpu")
    for pid in range(limit):
        c = xs[pid * B:(pid + 1) * B]
        y = c * 2 if pid % 2 == 0 else c - 1 if pid % 3 == 0 else -c
        ref[pid * B:(pid + 1) * B] = y + (1000 if c.sum() > 0 else 0)
    check(out, ref, equal_nan=True)


@newt.jit
def bias_kernel(x_ptr, b_ptr, out_ptr, n, HAS_BIAS: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    if HAS_BIAS:                                     # pruned: b_ptr may be None
        x += nl.load(b_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x, mask=mask)


@pytest.mark.parametrize("has_bias", [False, True])
def test_constexpr_branch_with_none(target, device, has_bias):
    n = 300
    x, b = rand(n, torch.float32, device), rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    bias_kernel[(newt.cdiv(n, 128),)](x, b if has_bias else None, out, n, HAS_BIAS=has_bias,
                                      BLOCK=128)
    check(out, x.cpu() + (b.cpu() if has_bias else 0))


@newt.jit
def leaky(x, SLOPE: nl.constexpr = 0.1):
    return nl.where(x > 0, x, x * SLOPE)


@newt.jit
def stats(x):
    return nl.sum(x, axis=0), nl.max(x, axis=0)


@newt.jit
def twice_leaky(x):
    return leaky(x) * 2


@newt.jit
def calls_kernel(x_ptr, out_ptr, n, ACT: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    s, m = stats(x)                                  # a helper returning a tuple
    y = twice_leaky(x) + leaky(x, SLOPE=0.5) + ACT(x)  # nested calls, keyword constexpr, fn arg
    nl.store(out_ptr + offs, y + s * 0 + m * 0, mask=mask)


@newt.jit
def square(x):
    return x * x


def test_jit_calls(target, device):
    n = 100
    x = rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    calls_kernel[(1,)](x, out, n, ACT=square, BLOCK=128)
    xs = x.cpu()
    ref = torch.where(xs > 0, xs, xs * 0.1) * 2 + torch.where(xs > 0, xs, xs * 0.5) + xs * xs
    check(out, ref)


@newt.jit
def assert_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0)
    assert n > 0, "n must be positive"
    nl.device_assert(x >= 0, "negative input")


def test_assert_passes(target, device):
    x = rand(100, torch.int32, device, 0, 10)
    assert_kernel[(1,)](x, 100, BLOCK=128)


@pytest.mark.parametrize("bad", ["scalar", "block"])
def test_assert_is_not_dropped(target, device, bad, tmp_path):
    n = 0 if bad == "scalar" else 100
    if target == "interp":
        x = rand(100, torch.int32, "cpu", 0, 10)
        x[50] = -1
        with pytest.raises(AssertionError, match="must be positive" if n == 0 else "negative"):
            assert_kernel[(1,)](x, n, BLOCK=128)
        return
    # a failing device assert poisons the CUDA context: run it in a child process
    script = tmp_path / "assert_child.py"
    script.write_text(textwrap.dedent(f"""
        import torch, newt, newt.language as nl

        @newt.jit
        def k(x_ptr, n, BLOCK: nl.constexpr):
            offs = nl.arange(0, BLOCK)
            x = nl.load(x_ptr + offs, mask=offs < n, other=0)
            assert n > 0, "n must be positive"
            nl.device_assert(x >= 0, "negative input")

        x = torch.zeros(128, dtype=torch.int32, device="cuda")
        x[50] = -1
        k[(1,)](x, {n}, BLOCK=128)
        torch.cuda.synchronize()
        print("NO ERROR")
    """))
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert "NO ERROR" not in r.stdout and r.returncode != 0, r.stdout + r.stderr


@newt.jit
def defaults_kernel(x_ptr, out_ptr, n, scale=2.0, SHIFT: nl.constexpr = 3, BLOCK: nl.constexpr = 128):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) * scale + SHIFT, mask=mask)


def test_defaults_and_positional_constexprs(target, device):
    n = 300
    x = rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    defaults_kernel[(newt.cdiv(n, 128),)](x, out, n)                      # all defaults
    check(out, x.cpu() * 2 + 3)
    out = poison(n, torch.float32, device)
    defaults_kernel[(newt.cdiv(n, 64),)](x, out, n, 0.5, 1, 64)           # constexprs by position
    check(out, x.cpu() * 0.5 + 1)


@newt.jit
def halve_until_small(x_ptr, out_ptr, steps_ptr, n, BLOCK: nl.constexpr):
    # `go` is written before it is read in the body and read only by the loop's test: it must
    # still be carried, or the compiled loop tests its first value forever.
    row = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    count = 0
    go = nl.max(nl.abs(x), axis=0) > 1.0
    while go:
        x = x * 0.5
        count += 1
        go = nl.max(nl.abs(x), axis=0) > 1.0
    nl.store(out_ptr + row * n + offs, x, mask=offs < n)
    nl.store(steps_ptr + row, count)


def test_while_condition_written_last_in_the_body(where):
    n, rows = 13, 7
    x = torch.randn(rows, n) * torch.logspace(-1, 3, rows)[:, None]
    want, want_steps = x.clone(), torch.zeros(rows, dtype=torch.int32)
    for r in range(rows):
        while want[r].abs().amax() > 1.0:
            want[r] *= 0.5
            want_steps[r] += 1
    assert len(set(want_steps.tolist())) > 2
    x = where.t(x)
    out = where.t(torch.full((rows, n), float("nan")))
    steps = where.t(torch.full((rows,), -1, dtype=torch.int32))
    where(halve_until_small, (rows,), x, out, steps, n, BLOCK=16)
    torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)
    torch.testing.assert_close(steps.cpu(), want_steps, rtol=0, atol=0)
