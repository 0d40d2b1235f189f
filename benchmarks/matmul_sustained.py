"""The matmul rows under sustained load, with the GPU's power and clock: a second view next to
bench_matmul.py's do_bench medians.

bench_matmul.py times each config as Triton's do_bench does: 100 ms of launches, each after a
256 MB memset that empties the L2, the median reported. Between those memsets the GPU is
lighter loaded, so (likely; the clock is not sampled there) each kernel starts at a higher clock
before the power cap pulls it down; at 8192^3 the figures of both compilers move by 1-3% from
one machine (or one call) to the next. Here each provider instead runs back to back for a few seconds, as a training step's
matmuls do, while `nvidia-smi` samples power and SM clock every 50 ms; the table gives TFLOP/s
over the whole window (CUDA events), the mean power and clock, and the energy per PFLOP. One
config for both compilers (the sweep's usual winner), the benchmark's operands and launch.

    PYTHONPATH=. python benchmarks/matmul_sustained.py [--seconds 2.5] [--rounds 2]

Sizes are 4096^3 and 8192^3 only: at 2048^3 a kernel (28 us) is shorter than Triton's host
launch path plus the Python launch around it, so back-to-back launches would time Triton's host
instead of its kernel.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CFG = (128, 256, 64, 8, 4)
SIZES = (("float16", 4096), ("float16", 8192), ("bfloat16", 4096), ("bfloat16", 8192))


def summarize(smi_csv: str, skip: int = 6) -> tuple[float, float] | None:
    """(mean power W, mean SM clock MHz) of `nvidia-smi --query-gpu=power.draw,clocks.sm
    --format=csv,noheader,nounits -lms 50` output, without its first `skip` samples (taken
    while the launches were starting); None when no sample parses."""
    rows = []
    for line in smi_csv.strip().splitlines()[skip:]:
        try:
            w, mhz = (float(x) for x in line.split(","))
        except ValueError:
            continue
        rows.append((w, mhz))
    if not rows:
        return None
    return statistics.mean(r[0] for r in rows), statistics.mean(r[1] for r in rows)


def sustained(fn, seconds: float, torch):
    """(ms per call over `seconds` of back-to-back calls, nvidia-smi's samples meanwhile)."""
    fn()
    torch.cuda.synchronize()
    smi = None
    if shutil.which("nvidia-smi"):
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw,clocks.sm",
                                "--format=csv,noheader,nounits", "-lms", "50"],
                               stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, end = 0, time.time() + seconds
    e0.record()
    while time.time() < end:
        for _ in range(10):
            fn()
        calls += 10
        torch.cuda.synchronize()
    e1.record()
    torch.cuda.synchronize()
    out = ""
    if smi is not None:
        smi.terminate()
        out = smi.communicate()[0]
    return e0.elapsed_time(e1) / calls, out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    import torch

    import bench_matmul as bm
    import common
    ex = bm.example()
    kernels = {"newt": ex.matmul_kernel}
    if common.have_triton():
        kernels["triton"] = common.triton_twin(ex.matmul_kernel)
    print(f"== matmul_sustained {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
          f"{torch.cuda.get_device_name()}, config {CFG}, {args.seconds} s per row")
    print(f"{'dtype':9s} {'n':>5s} rnd {'provider':8s} {'TFLOP/s':>7s} {'W':>5s} {'MHz':>5s} "
          f"{'mJ/PFLOP':>8s}")
    for dname, n in SIZES:
        dt = getattr(torch, dname)
        for name, k in kernels.items():
            ok, why = bm.check(k, dt, CFG)
            if not ok:
                raise SystemExit(f"{name} {dname} {CFG}: wrong result ({why})")
        a, b, c = bm.operands(dt, n, n, n)
        calls = {p: (lambda k=k: bm.launch(k, a, b, c, CFG)) for p, k in kernels.items()}
        calls["cuBLAS"] = lambda: bm.reference(a, b)
        for r in range(args.rounds):
            for p, fn in calls.items():
                ms, smi = sustained(fn, args.seconds, torch)
                tf = 2 * n ** 3 / ms / 1e9
                s = summarize(smi)
                extra = (f"{s[0]:5.0f} {s[1]:5.0f} {s[0] / tf * 1e3:8.0f}" if s else
                         f"{'-':>5s} {'-':>5s} {'-':>8s}")
                print(f"{dname:9s} {n:5d} {r:3d} {p:8s} {tf:7.0f} {extra}", flush=True)


if __name__ == "__main__":
    main()
