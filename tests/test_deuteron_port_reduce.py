"""hl.reduce with user combine functions on the newt interpreter and in the oracle: one operand
(a product, padded lanes set to `other` = 1), a tuple of two (value and position of the largest
element, in both combine forms Helion accepts), inside an inner loop (each iteration reduces its
own tile, folded into a carried value), keep_dims and dim=None over a whole slice; the generated
code compiles for sm_90a. Fresh random data, odd sizes, NaN-poisoned outputs, several configs."""

import pytest
import torch

import deuteron as dt
import deuteron.language as hl
from deuteron.errors import TraceError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def times(a, b):
    return a * b


def larger_first(v_left, i_left, v_right, i_right):
    """(value, position) of the larger value; on a tie the smaller position: commutative."""
    take_left = (v_left > v_right) | ((v_left == v_right) & (i_left < i_right))
    return torch.where(take_left, v_left, v_right), torch.where(take_left, i_left, i_right)


def larger_first_tuples(left, right):
    return larger_first(*left, *right)


@dt.kernel
def row_product(x, out):
    for tm in hl.tile(x.size(0)):
        out[tm] = hl.reduce(times, x[tm, :], dim=1, other=1.0)
    return out


@pytest.mark.parametrize("rows,cols", [(7, 13), (5, 32)])
def test_a_product_sets_padded_lanes_to_other(rows, cols, device):
    x = torch.rand(rows, cols, device=device) + 0.5
    want = x.prod(1)
    for cfg in (None, dt.Config(block_sizes=[2]), dt.Config(block_sizes=[8])):
        out = torch.full((rows,), float("nan"), device=device)
        got = row_product(x, out) if cfg is None else row_product.run((x, out), {}, cfg)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(row_product.ref(x, torch.full((rows,), float("nan"),
                                                        device=device)), want,
                               rtol=1e-5, atol=1e-6)


@dt.kernel
def row_argmax(x, values, where, tuple_form: bool):
    n = x.size(1)
    for tm in hl.tile(x.size(0)):
        pos = hl.arange(n)[None, :]          # broadcast against the [tm, n] values
        fn = larger_first_tuples if tuple_form else larger_first
        v, i = hl.reduce(fn, (x[tm, :], pos), dim=1, other=(float("-inf"), n))
        values[tm] = v
        where[tm] = i
    return values, where


@pytest.mark.parametrize("tuple_form", [False, True])
def test_a_two_operand_reduce_finds_the_largest_and_its_position(tuple_form, device):
    x = torch.randn(9, 21, device=device)
    want_v, want_i = x.max(1)

    def fresh():
        return (torch.full((9,), float("nan"), device=device),
                torch.full((9,), -7, dtype=torch.int32, device=device))

    for got in (row_argmax(x, *fresh(), tuple_form),
                row_argmax.run((x, *fresh(), tuple_form), {}, dt.Config(block_sizes=[4])),
                row_argmax.ref(x, *fresh(), tuple_form)):
        torch.testing.assert_close(got[0], want_v, rtol=0, atol=0)
        torch.testing.assert_close(got[1].long(), want_i, rtol=0, atol=0)


def bigger(a, b):
    return torch.maximum(a, b)


@dt.kernel
def row_max_by_loop(x, out):
    m, n = x.shape
    for tm in hl.tile(m):
        best = hl.full([tm], float("-inf"), dtype=torch.float32)
        for tn in hl.tile(n):
            best = torch.maximum(best, hl.reduce(bigger, x[tm, tn], dim=1,
                                                 other=float("-inf")))
        out[tm] = best
    return out


def test_a_reduce_over_an_inner_loop_tile_folds_into_a_carried_value(device):
    x = torch.randn(11, 37, device=device) - 3.0   # mostly negative: a 0 in a padded lane shows
    want = x.amax(1)

    def fresh():
        return torch.full((11,), float("nan"), device=device)

    for cfg in (None, dt.Config(block_sizes=[4, 8]), dt.Config(block_sizes=[16, 16])):
        got = row_max_by_loop(x, fresh()) if cfg is None else row_max_by_loop.run(
            (x, fresh()), {}, cfg)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(row_max_by_loop.ref(x, fresh()), want)


def plus(a, b):
    return a + b


@dt.kernel
def centered(x, out):
    for tm in hl.tile(x.size(0)):
        row = x[tm, :]
        total = hl.reduce(plus, row, dim=-1, keep_dims=True)
        out[tm, :] = row - total / x.size(1)
    return out


def test_keep_dims_broadcasts_back(device):
    x = torch.randn(6, 19, device=device)
    want = x - x.mean(1, keepdim=True)
    torch.testing.assert_close(centered(x, torch.full_like(x, float("nan"))), want,
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(centered.ref(x, torch.full_like(x, float("nan"))), want,
                               rtol=1e-5, atol=1e-5)


@dt.kernel
def block_sums(x, out):
    for tb in hl.tile(x.size(0), block_size=1):
        out[tb] = hl.reduce(plus, x[tb, :, :])      # dim=None: every dim of the [r, c] slice
    return out


def test_dim_none_reduces_every_dim(device):
    x = torch.randn(3, 5, 7, device=device)
    want = x.sum((1, 2))
    for fn in (block_sums, block_sums.ref):
        torch.testing.assert_close(fn(x, torch.full((3,), float("nan"), device=device)), want,
                                   rtol=1e-5, atol=1e-5)


@dt.kernel
def over_the_grid(x, out):
    for tm in hl.tile(x.size(0)):
        out[0] = hl.reduce(plus, x[tm], dim=0)
    return out


def test_a_reduce_over_the_launch_grid_tile_is_refused():
    with pytest.raises(TraceError, match="hl.reduce over"):
        over_the_grid(torch.randn(100), torch.zeros(1))


def test_the_generated_kernels_compile_for_sm_90a():
    x = torch.randn(9, 21)
    for k, args in ((row_product, (x, torch.empty(9))),
                    (row_argmax, (x, torch.empty(9), torch.empty(9, dtype=torch.int32), True)),
                    (row_max_by_loop, (x, torch.empty(9)))):
        for ck in k.compile(*args, arch="sm_90a"):
            assert ck.cubin and ck.n_spills == 0, ck.log
        assert "nl.reduce(" in k.to_newt_source(*args)


def affine_tuples(left, right):
    """h -> a*h + b composed, the left map first; operands as two tuples."""
    (a_l, b_l), (a_r, b_r) = left, right
    return a_l * a_r, b_l * a_r + b_r


@dt.kernel
def recurrence_tuples(a, b, out):
    for tm in hl.tile(a.size(0)):
        _, h = hl.associative_scan(affine_tuples, (a[tm, :], b[tm, :]), dim=1)
        out[tm, :] = h
    return out


def test_a_scan_takes_a_combine_function_of_two_tuples_too(device):
    a = torch.rand(5, 23, device=device) * 0.5 + 0.5
    b = torch.randn(5, 23, device=device)
    want, h = torch.empty_like(a), torch.zeros(5, device=device)
    for i in range(23):
        h = a[:, i] * h + b[:, i]
        want[:, i] = h
    for got in (recurrence_tuples(a, b, torch.full_like(a, float("nan"))),
                recurrence_tuples.ref(a, b, torch.full_like(a, float("nan")))):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
