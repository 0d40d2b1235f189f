"""newt.testing on CPU tensors: assert_close verdicts and reports, perf_report tables, and
do_bench's clear error without CUDA."""
import math

import pytest
import torch

from newt import testing
from newt.testing import Benchmark, assert_close, default_tolerances, perf_report


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_close_values_pass_by_dtype(dtype):
    x = torch.randn(37, 19, dtype=torch.float64)
    atol, rtol = default_tolerances(dtype)
    # a perturbation well inside the dtype's tolerance passes
    y = x + (0.4 * rtol) * x.abs()
    assert_close(y.to(dtype), x.to(dtype))
    assert_close(y.to(dtype), x)  # mixed dtypes use the looser tolerance


def test_fp32_rejects_fp16_sized_error():
    x = torch.randn(101, dtype=torch.float32)
    y = x * (1 + 1e-3)
    with pytest.raises(AssertionError):
        assert_close(y, x)
    assert_close(y.half(), x.half())  # fine at fp16 tolerance
    assert_close(y, x, rtol=2e-3)  # explicit tolerances win


def test_integers_exact():
    x = torch.randint(-1000, 1000, (53,), dtype=torch.int32)
    assert_close(x.clone(), x)
    y = x.clone()
    y[7] += 1
    with pytest.raises(AssertionError, match=r"1 of 53"):
        assert_close(y, x)
    big = torch.tensor([2**62 + 1], dtype=torch.int64)
    with pytest.raises(AssertionError):
        assert_close(big, big - 1)  # would pass if compared through float64


def test_bool_and_python_numbers():
    m = torch.rand(31) > 0.5
    assert_close(m.clone(), m)
    with pytest.raises(AssertionError):
        assert_close(~m, m)
    assert_close(3.0, 3.0)
    assert_close([1.0, 2.0], torch.tensor([1.0, 2.0]))


def test_nan_only_matches_nan():
    x = torch.randn(10)
    y = x.clone()
    x[3] = y[3] = math.nan
    assert_close(y, x)  # NaN where expected is NaN passes
    y[5] = math.nan
    with pytest.raises(AssertionError, match="NaN in actual"):
        assert_close(y, x)
    with pytest.raises(AssertionError, match="NaN in expected"):
        assert_close(x, torch.where(torch.arange(10) == 5, math.nan, x))
    # a poisoned output left untouched must never pass, even with huge tolerances
    with pytest.raises(AssertionError):
        assert_close(torch.full((4,), math.nan), torch.randn(4), atol=1e30, rtol=1e30)


def test_infinities_must_match():
    x = torch.tensor([1.0, math.inf, -math.inf])
    assert_close(x.clone(), x)
    with pytest.raises(AssertionError):
        assert_close(torch.tensor([1.0, math.inf, math.inf]), x)
    with pytest.raises(AssertionError):
        assert_close(torch.tensor([1.0, 1e30, -math.inf]), x, atol=1e31)


def test_report_names_worst_element():
    x = torch.randn(8, 16)
    y = x.clone()
    y[2, 5] += 0.5
    y[6, 11] += 3.0
    with pytest.raises(AssertionError) as info:
        assert_close(y, x, msg="softmax")
    text = str(info.value)
    assert text.startswith("softmax: ")
    assert "2 of 128 elements" in text
    assert "worst at index (6, 11)" in text
    assert f"expected={x[6, 11].item()!r}" in text
    assert "index (2, 5)" in text  # other mismatches listed too
    assert "atol=1e-05" in text


def test_shape_mismatch():
    with pytest.raises(AssertionError, match=r"shape mismatch: actual \(3,\) vs expected \(4,\)"):
        assert_close(torch.zeros(3), torch.zeros(4))


def test_perf_report_table(capsys):
    calls = []

    @perf_report(Benchmark(x_names=["n"], x_vals=[128, 4096], line_arg="provider",
                           line_vals=["fast", "slow", "broken"],
                           line_names=["Fast", "Slow", "Broken"],
                           plot_name="fake-bench", ylabel="GB/s", args={"scale": 2}))
    def bench(n, provider, scale):
        calls.append((n, provider, scale))
        if provider == "broken":
            raise RuntimeError("no such kernel")
        v = n * scale * (2.0 if provider == "fast" else 1.0)
        return v, v * 0.9, v * 1.1

    table = bench.run(print_data=True, return_df=True)
    out = capsys.readouterr().out
    assert len(calls) == 6 and all(c[2] == 2 for c in calls)
    assert table.columns == ["n", "Fast (GB/s)", "Slow (GB/s)", "Broken (GB/s)"]
    assert table.rows[0][:3] == [128, 512.0, 256.0] and math.isnan(table.rows[0][3])
    assert "fake-bench:" in out and "Fast (GB/s)" in out
    assert "16384" in out and "8192" in out and "n/a" in out
    assert "failed Broken at {'n': 4096}: RuntimeError: no such kernel" in out


def test_perf_report_saves_csv_and_plot_or_notes(tmp_path, capsys):
    @perf_report([Benchmark(x_names=["a", "b"], x_vals=[1, 2], line_arg="p",
                            line_vals=["x"], plot_name="two-names")])
    def bench(a, b, p):
        return float(a + b)

    bench.run(save_path=str(tmp_path))
    csv = (tmp_path / "two-names.csv").read_text().splitlines()
    assert csv[0] == "a,b,x" and csv[1].endswith(",2.0")
    try:
        import matplotlib  # noqa: F401
        assert (tmp_path / "two-names.png").exists()
    except ImportError:
        assert "matplotlib is not installed" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_do_bench_needs_cuda():
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        testing.do_bench(lambda: None)


def test_do_bench_rejects_bad_mode():
    with pytest.raises(ValueError, match="return_mode"):
        testing.do_bench(lambda: None, return_mode="avg")


def test_summarize_modes():
    times = [3.0, 1.0, 2.0, 10.0]
    assert testing._summarize(times, None, "median") == 2.5
    assert testing._summarize(times, None, "min") == 1.0
    assert testing._summarize(times, None, "all") == times
    assert testing._summarize(times, [0.5], "mean") == pytest.approx(2.5)
    assert testing._summarize(times, [0.0, 1.0], "mean") == pytest.approx([1.0, 10.0])


def test_do_bench_method_with_fake_events(monkeypatch):
    """Triton's method: 1 call, 5 estimate calls, warm-up and repeat counts from the ms budgets,
    one event pair and one L2 flush per timed call. The clock is faked: each call takes 0.5 ms
    (the flush takes none)."""
    clock = {"t": 0.0, "calls": 0, "flushes": 0}

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock["t"]

        def elapsed_time(self, end):
            return end.t - self.t

    class FakeFlush:
        def zero_(self):
            clock["flushes"] += 1

    def fn():
        clock["t"] += 0.5
        clock["calls"] += 1

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(testing, "_l2_flush_buffer", lambda: FakeFlush())
    assert testing.do_bench(fn) == 0.5
    # 1 + 5 (estimate) + 25/0.5 warm-up + 100/0.5 timed
    assert clock["calls"] == 1 + 5 + 50 + 200
    assert clock["flushes"] == 5 + 200
    times = testing.do_bench(fn, warmup=1, rep=2, return_mode="all")
    assert times == [0.5] * 4
