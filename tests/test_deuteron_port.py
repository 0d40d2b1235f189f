"""The port step from Helion: the names Helion's programs import besides the tile language
(deuteron.testing / deuteron._testing, cdiv, next_power_of_2, exc, runtime.settings, the
autotuner module's names, Helion's kernel settings), each used as a Helion program uses it, on
the newt interpreter. Numeric checks compare with torch on fresh random data, odd sizes."""
import math
import random

import pytest
import torch

import deuteron as helion
import deuteron.language as hl
from deuteron import testing
from deuteron._testing import DEVICE, HALF_DTYPE, LONG_INT_TYPE, code_and_output, run_example


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper],
               autotune_seed_configs=helion.Config(block_sizes=[16]),
               autotune_rebenchmark_threshold=1.001, autotune_budget_seconds=5)
def scaled_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = x[tm, :] * w[tm][:, None]
    return out


def test_helion_settings_are_accepted_and_unknown_ones_refused():
    x, w = torch.randn(37, 19), torch.randn(37)
    torch.testing.assert_close(scaled_rows(x, w), x * w[:, None])
    with pytest.raises(TypeError, match="autotune_not_a_setting"):
        helion.kernel(autotune_not_a_setting=1)


def test_host_helpers_match_their_definitions():
    rng = random.Random(7)
    for _ in range(200):
        a, b = rng.randint(0, 10_000), rng.randint(1, 300)
        assert helion.cdiv(a, b) == math.ceil(a / b)
        n = rng.randint(-3, 5000)
        p = helion.next_power_of_2(n)
        assert p >= max(n, 1) and p & (p - 1) == 0 and (p == 1 or p // 2 < n)
    assert helion.jit is helion.kernel


def test_module_paths_helion_programs_import():
    from deuteron.autotuner import LocalAutotuneCache, PowerOfTwoFragment, search_algorithms
    from deuteron.runtime import Config, Kernel, kernel
    from deuteron.runtime.settings import _get_backend
    assert _get_backend() != "pallas"        # the examples' default path
    assert Config is helion.Config and Kernel is helion.Kernel and kernel is helion.kernel
    assert issubclass(helion.exc.TensorOperationInWrapper, Warning)
    assert helion.exc.TraceError is helion.TraceError
    with pytest.raises(NotImplementedError, match="autotune_effort"):
        search_algorithms["PatternSearch"](None, ())
    assert LocalAutotuneCache("search").autotuner == "search"
    assert PowerOfTwoFragment(2, 64).default() == 2


def test_device_and_dtypes():
    assert DEVICE.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert (HALF_DTYPE, LONG_INT_TYPE) == (torch.float16, torch.int64)
    assert testing.run_example is run_example


def test_run_example_checks_kernels_against_the_first_baseline(capsys):
    x, w = torch.randn(29, 13), torch.randn(29)
    times = run_example({"dt": scaled_rows, "eager": lambda x, w: x * w[:, None]},
                        {"torch": lambda x, w: torch.mul(x, w[:, None]),
                         "other": lambda x, w: w[:, None] * x}, (x, w))
    out = capsys.readouterr()
    assert "Testing dt correctness" in out.err and "Testing other correctness" in out.err
    if DEVICE.type == "cpu":
        assert times == {} and "timing skipped" in out.out
    with pytest.raises(AssertionError, match="wrong: output 0 differs"):
        run_example(scaled_rows, lambda x, w: x * w[:, None] + 1.0, (x, w), kernel_name="wrong")


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _square_fwd(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _square_bwd(x, g)


@helion.kernel
def _square_fwd(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = x[t] * x[t]
    return out


@helion.kernel
def _square_bwd(x, g):
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = 2.0 * x[t] * g[t]
    return out


def test_run_example_checks_gradients():
    x = torch.randn(23, 7, requires_grad=True)
    run_example(_Square.apply, lambda x: x * x, (x,), bwd=True, rtol=1e-4, atol=1e-4)
    assert x.grad is None                            # the caller's tensors are left alone
    with pytest.raises(AssertionError, match="gradient 0 differs"):
        # same values, gradient 0 instead of 2x
        run_example(_Square.apply, lambda x: (x * x).detach() + 0.0 * x, (x,), bwd=True,
                    rtol=1e-4, atol=1e-4)
    with pytest.raises(AssertionError, match="no argument requires grad"):
        run_example(_Square.apply, lambda x: x * x, (x.detach(),), bwd=True)


def test_code_and_output():
    x, w = torch.randn(21, 6), torch.randn(21)
    code, out = code_and_output(scaled_rows, (x, w), block_sizes=[8])
    assert "@newt.jit" in code
    torch.testing.assert_close(out, x * w[:, None])
