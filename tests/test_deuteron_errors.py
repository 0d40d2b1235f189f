"""dt.TraceError points at the user's line (file:line, the line, a caret)."""
import inspect

import pytest
import torch

import deuteron as dt


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn.fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(text)


@dt.kernel
def branch_on_data(x, out):
    for t in dt.tile(x.shape[0]):
        v = x[t]
        if v > 0:
            out[t] = v


@dt.kernel
def unsupported_op(x, out):
    for t in dt.tile(x.shape[0]):
        out[t] = torch.cumprod(x[t], 0)


@dt.kernel
def mismatched(x, y, out):
    for tm in dt.tile(x.shape[0]):
        for tn in dt.tile(y.shape[0]):
            out[tm] = x[tm] + y[tn]


@dt.kernel
def bad_matmul(x, y, out):
    for tm, tn in dt.tile([x.shape[0], y.shape[1]]):
        for tk in dt.tile(x.shape[1]):
            out[tm, tn] = x[tm, tk] @ y[tm, tn]


@dt.kernel
def float_of_tile(x, out):
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] * float(x[t])


@dt.kernel
def tensor_method(x, out):
    for t in dt.tile(x.shape[0]):
        v = x[t] * 2.0
        out[t] = v.cumprod(0)


@dt.kernel
def odd_power(x, out):
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] ** 2.5


@dt.kernel
def partial_slice(x, out):
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] + x[1:9:2].sum()


@dt.kernel
def store_mismatch(x, out):
    for tm, tn in dt.tile([x.shape[0], x.shape[1]]):
        out[tm] = x[tm, tn]


@dt.kernel
def while_on_data(x, out):
    for t in dt.tile(x.shape[0]):
        v = x[t]
        while v > 1:
            v = v * 0.5
        out[t] = v


@dt.kernel
def softplus_in_loop(x, out):
    for t in dt.tile(x.shape[0]):
        out[t] = torch.nn.functional.softplus(x[t])


@dt.kernel
def sum_over_grid(x):
    out = torch.empty(x.shape[0])
    for tm in dt.tile(x.shape[0]):
        out[tm] = x[tm, :].sum() * 2.0
    return out


@dt.kernel
def dot_over_grid(x, y, out):
    for tm, tk in dt.tile([x.shape[0], x.shape[1]]):
        out[tm, :] = x[tm, tk] @ y[tk, :]


@dt.kernel
def loop_value_escapes(x):
    out = torch.empty(x.shape[0])
    for tm in dt.tile(x.shape[0]):
        for tk in dt.tile(x.shape[1]):
            v = x[tm, tk]
        out[tm] = v.sum(dim=1)
    return out


@pytest.mark.parametrize("kernel, args, line, words", [
    (loop_value_escapes, (torch.randn(9, 100),), "out[tm] = v.sum(dim=1)", "loop that has ended"),
    (sum_over_grid, (torch.randn(33, 20),), "x[tm, :].sum()", "a dim of the launch grid"),
    (dot_over_grid, (torch.randn(32, 32), torch.randn(32, 16), torch.empty(32, 16)),
     "x[tm, tk] @ y[tk, :]", "matmul contracting tk"),
    (tensor_method, (torch.randn(10), torch.empty(10)), "v.cumprod(0)", ".cumprod()"),
    (odd_power, (torch.randn(10), torch.empty(10)), "x[t] ** 2.5", "x ** 2.5"),
    (partial_slice, (torch.randn(10), torch.empty(10)), "x[1:9:2]", "step"),
    (store_mismatch, (torch.randn(6, 7), torch.empty(6)), "out[tm] = x[tm, tn]",
     "mismatched tile shapes in store"),
    (while_on_data, (torch.randn(10), torch.empty(10)), "while v > 1:", "control flow"),
    (softplus_in_loop, (torch.randn(10), torch.empty(10)), "softplus(x[t])", "unsupported torch op"),
    (branch_on_data, (torch.randn(10), torch.empty(10)), "if v > 0:", "control flow"),
    (unsupported_op, (torch.randn(10), torch.empty(10)), "torch.cumprod", "torch.cumprod"),
    (mismatched, (torch.randn(10), torch.randn(12), torch.empty(10)), "x[tm] + y[tn]",
     "mismatched tile shapes"),
    (bad_matmul, (torch.randn(8, 8), torch.randn(8, 8), torch.empty(8, 8)), "@ y[tm, tn]",
     "mismatched tile shapes in matmul"),
    (float_of_tile, (torch.randn(10), torch.empty(10)), "float(x[t])", "no data"),
])
def test_trace_error_points_at_user_line(kernel, args, line, words):
    with pytest.raises(dt.TraceError) as ei:
        kernel.to_newt_source(*args)
    e = ei.value
    assert e.loc.file == __file__
    assert e.loc.line == _line_of(kernel, line)
    text = str(e)
    assert f"{__file__}:{e.loc.line}:" in text and words in text
    assert line in text.splitlines()[1]             # the source line, then a caret
    assert text.splitlines()[2].strip() == "^"


def test_the_same_errors_on_launch():
    with pytest.raises(dt.TraceError, match="control flow"):
        branch_on_data(torch.randn(10), torch.empty(10))


def test_tile_outside_a_kernel_is_a_clear_error():
    with pytest.raises(RuntimeError, match="inside a @dt.kernel"):
        dt.tile(10)


@dt.kernel
def value_escapes(x, out):
    for t in dt.tile(x.shape[0]):
        v = x[t]
    out[0] = v.sum()


def test_tile_values_do_not_escape_the_loop():
    with pytest.raises(dt.TraceError, match="only inside"):
        value_escapes.to_newt_source(torch.randn(10), torch.empty(10))


@dt.kernel
def shifted(x, out):
    for t in dt.tile(x.shape[0] - 1):
        out[t] = x[t + 1]


def test_tile_arithmetic_is_a_trace_error():
    with pytest.raises(dt.TraceError, match="tile.index") as ei:
        shifted.to_newt_source(torch.randn(10), torch.empty(10))
    assert ei.value.loc.line == _line_of(shifted, "x[t + 1]")


def test_unsupported_method_is_also_an_attribute_error():
    @dt.kernel
    def k(x, out):
        for t in dt.tile(x.shape[0]):
            v = x[t]
            out[t] = v if not hasattr(v, "cumprod") else v.cumprod(0)
    x, out = torch.randn(12), torch.full((12,), float("nan"))
    k(x, out)
    torch.testing.assert_close(out, x)


def test_a_reduction_over_a_grid_dim_covered_by_one_tile_is_allowed():
    @dt.kernel
    def colsum(x):
        out = torch.empty(x.shape[1])
        for tm, tn in dt.tile([x.shape[0], x.shape[1]], block_size=[64, None]):
            out[tn] = x[tm, tn].sum(dim=0)
        return out
    x = torch.randn(40, 23)
    torch.testing.assert_close(colsum(x), x.sum(0), rtol=1e-5, atol=1e-5)
    with pytest.raises(dt.TraceError, match="launch grid"):
        colsum.to_newt_source(torch.randn(70, 23))      # 64 rows no longer cover the dim
