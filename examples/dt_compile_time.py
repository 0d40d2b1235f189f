"""dt_compile_time: the compile side of cold autotuning, measured without a GPU.

For examples/dt_softmax.py (fp32 32768x4096) and examples/dt_layernorm.py (fp16 32768x4096),
the TARGETS.md workloads: trace, generate, and compile with NVRTC (for sm_90a by default) every
candidate config the quick search asks about, in the tuner's forked compile workers, into an
empty newt disk cache. Nothing runs: each compiled candidate gets a made-up time (a fixed
function of the config), so the search walks as it would, and a candidate whose ptxas report
shows spills is dropped as the tuner drops it. What this leaves out is the GPU side of tuning
(the oracle run, checking and timing each candidate), which needs a GPU to measure.

    python examples/dt_compile_time.py [--arch sm_80] [--effort quick|full] [--matmul]

--matmul adds examples/dt_matmul.py at fp16 4096^3 (tens of seconds per compile on a small CPU).
"""
import argparse
import hashlib
import os
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def fake_ms(cfg) -> float:
    return 1.0 + int(hashlib.sha256(str(cfg).encode()).hexdigest()[:6], 16) / 2**24


def compile_side(kernel, args, arch, effort):
    """(seconds, configs compiled, failed, spilled) of the compile side of one cold tuning."""
    from deuteron.autotune import bench, search as dsearch
    from deuteron.autotune.space import Space
    t0 = time.perf_counter()
    tracer = kernel.trace(*args)
    space = Space(tracer)
    deadline = time.monotonic() + dsearch.SECONDS[effort]
    counts = {"failed": 0, "spills": 0}

    def evaluate(cfgs):
        out = {}
        for cfg, (status, info) in bench.precompile(kernel, tracer.programs, cfgs, arch,
                                                    deadline).items():
            if status == "skipped":
                continue
            if status == "failed":
                out[cfg] = dsearch.Result("failed", detail=info)
            elif bench.spills(info):
                out[cfg] = dsearch.Result("spills")
                space.note_spill(cfg)
            else:
                out[cfg] = dsearch.Result("ok", fake_ms(cfg))
        for r in out.values():
            if r.status in counts:
                counts[r.status] += 1
        return out

    _, results = dsearch.search(space, evaluate, effort, deadline=deadline)
    return time.perf_counter() - t0, len(results), counts["failed"], counts["spills"]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--effort", default="quick", choices=["quick", "full"])
    ap.add_argument("--matmul", action="store_true")
    opts = ap.parse_args(argv)
    os.environ["NEWT_CACHE_DIR"] = tempfile.mkdtemp(prefix="newt-cold-")   # cold compiles
    t_imp = time.perf_counter()
    import torch
    import dt_layernorm
    import dt_softmax
    from deuteron.autotune import workers
    t_comp = time.perf_counter()
    workers.warm_compiler()          # what the first tuning in a process imports once
    print(f"imports {t_comp - t_imp:.1f} s, newt's compiler {time.perf_counter() - t_comp:.1f} s; "
          f"{os.cpu_count()} CPUs; compiling for {opts.arch}")
    h = torch.float16
    cases = [("softmax fp32 32768x4096", dt_softmax.softmax, (torch.empty(32768, 4096),)),
             ("layernorm fp16 32768x4096", dt_layernorm.layernorm,
              (torch.empty(32768, 4096, dtype=h), torch.empty(4096, dtype=h),
               torch.empty(4096, dtype=h)))]
    if opts.matmul:
        import dt_matmul
        a = torch.empty(4096, 4096, dtype=h)
        cases.append(("matmul fp16 4096^3", dt_matmul.matmul, (a, a.clone(), a.clone())))
    for what, kernel, args in cases:
        secs, n, failed, spilled = compile_side(kernel, args, opts.arch, opts.effort)
        print(f"{what}: {n} candidate configs compiled ({failed} failed, {spilled} spill) "
              f"in {secs:.1f} s")


if __name__ == "__main__":
    main()
