"""Where a benchmark's CUDA-event time goes beyond the kernel itself, on the GPU: newt and
Triton on the same matmul config, timed as do_bench times them (L2 flush, start event, launch,
end event) while the profiler (CUPTI) records every kernel's start and end on the GPU.

    PYTHONPATH=. [SIZES=fp16:2048,bf16:2048] [CFGS=128x256x64x8x4] [REPS=200] \
        [MODES=2048:1,256:0] [ROUNDS=2] \
        python benchmarks/event_gap.py

Per (provider, config), medians over REPS timed calls, us:
  event     end event minus start event (what do_bench reports)
  kernel    the matmul kernel's own duration on the GPU (what Nsight Compute reports)
  gap       from the end of the flush kernel to the start of the matmul kernel
  event-kernel  the part of `event` outside the kernel: the launch's latency on the GPU
The kernel durations of both compilers come from the same loop shape in one process, so a
difference in `event-kernel` is a difference in how the kernels are launched or started
(parameter size, shared memory configuration), not in their code.
"""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import bench_matmul  # noqa: E402
import common  # noqa: E402

DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _parse(env, default):
    return [x for x in os.environ.get(env, default).split(",") if x]


def measure(fn, reps: int, name_part: str, mb: int = 2048, profiled: bool = True):
    """(event us, kernel us, gap us) medians of `reps` calls of fn, each after an L2 flush of
    `mb` MB; kernel and gap (NaN) need the profiler."""
    import contextlib
    from torch.profiler import ProfilerActivity, profile
    cache = torch.empty(mb * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    ctx = profile(activities=[ProfilerActivity.CUDA]) if profiled else contextlib.nullcontext()
    with ctx as prof:
        for s, e in ev:
            cache.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
    event_us = [s.elapsed_time(e) * 1e3 for s, e in ev]
    med = statistics.median
    if not profiled:
        return med(event_us), float("nan"), float("nan")
    events = [x for x in prof.events() if x.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda x: x.time_range.start)
    kern, gaps, prev_end = [], [], None
    for x in events:
        if name_part in x.name:
            kern.append(x.time_range.end - x.time_range.start)
            if prev_end is not None:
                gaps.append(x.time_range.start - prev_end)
        prev_end = x.time_range.end
    return med(event_us), med(kern) if kern else float("nan"), med(gaps) if gaps else float("nan")


def main():
    reps = int(os.environ.get("REPS", "200"))
    ex = bench_matmul.example()
    kernels = {"newt": ex.matmul_kernel}
    if common.have_triton():
        kernels["triton"] = common.triton_twin(ex.matmul_kernel)
    cfgs = [tuple(int(v) for v in c.split("x")) for c in _parse("CFGS", "128x256x64x8x4")]
    # MODES: flush MB : profiled (1) or not (0). 2048:1 keeps the host's launches ahead of
    # the GPU under the profiler; 256:0 is do_bench's own flush, unprofiled; tdb is Triton's
    # do_bench itself (the benchmark's timing)
    modes = _parse("MODES", "2048:1")
    rows, fns = [], {}
    for size in _parse("SIZES", "fp16:2048,bf16:2048"):
        d, n = size.split(":")
        n = int(n)
        a, b, c = bench_matmul.operands(DT[d], n, n, n)
        for cfg in cfgs:
            for name, k in kernels.items():
                fn = (lambda k=k, cfg=cfg: bench_matmul.launch(k, a, b, c, cfg))
                fn()
                torch.cuda.synchronize()
                assert torch.isfinite(c).all()
                fns[(f"{d} {n}", "x".join(map(str, cfg)), name)] = fn
    # rounds over every (mode, call): no call is always the one measured first
    for rnd in range(int(os.environ.get("ROUNDS", "2"))):
        for mode in modes:
            for (size, cfg, name), fn in fns.items():
                if mode == "tdb":      # triton.testing.do_bench, as bench_matmul times it
                    e, kt, g = bench_matmul.bench(fn) * 1e3, float("nan"), float("nan")
                else:
                    mb, prof = (int(v) for v in mode.split(":"))
                    e, kt, g = measure(fn, reps, "matmul_kernel", mb, bool(prof))
                rows.append((size, cfg, name, mode, rnd, e, kt, g))
                print(rows[-1], flush=True)
    print(f"\n{'size':10} {'cfg':16} {'who':7} {'flush:prof':>10} {'rnd':>3} {'event':>8} "
          f"{'kernel':>8} {'gap':>7} {'ev-kern':>8}")
    for s, cfg, who, mode, rnd, e, kt, g in sorted(rows, key=lambda r: r[:5]):
        print(f"{s:10} {cfg:16} {who:7} {mode:>10} {rnd:3d} {e:8.2f} {kt:8.2f} {g:7.2f} "
              f"{e - kt:8.2f}")


if __name__ == "__main__":
    main()
