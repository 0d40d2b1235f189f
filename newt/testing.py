"""Measuring and checking kernels: `do_bench`, `assert_close`, `perf_report` / `Benchmark`.

Sits beside the pipeline, not in it: examples, benchmarks and tests use it to time launched
kernels (CUDA events on the current stream) and to compare results against torch.

- `do_bench(fn)` follows the method of `triton.testing.do_bench`, so the two agree on the same
  kernel: estimate the runtime from 5 calls, derive warm-up and repeat counts from the
  millisecond budgets, time every repeat with its own pair of events, overwrite a 256 MB buffer
  before each repeat so no run starts with a warm L2, and summarize (the mean by default, as
  Triton; pass return_mode="median" for a figure robust to outliers).
- `do_bench_cudagraph(fn)` times `fn` replayed from a CUDA graph (no launch overhead).
- `assert_close(actual, expected)` picks tolerances from the dtypes and, on failure, reports how
  many elements differ, the worst one with its index and values, and NaN/inf disagreements.
- `perf_report(Benchmark(...))` runs a grid of x values across providers, prints a table and
  can save a PNG (matplotlib is imported only when a plot is asked for).
"""
from __future__ import annotations

import dataclasses
import math
import os
import statistics

import torch

_L2_FLUSH_BYTES = 256 * 1024 * 1024


def _require_cuda():
    if not torch.cuda.is_available():
        raise RuntimeError(
            "newt.testing.do_bench times kernels with CUDA events and needs a CUDA device; "
            "on the CPU interpreter (NEWT_INTERPRET=1) there is nothing meaningful to time")


def _l2_flush_buffer() -> torch.Tensor:
    # Larger than any L2 we target (H100/H200: 50 MB), so writing it evicts the kernel's data.
    # Not kept between calls: a first call inside torch.compile's CUDA-graph warm-up allocates
    # from the graph's private pool, and a buffer kept alive there is a leak that cudagraph
    # trees reject ("tensor(s) in the cudagraph pool not tracked as outputs"). torch's caching
    # allocator makes the next allocation of the same size cheap.
    return torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")


def _summarize(times: list[float], quantiles, return_mode: str):
    if quantiles is not None:
        q = torch.quantile(torch.tensor(times, dtype=torch.float64),
                           torch.tensor(quantiles, dtype=torch.float64)).tolist()
        return q[0] if len(q) == 1 else q
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.mean,
            "median": statistics.median}[return_mode](times)


def _check_mode(return_mode):
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be min, max, mean, median or all, got {return_mode!r}")


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Run time of `fn()` in milliseconds, measured on the GPU with CUDA events.

    warmup, rep: time budgets in ms for the warm-up calls and the timed calls.
    grad_to_none: tensors whose `.grad` is reset before each timed call (backward benchmarks).
    quantiles: if given, return these quantiles of the timings instead of `return_mode`.
    return_mode: "mean" (default, as Triton), "median", "min", "max" or "all" (the list).
    """
    _check_mode(return_mode)
    _require_cuda()
    fn()
    torch.cuda.synchronize()
    cache = _l2_flush_buffer()

    # Estimate one call's time (flush included in the window, as Triton does).
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = start.elapsed_time(end) / 5
    n_warmup = max(1, int(warmup / estimate_ms)) if estimate_ms > 0 else 1000
    n_repeat = max(1, int(rep / estimate_ms)) if estimate_ms > 0 else 1000

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        if grad_to_none is not None:
            for t in grad_to_none:
                t.grad = None
        cache.zero_()  # every timed call starts with a cold L2
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return _summarize(times, quantiles, return_mode)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Run time of `fn()` in milliseconds, replayed from a CUDA graph (Triton's method): the
    calls are captured once, so launch overhead is not timed. `rep` is the time budget in ms of
    each timed replay; the graph holds as many calls as fit in it (at least one), and the
    per-call time of 10 replays is summarized by `return_mode` ("mean" by default)."""
    _check_mode(return_mode)
    _require_cuda()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()                      # compile and warm up off the capture
        if grad_to_none is not None:
            for t in grad_to_none:
                t.grad = None
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        estimate_ms = start.elapsed_time(end) / 5
        n = max(1, int(rep / estimate_ms)) if estimate_ms > 0 else 1000
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                if grad_to_none is not None:
                    for t in grad_to_none:
                        t.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n)
    return _summarize(times, quantiles, return_mode)


# ----------------------------------------------------------------------------- assert_close

# (atol, rtol) per dtype; a comparison uses the looser entry of its two dtypes.
_TOLERANCES = {
    torch.float64: (1e-8, 1e-7),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-2),
    torch.bfloat16: (1e-2, 2e-2),
}
_EXACT = (0.0, 0.0)


def default_tolerances(*dtypes) -> tuple[float, float]:
    """(atol, rtol) for comparing values of these dtypes: the loosest of them; exact for ints."""
    atol, rtol = _EXACT
    for dt in dtypes:
        a, r = _TOLERANCES.get(dt, _EXACT)
        atol, rtol = max(atol, a), max(rtol, r)
    return atol, rtol


def _as_tensor(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach()
    try:
        import numpy as np
        if isinstance(x, np.ndarray):
            return torch.from_numpy(x)
    except ImportError:
        pass
    return torch.tensor(x)


def _fmt_index(flat: int, shape) -> str:
    if len(shape) == 0:
        return "()"
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return "(" + ", ".join(str(i) for i in reversed(idx)) + ("," if len(shape) == 1 else "") + ")"


def assert_close(actual, expected, atol=None, rtol=None, msg: str = ""):
    """Check |actual - expected| <= atol + rtol * |expected| elementwise; raise a readable
    AssertionError otherwise.

    Tolerances default by dtype (the looser of the two): fp64 1e-8/1e-7, fp32 1e-5/1e-5,
    fp16 1e-3/1e-2, bf16 1e-2/2e-2, integers and bool exact. A NaN passes only where the
    other side has NaN too; infinities must match exactly, sign included. Shapes must be equal
    (after treating Python numbers as 0-d tensors); devices may differ.
    """
    a, e = _as_tensor(actual), _as_tensor(expected)
    if a.shape != e.shape:
        raise AssertionError(f"{msg + ': ' if msg else ''}shape mismatch: actual "
                             f"{tuple(a.shape)} vs expected {tuple(e.shape)}")
    d_atol, d_rtol = default_tolerances(a.dtype, e.dtype)
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    a_c, e_c = a.cpu().reshape(-1), e.cpu().reshape(-1)
    if a.dtype.is_floating_point or e.dtype.is_floating_point:
        a64, e64 = a_c.to(torch.float64), e_c.to(torch.float64)
        a_nan, e_nan = torch.isnan(a64), torch.isnan(e64)
        diff = (a64 - e64).abs()  # NaN where either is NaN or inf - inf
        bound = atol + rtol * e64.abs()
        ok = diff <= bound
        # infinities: equal (sign included) or fail; the bound above would be inf and pass
        ok = torch.where(torch.isinf(a64) | torch.isinf(e64), a64 == e64, ok)
        ok = ok | (a_nan & e_nan)
    else:
        # integers and bool compare as int64 (float64 cannot hold every int64)
        a64, e64 = a_c.to(torch.int64), e_c.to(torch.int64)
        a_nan = e_nan = torch.zeros(a64.shape, dtype=torch.bool)
        diff = (a64.to(torch.float64) - e64.to(torch.float64)).abs()  # no int64 wrap-around
        bound = atol + rtol * e64.to(torch.float64).abs()
        ok = (a64 == e64) if atol == 0 and rtol == 0 else diff <= bound
    if bool(ok.all()):
        return
    bad = (~ok).nonzero().reshape(-1)
    n_bad, n = bad.numel(), ok.numel()
    # worst = largest excess over the allowed bound; NaN/inf disagreements rank first
    excess = torch.where(torch.isfinite(diff), diff - bound, torch.full_like(diff, math.inf))
    excess = torch.where(a_nan ^ e_nan, torch.full_like(excess, math.inf), excess)
    worst = int(bad[excess[bad].argmax()])
    lines = [f"{msg + ': ' if msg else ''}Tensor-likes are not close: {n_bad} of {n} elements "
             f"({100.0 * n_bad / n:.3g}%) exceed atol={atol:g} + rtol={rtol:g} * |expected| "
             f"(actual {a.dtype}, expected {e.dtype}, shape {tuple(a.shape)})"]

    def describe(i):
        av, ev = a64[i].item(), e64[i].item()
        d = diff[i].item()
        rel = d / abs(ev) if ev not in (0, 0.0) and math.isfinite(d) else math.inf
        return (f"index {_fmt_index(i, a.shape)}: actual={av!r} expected={ev!r} "
                f"abs diff={d:.6g} rel diff={rel:.6g}")

    lines.append("  worst at " + describe(worst))
    n_nan_a = int((a_nan & ~e_nan).sum())
    n_nan_e = int((e_nan & ~a_nan).sum())
    if n_nan_a or n_nan_e:
        lines.append(f"  NaN disagreements: {n_nan_a} NaN in actual where expected is not, "
                     f"{n_nan_e} NaN in expected where actual is not")
    shown = [int(i) for i in bad[:5] if int(i) != worst]
    for i in shown[:4]:
        lines.append("  also  " + describe(i))
    raise AssertionError("\n".join(lines))


# ----------------------------------------------------------------------------- perf_report

@dataclasses.dataclass
class Benchmark:
    """One benchmark grid (Triton's `triton.testing.Benchmark`): each x value in `x_vals` is
    passed as every name in `x_names`; each provider in `line_vals` as `line_arg`; `args` are
    fixed keyword arguments. The function returns a number, or (value, min, max)."""
    x_names: list
    x_vals: list
    line_arg: str
    line_vals: list
    line_names: list = None
    plot_name: str = "benchmark"
    args: dict = dataclasses.field(default_factory=dict)
    xlabel: str = ""
    ylabel: str = ""
    x_log: bool = False
    y_log: bool = False
    styles: list = None

    def __post_init__(self):
        if self.line_names is None:
            self.line_names = [str(v) for v in self.line_vals]
        if len(self.line_names) != len(self.line_vals):
            raise ValueError("line_names and line_vals must have the same length")


@dataclasses.dataclass
class Table:
    """Result of one Benchmark: `rows[i] = [x, value per provider...]` (NaN where it failed)."""
    name: str
    columns: list
    rows: list
    errors: dict = dataclasses.field(default_factory=dict)

    def format(self) -> str:
        cells = [[str(c) for c in self.columns]]
        for r in self.rows:
            cells.append([_fmt_num(v) for v in r])
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        out = [f"{self.name}:"]
        for j, row in enumerate(cells):
            out.append("  ".join(c.rjust(w) for c, w in zip(row, widths)))
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        for key, err in self.errors.items():
            out.append(f"  failed {key}: {err}")
        return "\n".join(out)


def _fmt_num(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


class Mark:
    """What `@perf_report(...)` returns: call `.run()` to execute the grid(s)."""

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _run_one(self, bench: Benchmark) -> tuple[Table, dict]:
        rows, errors, spread = [], {}, {}
        for x in bench.x_vals:
            xs = x if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            kwargs = dict(zip(bench.x_names, xs))
            row = [xs[0] if len(bench.x_names) == 1 else tuple(xs)]
            for val, name in zip(bench.line_vals, bench.line_names):
                try:
                    y = self.fn(**kwargs, **{bench.line_arg: val}, **bench.args)
                except Exception as exc:  # one failing provider must not hide the others
                    errors[f"{name} at {kwargs}"] = f"{type(exc).__name__}: {exc}"
                    y = math.nan
                lo = hi = y
                if isinstance(y, (list, tuple)):
                    y, lo, hi = y
                row.append(float(y))
                spread.setdefault(name, []).append((float(lo), float(hi)))
            rows.append(row)
        cols = [bench.x_names[0] if len(bench.x_names) == 1 else ",".join(bench.x_names)]
        cols += [f"{n} ({bench.ylabel})" if bench.ylabel else n for n in bench.line_names]
        return Table(bench.plot_name, cols, rows, errors), spread

    def run(self, print_data=False, show_plots=False, save_path=None, return_df=False):
        """Run every Benchmark. Prints tables when `print_data`; writes `<plot_name>.png` (and
        a .csv) under `save_path` when given. Returns the Table(s) when `return_df`."""
        tables = []
        benches = self.benchmarks if isinstance(self.benchmarks, list) else [self.benchmarks]
        for bench in benches:
            table, spread = self._run_one(bench)
            tables.append(table)
            if print_data:
                print(table.format())
            if save_path:
                os.makedirs(save_path, exist_ok=True)
                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                    f.write(",".join(table.columns) + "\n")
                    for r in table.rows:
                        f.write(",".join(str(v) for v in r) + "\n")
            if save_path or show_plots:
                _plot(bench, table, spread, save_path, show_plots)
        if return_df:
            return tables[0] if len(tables) == 1 else tables


def _plot(bench, table, spread, save_path, show):
    try:
        import matplotlib
        if not show:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"note: matplotlib is not installed; skipping the plot of {bench.plot_name}")
        return
    fig, ax = plt.subplots()
    xs = [r[0] for r in table.rows]
    for j, name in enumerate(bench.line_names):
        ys = [r[j + 1] for r in table.rows]
        style = bench.styles[j] if bench.styles else None
        kw = {"color": style[0], "linestyle": style[1]} if style else {}
        ax.plot(xs, ys, label=name, marker="o", **kw)
        lo = [s[0] for s in spread[name]]
        hi = [s[1] for s in spread[name]]
        if lo != ys or hi != ys:
            ax.fill_between(xs, lo, hi, alpha=0.2, **({"color": style[0]} if style else {}))
    ax.set_xlabel(bench.xlabel or table.columns[0])
    ax.set_ylabel(bench.ylabel)
    ax.set_title(bench.plot_name)
    if bench.x_log:
        ax.set_xscale("log")
    if bench.y_log:
        ax.set_yscale("log")
    ax.legend()
    ax.grid(True, alpha=0.3)
    if save_path:
        fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"), dpi=120,
                    bbox_inches="tight")
    if show:
        plt.show()
    plt.close(fig)


def perf_report(benchmarks):
    """Decorator: `@perf_report(Benchmark(...))` (or a list of them) turns a function of
    (x names..., line_arg, **args) into a Mark whose `.run(print_data=True, save_path=...)`
    executes the grid."""
    return lambda fn: Mark(fn, benchmarks)


# ---------------------------------------------------------------- the examples' shared driver
def example_device() -> str:
    """"cuda" when there is a GPU; otherwise switch newt to the CPU interpreter, say so, and
    return "cpu". The examples run either way, so the main example works on any machine."""
    from . import options
    if torch.cuda.is_available() and not options.flags.interpret:
        return "cuda"
    options.flags.interpret = True
    print("note: no CUDA device: running on the CPU interpreter (NEWT_INTERPRET=1), small sizes")
    return "cpu"


def run_example(argv, check, describe, timed=None) -> str:
    """What every example's main() does, in one place.

    check(device, small) -> shape   verifies against torch and returns the largest shape checked
    describe(shape) -> str          the line printed when it matches
    timed(shape) -> (bytes, [(name, fn), ...])   on a GPU at full size: GB/s of each fn
    `--small` keeps a GPU run to the correctness check (sanitizers, tests). Returns the device."""
    device = example_device()
    small = device == "cpu" or "--small" in argv
    shape = check(device, small)
    print(describe(shape))
    if device == "cuda" and not small and timed is not None:
        nbytes, impls = timed(shape)
        for name, fn in impls:
            ms = do_bench(fn, return_mode="median")
            print(f"  {name:6s} {nbytes / ms * 1e-6:8.0f} GB/s  ({ms * 1e3:.1f} us)")
    return device
