"""Why a warm launch reads slower inside run_all.py than in a fresh process: the launch rows'
timing (bench_launch.host_us_per_launch) repeated in one process after each of several
stages, each adding one kind of state a benchmark run leaves behind. newt's add, the bare
cuLaunchKernelEx under it, torch.add and an empty lambda are timed after every stage, with
what the process holds at that point (Python threads, objects tracked by the garbage
collector, CUDA modules newt has loaded, memory torch's allocator has reserved).

    PYTHONPATH=. python benchmarks/launch_drift.py [stage,...]

Stages (in this order, each on top of the ones before):
  fresh      nothing yet
  modules    200 more newt kernels loaded (one add, specialized on 200 constexpr values)
  reserved   16 GB allocated and freed through torch (the allocator keeps it reserved)
  objects    three million small Python objects kept alive (a larger heap for the collector)
  frozen     gc.freeze(): those objects moved out of the collector's generations
  memory     benchmarks/bench_memory.py run in full (run_all's first benchmark)
  matmul     benchmarks/bench_matmul.py --quick run (its sweep's modules and tensor maps)
  collected  gc.collect() and torch.cuda.empty_cache()
  freed      4 GB allocated and handed back to the driver (torch.cuda.empty_cache, as
             bench_memory.py does after each workload), then timed 8 times in a row
  freed-idle the same, then 3 s asleep before the timing
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import bench_launch  # noqa: E402
import common  # noqa: E402
import launch_floor  # noqa: E402
import newt  # noqa: E402
import newt.language as nl  # noqa: E402

STAGES = ["fresh", "modules", "reserved", "objects", "frozen", "memory", "matmul", "collected",
          "freed", "freed-idle"]
# each stage's timing: as is, after a busy loop, and after a busy loop pinned to one core
WAYS = ("as-is", "spun", "pinned")
cpus = os.sched_getaffinity(0)


@newt.jit
def add_c(x_ptr, out_ptr, n, C: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) + C, mask=m)


def _spin(seconds):
    """A busy host loop: lets a CPU clock that idled during GPU-bound work climb back."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _held(kernels) -> str:
    mods = sum(len(getattr(k, "cache", {})) for k in kernels)
    return (f"threads {threading.active_count()}, gc objects {len(gc.get_objects()):,}, "
            f"newt modules {mods}, reserved {torch.cuda.memory_reserved() / 2**30:.1f} GB")


def main(stages):
    add, x, y, out, g, L = launch_floor.prepared_add()
    go, (a0, a1, a2) = L.go, L.go_args
    calls = {"newt": lambda: add[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4),
             "ex": lambda: go(a0, a1, a2, None),
             "torch": lambda: torch.add(x, y, out=out),
             "empty": lambda: None}
    if common.have_triton():
        tadd = common.triton_twin(add)
        calls["triton"] = lambda: tadd[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4)
    keep = []
    rows = []
    for stage in stages:
        t0 = time.perf_counter()
        if stage == "modules":
            for c in range(200):
                add_c[(4,)](x, out, 4096, C=c, BLOCK=1024)
            torch.cuda.synchronize()
            assert torch.equal(out, x + 199)
        elif stage == "reserved":
            keep_gpu = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(16)]
            del keep_gpu
        elif stage == "objects":
            keep.append([(i, str(i)) for i in range(1_500_000)])
        elif stage == "frozen":
            gc.freeze()
        elif stage == "memory":
            import bench_memory
            bench_memory.run()
        elif stage == "matmul":
            import bench_matmul
            bench_matmul.run(quick=True)
        elif stage in ("freed", "freed-idle"):
            big = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(4)]
            del big
            torch.cuda.empty_cache()    # 4 GB handed back to the driver, as bench_memory does
            if stage == "freed-idle":
                time.sleep(3.0)
            else:
                for i in range(8):     # a time series: how long the host stays slower
                    t = time.perf_counter() - t0
                    best, _ = bench_launch.host_us_per_launch(calls)
                    print(f"  {t:4.1f} s after the free: " +
                          "  ".join(f"{p} {best[p]:5.2f}" for p in calls), flush=True)
        elif stage == "collected":
            gc.unfreeze()
            gc.collect()
            torch.cuda.empty_cache()
        spent = time.perf_counter() - t0
        for how in WAYS:
            if how == "spun":
                _spin(0.5)
            elif how == "pinned":
                os.sched_setaffinity(0, {sorted(cpus)[-1]})
                _spin(0.5)
            best, _ = bench_launch.host_us_per_launch(calls)
            if how == "pinned":
                os.sched_setaffinity(0, cpus)
            rows.append((f"{stage} {how}", best))
        print(f"{stage:10s} ({spent:5.1f} s) {_held([add, add_c])}", flush=True)
    print("\nus per launch, fastest of 7 batches of 2,000 (host_us_per_launch), after each stage:"
          "\n  as is; after 0.5 s of a busy host loop (spun); spun with the process pinned to one"
          " core (pinned)")
    print(f"{'stage':18s} " + " ".join(f"{p:>7s}" for p in calls))
    for name, best in rows:
        print(f"{name:18s} " + " ".join(f"{best[p]:7.2f}" for p in calls))


if __name__ == "__main__":
    main(sys.argv[1].split(",") if len(sys.argv) > 1 else STAGES)
