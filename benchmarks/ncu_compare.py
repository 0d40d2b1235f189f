"""Nsight Compute, newt next to Triton on one benchmark workload, in one table.

Runs this file again under `ncu --set full` (the child launches newt's kernel twice, then its
Triton twin twice, on the benchmark's inputs and launch parameters), then reads the report
back (`--page details`, and `--page source --print-source sass --csv` for the per-instruction
warp-stall samples) and prints, for the second launch of each provider: duration, instructions,
registers, occupancy, issue-slot use, the warp-stall reasons (share of all samples), and the
hottest SASS instructions. ncu locks the clocks (base clock), so durations compare the
kernels, not the boost behaviour the benchmarks see.

    PYTHONPATH=. python benchmarks/ncu_compare.py attention64 [--out DIR] [--hot 12]

Workloads: softmax, layernorm, matmul8192 and matmul2048 (fp16, 128x256x64, 8 warps, 4 stages),
matmul2048bf16 (the same in bf16), matmul2048k32 (fp16, 128x256x32, 8 warps, 8 stages),
matmul2048t128 (fp16, 128x128x64, 8 warps, 4 stages),
attention64, attention128 (fp16, B=4 H=32 N=4096, non-causal), attention64c (causal).
NCU_CLOCKS=none leaves the clocks unlocked.
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = {"softmax": "softmax_kernel", "layernorm": "layernorm_fwd_kernel", "matmul8192": "matmul_kernel",
          "matmul2048": "matmul_kernel", "matmul2048bf16": "matmul_kernel",
          "matmul2048k32": "matmul_kernel", "matmul2048t128": "matmul_kernel",
          "attention64": "attn_fwd", "attention128": "attn_fwd", "attention64c": "attn_fwd"}
DETAILS = ("Duration", "SM Frequency", "Compute (SM) Throughput", "Memory Throughput",
           "L2 Cache Throughput", "Executed Instructions", "Registers Per Thread",
           "Achieved Occupancy",
           "Issue Slots Busy", "DRAM Throughput", "L2 Hit Rate", "Dynamic Shared Memory Per Block")


def _launch(name: str):
    """In the child under ncu: newt twice, then Triton twice, on the benchmark's inputs."""
    sys.path.insert(0, HERE)
    import torch

    import common
    if name in ("softmax", "layernorm"):
        ks = {p: common.kernels(p)[name] for p in ("newt", "triton")}
        if name == "softmax":
            x = torch.randn(32768, 4096, device="cuda")
            out = torch.empty_like(x)
            run = lambda k: common.launch_softmax(k, x, out)  # noqa: E731
        else:
            x = torch.randn(32768, 4096, device="cuda").half()
            w, b = torch.randn(4096, device="cuda").half(), torch.randn(4096, device="cuda").half()
            y = torch.empty_like(x)
            mean, rstd = torch.empty(32768, device="cuda"), torch.empty(32768, device="cuda")
            run = lambda k: common.launch_layernorm(k, x, w, b, y, mean, rstd)  # noqa: E731
    elif name.startswith("matmul"):
        import bench_matmul as bm
        ex = bm.example()
        ks = {"newt": ex.matmul_kernel, "triton": common.triton_twin(ex.matmul_kernel)}
        n = int(re.match(r"matmul(\d+)", name).group(1))
        dt = torch.bfloat16 if name.endswith("bf16") else torch.float16
        cfg = ((128, 256, 32, 8, 8) if name.endswith("k32") else
               (128, 128, 64, 8, 4) if name.endswith("t128") else (128, 256, 64, 8, 4))
        a, b, c = bm.operands(dt, n, n, n)
        run = lambda k: bm.launch(k, a, b, c, cfg)  # noqa: E731
    else:
        import bench_attention as ba
        ex = ba.example()
        ks = {"newt": ex._attn_fwd, "triton": ba.triton_kernel()}
        D, causal = (128 if "128" in name else 64), name.endswith("c")
        q, k, v = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        o = torch.empty_like(q)
        run = lambda kern: ex.attention(q, k, v, causal, kernel=kern, out=o)  # noqa: E731
    for p in ("newt", "triton"):
        for _ in range(2):
            run(ks[p])
    torch.cuda.synchronize()


# ---- reading the report -----------------------------------------------------------------------

def details_metrics(text: str) -> list[dict]:
    """One {metric name: "value unit"} per profiled launch of `ncu --page details` output (the
    first of two same-named metrics is kept)."""
    launches, cur = [], None
    for line in text.splitlines():
        if re.match(r"^  \S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line):
            cur = {}
            launches.append(cur)
            continue
        m = re.match(r"^\s{4}(\S.*?)\s{2,}(\S+\s+)?([\d.,]+)\s*$", line)
        if cur is not None and m and m.group(1) not in cur:
            unit = (m.group(2) or "").strip()
            cur[m.group(1).strip()] = m.group(3) + (f" {unit}" if unit else "")
    return launches


def sass_samples(text: str) -> list[dict]:
    """Per profiled launch of `--page source --print-source sass --csv` output: {"rows":
    [(address, sass, samples, executed)], "stalls": {reason: samples}}."""
    out = []
    for part in text.split('"Kernel Name",')[1:]:
        lines = part.splitlines()
        rows = list(csv.reader(io.StringIO("\n".join(lines[1:]))))
        if not rows:
            continue
        col = {h: j for j, h in enumerate(rows[0])}
        reasons = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
        stalls = collections.Counter()
        body = []
        for r in rows[1:]:
            if len(r) < len(rows[0]):
                continue
            num = lambda h: int(r[col[h]] or 0) if r[col[h]] not in ("", "-") else 0  # noqa
            for h in reasons:
                stalls[h[len("stall_"):]] += num(h)
            body.append((r[0], r[1].strip(), num("Warp Stall Sampling (All Samples)"),
                         num("Instructions Executed")))
        out.append({"rows": body, "stalls": dict(stalls)})
    return out


def report(details: list[dict], sass: list[dict], hot: int = 12) -> str:
    """The comparison table of the second launch of newt (launch 1) and of Triton (launch 3)."""
    pick = {"newt": 1, "triton": 3}
    lines = [f"{'metric':34s} {'newt':>20s} {'triton':>20s}"]
    for m in DETAILS:
        vals = [details[i].get(m, "-") if i < len(details) else "-" for i in pick.values()]
        lines.append(f"{m:34s} {vals[0]:>20s} {vals[1]:>20s}")
    if len(sass) > max(pick.values()):
        tot = {p: sum(sass[i]["stalls"].values()) or 1 for p, i in pick.items()}
        reasons = sorted(set(sass[1]["stalls"]) | set(sass[3]["stalls"]),
                         key=lambda r: -(sass[1]["stalls"].get(r, 0) + sass[3]["stalls"].get(r, 0)))
        lines.append("warp-stall samples, share of each kernel's total:")
        for r in reasons[:10]:
            a, b = (sass[i]["stalls"].get(r, 0) / tot[p] * 100 for p, i in pick.items())
            lines.append(f"  {r:32s} {a:19.1f}% {b:19.1f}%")
        for p, i in pick.items():
            lines.append(f"hottest instructions, {p} (samples, executions, SASS):")
            for addr, ins, s, ex in sorted(sass[i]["rows"], key=lambda r: -r[2])[:hot]:
                lines.append(f"  {s:8d} {ex:12d}  {addr[-5:]}  {ins[:80]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(KERNEL))
    ap.add_argument("--out", help="keep the report and the CSV here")
    ap.add_argument("--hot", type=int, default=12, help="hottest instructions listed")
    ap.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.launch:
        return _launch(args.workload)
    ncu = shutil.which("ncu")
    if ncu is None:
        print("ncu (Nsight Compute) is not on PATH: nothing to profile")
        return 2
    out = args.out or tempfile.mkdtemp(prefix="ncu-")
    os.makedirs(out, exist_ok=True)
    rep = os.path.join(out, args.workload)
    # NCU_CLOCKS=none: the clocks as the benchmarks see them (boost), not locked at base
    clocks = ["--clock-control", "none"] if os.environ.get("NCU_CLOCKS") == "none" else []
    cmd = [ncu, "--set", "full", *clocks, "--import-source", "no",
           "-k", f"regex:{KERNEL[args.workload]}", "--launch-count", "4", "-f", "-o", rep,
           sys.executable, os.path.abspath(__file__),
           args.workload, "--launch"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(r.stdout[-2000:], r.stderr[-2000:])
        return r.returncode
    det = subprocess.run([ncu, "--import", rep + ".ncu-rep", "--page", "details"],
                         capture_output=True, text=True).stdout
    src = subprocess.run([ncu, "--import", rep + ".ncu-rep", "--page", "source", "--print-source",
                          "sass", "--csv"], capture_output=True, text=True).stdout
    with gzip.open(rep + "_sass.csv.gz", "wt") as f:
        f.write(src)
    with open(rep + "_details.txt", "w") as f:
        f.write(det)
    print(f"{args.workload}: Nsight Compute, second launch of each (report: {rep}.ncu-rep)")
    print(report(details_metrics(det), sass_samples(src), args.hot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
