"""Fused attention forward rows of TARGETS.md: newt vs Triton (same kernel source, `nl` -> `tl`)
vs torch SDPA, fp16, B=4 H=32 N=4096, D=64 and D=128, causal and non-causal, in one process.

The kernel is examples/06_fused_attention.py (a helper @jit function plus the kernel); its
Triton twin is both functions' source with nothing but the module names swapped, launched by
the same `attention()` with the same grid, constexprs and num_warps. Every provider's output
is poisoned with NaN, computed once and compared with SDPA (atol 2e-2) before it is timed; a
provider that fails the check is reported, not timed. TFLOP/s counts 4*B*H*N*N*D (two
matmuls), halved for causal. A provider whose single call takes longer than SLOW_MS is timed
with a few calls instead of do_bench, and one over SKIP_MS is not timed at all (the row says
so), so the whole file stays within about a minute on an H200.

    python benchmarks/bench_attention.py [--quick]       # or through benchmarks/run_all.py
    python benchmarks/bench_attention.py --sweep         # launch configurations, newt and Triton
"""
from __future__ import annotations

import os
import functools
import sys
import time

import torch

import common
from newt.testing import do_bench

_median = functools.partial(do_bench, return_mode="median")   # the figures this table reports

NAN = float("nan")
SLOW_MS = 1500.0   # above: median of 3 calls instead of do_bench
SKIP_MS = 8000.0   # above: not timed

SIZES = {"full": dict(B=4, H=32, N=4096), "quick": dict(B=2, H=8, N=1024),
         "tiny": dict(B=1, H=2, N=40)}   # tiny: the interpreter (tests, a fake timer)


def example():
    return common.load_file(os.path.join(common.ROOT, "examples", "06_fused_attention.py"),
                            "newt_example_06_fused_attention")


def triton_kernel():
    """The Triton twin of the example's kernel: helper and kernel in one generated module."""
    ex = example()
    return common.triton_module("attn_fwd", ex.KERNELS, "benchmarks/bench_attention.py")._attn_fwd


def precompile(kernel, size, configs, dtype=torch.float16):
    """Compile the four newt specializations of the run in parallel worker processes (into
    the disk cache), so that the first launches load binaries instead of compiling in turn."""
    from newt.runtime import driver, precompile as pc, specialize
    ex = example()
    B, H, N = size["B"], size["H"], size["N"]
    jobs = []
    for D in (64, 128):
        t = torch.empty(B, H, N, D, device="cuda", dtype=dtype)  # the run's shapes and strides
        for causal in (False, True):
            cfg = configs[D] if configs else ex.config_for(D, causal)
            _, args, kw = ex.launch_args(t, t, t, t, causal, config=cfg)
            arguments, nw, ns = specialize.bind(kernel, args, kw)
            sig, cx, spec, dev = specialize.specialize(kernel, arguments)
            jobs.append((kernel, sig, cx, spec, driver.Device.get(dev).arch, nw, ns))
        del t
    t0 = time.perf_counter()
    bad = [r for r in pc.compile_in_workers(jobs) if r]
    print(f"precompiled {len(jobs)} newt attention kernels in {time.perf_counter() - t0:.1f}s"
          + (f" ({len(bad)} failed: {bad[0][:200]})" if bad else ""), flush=True)


def _time(fn, bench, sync):
    """(ms, note): do_bench for normal kernels, a few calls for very slow ones, or skip."""
    t0 = time.perf_counter()
    fn()
    sync()
    one = (time.perf_counter() - t0) * 1e3
    if one > SKIP_MS:
        return None, f"skipped: one call took {one:.0f} ms (> {SKIP_MS:.0f} ms budget)"
    if one > SLOW_MS:
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            sync()
            ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[1], f"slow: median of 3 calls ({sorted(ts)[1]:.0f} ms each)"
    return bench(fn), None


def run(out_dir=None, quick=False):
    """Rows for run_all.py (see its docstring for the row format)."""
    return measure(SIZES["quick" if quick else "full"])


def measure(size, dev="cuda", bench=_median, providers=None, sync=torch.cuda.synchronize,
            configs=None, dtype=torch.float16):
    """Check then time every workload for every provider; `providers` maps a name to a kernel
    (default: newt, and the Triton twin when triton imports)."""
    ex = example()
    errors = {}
    if providers is None:
        providers = {"newt": ex._attn_fwd}
        if common.have_triton():
            try:
                providers["triton"] = triton_kernel()
            except Exception as exc:
                errors["triton"] = f"twin kernel failed: {type(exc).__name__}: {exc}"
    B, H, N = size["B"], size["H"], size["N"]
    if dev == "cuda" and "newt" in providers:
        try:
            precompile(providers["newt"], size, configs, dtype)
        except Exception as exc:  # noqa: BLE001 - the launches compile in-process instead
            print(f"precompile failed ({type(exc).__name__}: {exc}); compiling in-process")
    rows = []
    for D in (64, 128):
        for causal in (False, True):
            name = f"attention fwd fp16 B={B} H={H} N={N} D={D}{' causal' if causal else ''}"
            row = dict(bench="attention", workload=name, unit="TFLOP/s", higher_is_better=True,
                       newt=None, triton=None, torch=None, errors=dict(errors),
                       target_ratio=1.0)
            flops = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
            q, k, v = (torch.randn(B, H, N, D, device=dev, dtype=dtype) for _ in range(3))
            sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                q, k, v, is_causal=causal)
            expected = (sdpa() if dev == "cuda" else ex.reference(q, k, v, causal)).float()
            out = torch.empty_like(q)
            cfg = configs[D] if configs else ex.config_for(D, causal)
            calls = {p: (lambda kern=kern: ex.attention(q, k, v, causal, config=cfg,
                                                         kernel=kern, out=out))
                     for p, kern in providers.items()}
            calls["torch"] = sdpa
            for p, fn in list(calls.items()):      # every result checked before any timing
                if p == "torch":
                    continue
                try:
                    out.fill_(NAN)
                    fn()
                    sync()
                    err = float((out.float() - expected).abs().max())
                    if not err <= 2e-2:  # NaN fails too
                        raise AssertionError(f"{p} {name}: max error {err:.3e} vs SDPA "
                                             f"(atol 2e-2)")
                except Exception as exc:  # report and go on
                    row["errors"][p] = f"{type(exc).__name__}: {str(exc)[:400]}"
                    del calls[p]
            ms, notes = common.timed_in_rounds(calls, lambda fn: _time(fn, bench, sync))
            for p, note in notes.items():
                row["errors"][p] = note
                print(f"{name}: {p}: {note}", flush=True)
            for p, t in ms.items():
                row[p] = flops / (t * 1e-3) / 1e12
            rows.append(row)
            del q, k, v, out, expected, calls, sdpa
            if dev == "cuda":
                torch.cuda.empty_cache()
    return rows


# launch configurations tried by --sweep: (config at D=64, config at D=128), each the same for
# newt and Triton, causal or not; the first two pairs hold the example's CONFIG and CAUSAL_CONFIG
SWEEP = [((128, 64, 8, 4), (128, 64, 8, 4)), ((128, 64, 8, 3), (128, 64, 8, 3)),
         ((128, 64, 8, 5), (128, 64, 8, 5)), ((128, 128, 8, 4), (128, 32, 8, 4)),
         ((128, 32, 8, 4), (64, 64, 4, 4)), ((128, 32, 8, 3), (64, 32, 4, 3))]


def sweep(size=None):
    """Every SWEEP configuration for newt and Triton (same config for both), checked then
    timed; prints one line per case and configuration and returns the rows."""
    keys = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")
    out = []
    for c64, c128 in SWEEP:
        cfgs = {64: dict(zip(keys, c64)), 128: dict(zip(keys, c128))}
        for r in measure(size or SIZES["full"], configs=cfgs):
            D = 128 if "D=128" in r["workload"] else 64
            r["config"] = "x".join(map(str, c128 if D == 128 else c64))
            vals = "  ".join(f"{p}={r[p]:.1f}" if r[p] else f"{p}=-"
                             for p in ("newt", "triton", "torch"))
            case = f"D={D}" + (" causal" if "causal" in r["workload"] else "")
            print(f"{case:12s} {r['config']:13s} {vals}",
                  *r["errors"].items(), flush=True)
            out.append(r)
    return out


if __name__ == "__main__":
    if "--sweep" in sys.argv:
        sweep()
        sys.exit()
    for r in run(quick="--quick" in sys.argv):
        vals = "  ".join(f"{p}={r[p]:.1f}" for p in ("newt", "triton", "torch") if r[p])
        print(f"{r['workload']:52s} {vals} {r['unit']}", *r["errors"].items())
