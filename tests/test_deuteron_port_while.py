"""`while` on a value computed in the kernel (one scalar per program), on the newt interpreter
and in the oracle: the loop runs a data-dependent number of times per program, carrying the
names its body updates; a `break` under an `if` on a kernel value leaves it; a test that is a
host value stays a Python loop (a kernel-value `break` out of one is refused at the user's
line); the generated code compiles for sm_90a. Fresh
random data, odd sizes, NaN-poisoned outputs."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl
from deuteron.errors import TraceError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def halve_rows(x, out, steps):
    for i in hl.grid(x.size(0)):
        row = x[i, :]
        count = hl.zeros([], dtype=torch.int32)
        while row.abs().amax() > 1.0:
            row = row * 0.5
            count = count + 1
        out[i, :] = row
        steps[i] = count
    return out, steps


def _halve_rows_torch(x):
    out, steps = x.clone(), torch.zeros(x.size(0), dtype=torch.int32)
    for i in range(x.size(0)):
        while out[i].abs().amax() > 1.0:
            out[i] *= 0.5
            steps[i] += 1
    return out, steps


def test_each_program_loops_as_often_as_its_data_says(device):
    x = torch.randn(9, 13) * torch.logspace(-1, 3, 9)[:, None]
    want_out, want_steps = _halve_rows_torch(x)
    assert len(set(want_steps.tolist())) > 2          # the rows really loop differently
    x, want_out, want_steps = x.to(device), want_out.to(device), want_steps.to(device)

    def fresh():
        return (torch.full_like(x, float("nan")),
                torch.full((9,), -1, dtype=torch.int32, device=device))

    for out, steps in (halve_rows(x, *fresh()), halve_rows.ref(x, *fresh())):
        torch.testing.assert_close(out, want_out, rtol=0, atol=0)
        torch.testing.assert_close(steps, want_steps, rtol=0, atol=0)


@dt.kernel
def newton_sqrt(a, out, rounds, tol: float):
    m, n = a.shape
    for i in hl.grid(m):
        y = a[i, :] * 0.5 + 0.5
        k = hl.zeros([], dtype=torch.int32)
        while k >= 0:
            big = hl.zeros([], dtype=torch.float32)      # an inner tile loop in the body
            for tn in hl.tile(n):
                big = torch.maximum(big, a[i, tn].amax())
            y = 0.5 * (y + a[i, :] / y)
            k = k + 1
            if ((y * y - a[i, :]).abs().amax() <= tol * big) | (k >= 60):
                k = -1 - k                       # done: the test fails next
        out[i, :] = y
        rounds[i] = -1 - k
    return out, rounds


def test_a_while_carries_several_names_through_ifs_and_inner_loops(device):
    a = (torch.rand(11, 37, device=device) + 0.5) * torch.logspace(-3, 8, 11,
                                                                   device=device)[:, None]
    a[3] = 1.0                                     # converges at once
    want = a.sqrt()

    def fresh():
        return (torch.full_like(a, float("nan")),
                torch.full((11,), -9, dtype=torch.int32, device=device))

    rows = []
    for out, rounds in (newton_sqrt(a, *fresh(), 1e-6), newton_sqrt.ref(a, *fresh(), 1e-6)):
        torch.testing.assert_close(out, want, rtol=1e-4, atol=0)
        assert (rounds > 0).all() and (rounds < 60).all()
        rows.append(rounds)
    # the GPU may round a division differently: a borderline row may take one more step
    torch.testing.assert_close(rows[0], rows[1], rtol=0, atol=0 if device == "cpu" else 1)
    assert len(set(rows[0].tolist())) > 2


@dt.kernel
def tile_wide_test(a, out):
    for tm in hl.tile(a.size(0)):
        y = a[tm]
        while y.amax() > 1.0:
            y = y * 0.5
        out[tm] = y
    return out


def test_a_test_over_the_launch_grid_tile_is_refused():
    with pytest.raises(TraceError, match="a dim of the launch grid"):
        tile_wide_test(torch.rand(100) * 8, torch.zeros(100))


@dt.kernel
def host_while(x, out):
    for tm in hl.tile(x.size(0)):
        v = x[tm]
        k = 0
        while k < 3:              # a host test: a Python loop, unrolled while tracing
            v = v * 2.0
            k += 1
        out[tm] = v
    return out


def test_a_host_test_stays_a_python_loop(device):
    x = torch.randn(17, device=device)
    torch.testing.assert_close(host_while(x, torch.full_like(x, float("nan"))), x * 8.0)
    torch.testing.assert_close(host_while.ref(x, torch.full_like(x, float("nan"))), x * 8.0)


@dt.kernel
def halve_until_below(x, out, limit: float):
    for i in hl.grid(x.size(0)):
        v = x[i]
        while v > 1.0:
            v = v * 0.5
            if v < limit:
                break
            v = v - 0.25
        out[i] = v
    return out


def _halve_until_below_torch(x, limit):
    out = []
    for v in x.tolist():
        while v > 1.0:
            v = v * 0.5
            if v < limit:
                break
            v = v - 0.25
        out.append(v)
    return torch.tensor(out)


@dt.kernel
def first_above(x, where, level: float):
    m, n = x.shape
    for i in hl.grid(m):
        j = hl.zeros([], dtype=torch.int32)
        found = hl.full([], -1, dtype=torch.int32)
        while j < n:
            if x[i, j] > level:
                found = j
                break
            j = j + 1
        where[i] = found
    return where


def test_break_under_an_if_on_a_kernel_value_leaves_the_while(device):
    x = torch.rand(15) * 200
    want = _halve_until_below_torch(x, 3.0)
    x, want = x.to(device), want.to(device)
    for fn in (halve_until_below, halve_until_below.ref):
        torch.testing.assert_close(fn(x, torch.full_like(x, float("nan")), 3.0), want)
    x = torch.randn(9, 23, device=device)
    x[4] = -5.0                                      # no element above the level: -1
    above = x > 1.5
    want = torch.where(above.any(1), above.int().argmax(1), -1).int()
    for fn in (first_above, first_above.ref):
        got = fn(x, torch.full((9,), -7, dtype=torch.int32, device=device), 1.5)
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@dt.kernel
def host_loop_kernel_break(x, out):
    for i in hl.grid(x.size(0)):
        v = x[i]
        k = 0
        while k < 4:
            v = v * 0.5
            if v < 1.0:
                break
            k += 1
        out[i] = v
    return out


def test_a_kernel_value_break_out_of_a_host_while_is_refused():
    with pytest.raises(TraceError, match="make the test a kernel value"):
        host_loop_kernel_break(torch.rand(5) * 10, torch.zeros(5))


def test_the_generated_kernels_compile_for_sm_90a():
    x = torch.randn(9, 13)
    for k, args in ((halve_rows, (x, torch.empty_like(x), torch.empty(9, dtype=torch.int32))),
                    (first_above, (x, torch.empty(9, dtype=torch.int32), 0.5)),
                    (newton_sqrt, (x.abs() + 1, torch.empty_like(x),
                                   torch.empty(9, dtype=torch.int32), 1e-4))):
        assert "while " in k.to_newt_source(*args)
        for ck in k.compile(*args, arch="sm_90a"):
            assert ck.cubin and ck.n_spills == 0, ck.log


@dt.kernel
def scale_by_sign(x, out, low: float, high: float):
    for i in hl.grid(x.size(0)):
        v = x[i]
        if v > 0:          # two numbers on the two sides: a scalar phi of float32
            s = high
        else:
            s = low
        out[i] = v * s
    return out


def test_an_if_on_a_kernel_value_may_assign_two_different_numbers(device):
    x = torch.randn(13, device=device)
    want = x * torch.where(x > 0, 3.0, -0.5)
    for fn in (scale_by_sign, scale_by_sign.ref):
        torch.testing.assert_close(fn(x, torch.full_like(x, float("nan")), -0.5, 3.0), want)
