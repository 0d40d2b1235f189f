"""Layer norm backward rows: newt vs Triton (the same two kernels of examples/03_layernorm.py,
`nl` -> `tl`, launched by the same `layernorm_backward`) vs torch's native backward kernel, fp16.

Every provider's dx, dw and db are poisoned with NaN, computed once and compared with torch
autograd in fp32 before anything is timed; a provider that fails is reported, not timed. GB/s
counts x and dy read and dx written once, plus w, dw, db, mean and rstd (the partial rows and
locks are the method's own traffic, not counted).

    python benchmarks/bench_layernorm_bwd.py [--quick]     # or through benchmarks/run_all.py
"""
from __future__ import annotations

import functools
import sys

import torch

import common
from newt.testing import do_bench

_median = functools.partial(do_bench, return_mode="median")

NAN = float("nan")
SIZES = {"full": [(32768, 4096), (8192, 1500)], "quick": [(4096, 4096), (1024, 1500)],
         "tiny": [(5, 64), (9, 300)]}   # tiny: the interpreter (tests, a fake timer)


def example():
    return common.example("layernorm")


def triton_kernels():
    ex = example()
    mod = common.triton_module("layernorm_bwd", list(ex.BWD_KERNELS),
                               "benchmarks/bench_layernorm_bwd.py")
    return tuple(getattr(mod, k.fn.__name__) for k in ex.BWD_KERNELS)


def run(out_dir=None, quick=False):
    """Rows for run_all.py (see its docstring for the row format)."""
    return measure(SIZES["quick" if quick else "full"])


def measure(sizes, dev="cuda", bench=_median, providers=None, sync=torch.cuda.synchronize):
    """Check then time every size for every provider; `providers` maps a name to the pair of
    kernels (default: newt, and the Triton twins when triton imports)."""
    ex = example()
    errors = {}
    if providers is None:
        providers = {"newt": ex.BWD_KERNELS}
        if common.have_triton():
            try:
                providers["triton"] = triton_kernels()
            except Exception as exc:
                errors["triton"] = f"twin kernels failed: {type(exc).__name__}: {exc}"
    rows = []
    for m, n in sizes:
        row = dict(bench="layernorm_bwd", workload=f"layernorm bwd fp16 {m}x{n}", unit="GB/s",
                   higher_is_better=True, newt=None, triton=None, torch=None,
                   errors=dict(errors), target_ratio=1.0)
        x = (torch.randn(m, n, device=dev) * 2 + 0.5).half()
        w, b = torch.randn(n, device=dev).half(), torch.randn(n, device=dev).half()
        dy = torch.randn(m, n, device=dev).half()
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
        mean, rstd = mean.view(m), rstd.view(m)
        expected = ex.reference_backward(dy, x, w, b)
        outs = [torch.empty_like(t) for t in (x, w, w)]
        cfg = ex.backward_config(m, n)
        parts = [torch.empty(cfg["group"], n, device=dev) for _ in "wb"]
        calls = {p: (lambda k=k: ex.layernorm_backward(dy, x, w, mean, rstd, kernels=k,
                                                       config=cfg, dx=outs[0], dw=outs[1],
                                                       db=outs[2], partials=parts))
                 for p, k in providers.items()}
        mean2, rstd2 = mean.view(m, 1), rstd.view(m, 1)
        calls["torch"] = lambda: torch.ops.aten.native_layer_norm_backward(
            dy, x, [n], mean2, rstd2, w, b, [True, True, True])
        for p, fn in list(calls.items()):      # every result checked before any timing
            try:
                for t in outs:
                    t.fill_(NAN)
                got = fn()
                sync()
                ex.check_backward_result(got, expected, f"{p} {row['workload']}")
            except Exception as exc:  # report and go on
                row["errors"][p] = f"{type(exc).__name__}: {str(exc)[:400]}"
                del calls[p]
        ms, notes = common.timed_in_rounds(calls, lambda fn: (bench(fn), None))
        row["errors"].update(notes)
        nbytes = 3 * m * n * 2 + 3 * n * 2 + 8 * m
        for p, t in ms.items():
            row[p] = common.gbps(nbytes, t)
        rows.append(row)
        del x, dy, outs, parts, expected, calls
        if dev == "cuda":
            torch.cuda.empty_cache()
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        vals = "  ".join(f"{p}={r[p]:.0f}" for p in ("newt", "triton", "torch") if r[p])
        print(f"{r['workload']:36s} {vals} {r['unit']}", *r["errors"].items())
