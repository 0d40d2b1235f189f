"""Where a benchmark's CUDA-event time goes beyond the kernel itself, on the GPU: newt and
Triton on the same matmul config, timed as do_bench times them (L2 flush, start event, launch,
end event) while the profiler (CUPTI) records every kernel's start and end on the GPU.

    PYTHONPATH=. [SIZES=fp16:2048,bf16:2048] [CFGS=128x256x64x8x4] [REPS=200] [FLUSH_MB=2048] \
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


def measure(fn, reps: int, name_part: str):
    """(event us, kernel us, gap us) medians of `reps` flushed calls of fn."""
    from torch.profiler import ProfilerActivity, profile
    # a flush long enough that the host's launches stay ahead of the GPU under the profiler
    mb = int(os.environ.get("FLUSH_MB", "2048"))
    cache = torch.empty(mb * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for s, e in ev:
            cache.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
    events = [x for x in prof.events() if x.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda x: x.time_range.start)
    kern, gaps, prev_end = [], [], None
    for x in events:
        if name_part in x.name:
            kern.append(x.time_range.end - x.time_range.start)
            if prev_end is not None:
                gaps.append(x.time_range.start - prev_end)
        prev_end = x.time_range.end
    event_us = [s.elapsed_time(e) * 1e3 for s, e in ev]
    med = statistics.median
    return med(event_us), med(kern) if kern else float("nan"), med(gaps) if gaps else float("nan")


def main():
    reps = int(os.environ.get("REPS", "200"))
    ex = bench_matmul.example()
    kernels = {"newt": ex.matmul_kernel}
    if common.have_triton():
        kernels["triton"] = common.triton_twin(ex.matmul_kernel)
    cfgs = [tuple(int(v) for v in c.split("x")) for c in _parse("CFGS", "128x256x64x8x4")]
    rows = []
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
                for rnd in range(2):
                    e, kt, g = measure(fn, reps, "matmul_kernel")
                    rows.append((f"{d} {n}", "x".join(map(str, cfg)), name, rnd, e, kt, g))
                    print(rows[-1], flush=True)
    print(f"\n{'size':10} {'cfg':16} {'who':7} {'rnd':>3} {'event':>8} {'kernel':>8} "
          f"{'gap':>7} {'ev-kern':>8}")
    for s, cfg, who, rnd, e, kt, g in rows:
        print(f"{s:10} {cfg:16} {who:7} {rnd:3d} {e:8.2f} {kt:8.2f} {g:7.2f} {e - kt:8.2f}")


if __name__ == "__main__":
    main()
