"""Is a row a tie? The rows whose newt/Triton ratio lands on either side of 1.00x from run to
run (the vector add at the HBM ceiling, the 2048^3 matmuls), timed in many interleaved rounds
in one process, so the spread of the ratio itself is measured rather than guessed.

    PYTHONPATH=. [ROUNDS=15] [ROWS=add,fp16:2048,bf16:2048] [CFGS=128x256x64x8x4,128x256x64x8x3] \
        python benchmarks/tie_rounds.py

Each round times every provider once (triton.testing.do_bench's median, L2 flushed before each
call, the providers' order rotated from round to round). Per row it prints:
  median    the median over rounds of each provider's time, as GB/s or TFLOP/s
  ratio     newt/Triton per round: the median, the lowest and highest, and how many rounds
            newt led (> 1.000)
  kernel    the kernels' own durations on the GPU (the profiler's median over 50 more calls,
            each after the flush): the part of the time the compilers' code decides, without
            the GPU's start-up after the flush that every provider pays alike
For a matmul row every config of CFGS is a provider of its own (newt's and Triton's), so a
compiler's best-of-configs never gets the extra luck of taking the best of several noisy
samples within a round. Every output is checked against torch first, NaN-poisoned.
"""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import bench_matmul  # noqa: E402
import common  # noqa: E402
from newt.testing import assert_close  # noqa: E402

DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _parse(env, default):
    return [x for x in os.environ.get(env, default).split(",") if x]


def add_row():
    """(name, unit, work, {provider: fn}) of the vector add, fp32 n = 2^27, BLOCK 1024, 4 warps."""
    n = 1 << 27
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    calls = {}
    for p in ("newt", "triton"):
        k = common.kernels(p)["add"]
        out.fill_(float("nan"))
        common.launch_add(k, x, y, out)
        assert_close(out, x + y, msg=f"{p} add")
        calls[p] = lambda k=k: common.launch_add(k, x, y, out)
    calls["torch"] = lambda: torch.add(x, y, out=out)
    return "vector add fp32 n=2^27", "GB/s", 3 * n * 4, calls


def matmul_row(dt_name: str, n: int, cfgs):
    dt = DT[dt_name]
    newt_k = bench_matmul.example().matmul_kernel
    kernels = {"newt": newt_k, "triton": common.triton_twin(newt_k)}
    a, b, c = bench_matmul.operands(dt, n, n, n)
    ref = a.double() @ b.double()
    calls = {}
    for p, k in kernels.items():
        for cfg in cfgs:
            c.fill_(float("nan"))
            bench_matmul.launch(k, a, b, c, cfg)
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            if not (torch.isfinite(c).all() and err < 1e-2):
                raise AssertionError(f"{p} {cfg} {dt_name} {n}: rel err {err}")
            calls[f"{p} {'x'.join(map(str, cfg))}"] = (
                lambda k=k, cfg=cfg: bench_matmul.launch(k, a, b, c, cfg))
    calls["cuBLAS"] = lambda: torch.matmul(a, b)
    return f"matmul {dt_name} {n}^3", "TFLOP/s", 2.0 * n ** 3, calls


def kernel_us(fn, reps: int = 50) -> float:
    """Median duration on the GPU, in us, of the kernel each call of fn launches (after an L2
    flush, as do_bench times it)."""
    from torch.profiler import ProfilerActivity, profile
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            cache.zero_()
            fn()
        torch.cuda.synchronize()
    # every kernel but the flush's (a fill); a call launching one kernel gives one each
    durs = [e.time_range.end - e.time_range.start for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and "fill" not in e.name.lower()]
    return statistics.median(durs) if durs else float("nan")


def timed_rounds(calls: dict, rounds: int, time_one) -> dict:
    """{provider: [ms of round 0, 1, ...]}; each round times every provider once, the order
    rotated so that no provider is always the one timed first."""
    names = list(calls)
    times = {p: [] for p in names}
    for r in range(rounds):
        k = r % len(names)
        for p in names[k:] + names[:k]:
            times[p].append(time_one(calls[p]))
    return times


def summary(times: dict, unit: str, work: float) -> list[str]:
    """The table's lines for {provider: [ms per round]}: each provider's median rate, then
    newt/Triton per round for each newt provider and its Triton namesake ("newt X" / "triton
    X"), and, with several configs, each compiler's best config per round."""
    scale = 1e9 if unit == "TFLOP/s" else 1e6   # work per ms -> TFLOP/s or GB/s
    rounds = len(next(iter(times.values())))
    lines = [f"  {p:24} {work / statistics.median(t) / scale:9.1f} {unit}"
             for p, t in times.items()]

    def ratio_line(label, newt_ms, triton_ms):
        ratio = [tt / tn for tn, tt in zip(newt_ms, triton_ms)]
        return (f"  {label}: median {statistics.median(ratio):.4f}, range {min(ratio):.4f}-"
                f"{max(ratio):.4f}, newt ahead in {sum(x > 1.0 for x in ratio)} of {rounds}")

    pairs = [(n, "triton" + n[4:]) for n in times if n.startswith("newt")]
    for mine, theirs in pairs:
        lines.append(ratio_line(f"newt/Triton {mine[5:]}".rstrip(), times[mine], times[theirs]))
    if len(pairs) > 1:
        best = [min(times[m][r] for m, _ in pairs) for r in range(rounds)]
        tbest = [min(times[t][r] for _, t in pairs) for r in range(rounds)]
        lines.append(ratio_line("newt/Triton, each one's best config per round", best, tbest))
    return lines


def study(name, unit, work, calls, rounds):
    import triton.testing
    times = timed_rounds(calls, rounds, lambda fn: triton.testing.do_bench(
        fn, warmup=25, rep=100, return_mode="median"))
    print(f"\n{name} ({rounds} rounds)")
    print("\n".join(summary(times, unit, work)))
    print("  kernel durations on the GPU (us): " + ", ".join(
        f"{p} {kernel_us(fn):.2f}" for p, fn in calls.items()), flush=True)


def main():
    rounds = int(os.environ.get("ROUNDS", 15))
    cfgs = [tuple(int(v) for v in c.split("x"))
            for c in _parse("CFGS", "128x256x64x8x4,128x256x64x8x3")]
    for row in _parse("ROWS", "add,fp16:2048,bf16:2048"):
        if row == "add":
            spec = add_row()
        else:
            d, n = row.split(":")
            spec = matmul_row(d, int(n), cfgs)
        study(*spec, rounds)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    print(f"tie_rounds {torch.cuda.get_device_name()} torch {torch.__version__}")
    main()
