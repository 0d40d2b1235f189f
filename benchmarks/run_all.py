"""Run every benchmark, print one short table, write JSON, markdown and (optionally) a PNG.

    python benchmarks/run_all.py [--out DIR] [--runs 2] [--only memory,launch] [--quick]

Interface for benchmark files: any `benchmarks/bench_<name>.py` defining

    run(out_dir: str | None, quick: bool = False) -> list[dict]

is picked up. Each returned row is a dict with
    workload          str, one line ("softmax fp32 32768x4096")
    unit              str ("GB/s", "TFLOP/s", "us", "ms")
    higher_is_better  bool
    newt, triton, torch   float or None (None: not available or failed)
    errors            {provider: message} for providers that failed (optional)
    target_ratio      optional float: newt/triton must be >= it (<= when lower is better)
    target_abs        optional float: newt must be >= it (<= when lower is better)
Files may also write their own extra output (plots, logs) under out_dir.
With --runs N every benchmark runs N times in this process; the table shows the newt/triton
ratio of each run, so a margin can be told apart from noise.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402  (puts the repository root on sys.path)


def discover(only=None):
    mods = []
    first = {"memory": 0, "launch": 1}  # the TARGETS.md order; then the rest by name
    paths = sorted(glob.glob(os.path.join(HERE, "bench_*.py")),
                   key=lambda p: (first.get(os.path.basename(p)[6:-3], 2), p))
    for path in paths:
        name = os.path.basename(path)[len("bench_"):-3]
        if only and name not in only:
            continue
        mods.append((name, path))
    return mods


def ratio(row):
    n, t = row.get("newt"), row.get("triton")
    return n / t if n and t else None


def verdict(row) -> str:
    """'ok', 'MISS' or '' (no target) against the row's targets."""
    hib = row.get("higher_is_better", True)
    checks = []
    r = ratio(row)
    if row.get("target_ratio") is not None and r is not None:
        checks.append(r >= row["target_ratio"] if hib else r <= row["target_ratio"])
    if row.get("target_abs") is not None and row.get("newt") is not None:
        checks.append(row["newt"] >= row["target_abs"] if hib else row["newt"] <= row["target_abs"])
    if row.get("newt") is None and (row.get("target_ratio") or row.get("target_abs")):
        return "MISS"
    if not checks:
        return ""
    return "ok" if all(checks) else "MISS"


def _fmt(v):
    if v is None:
        return "-"
    return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"


def format_table(runs) -> str:
    """runs: list (one per run) of lists of rows; rows are matched across runs by workload.
    Values shown are from the last run that has the row; one ratio column per run."""
    by_run = [{r["workload"]: r for r in run} for run in runs]
    order = list(dict.fromkeys(r["workload"] for run in runs for r in run))
    head = ["workload", "unit", "newt", "triton", "torch"]
    head += [f"newt/triton r{i + 1}" for i in range(len(runs))] + ["target"]
    lines = [head]
    for w in order:
        present = [b[w] for b in by_run if w in b]
        row = present[-1]
        ratios = []
        for b in by_run:
            r = ratio(b[w]) if w in b else None
            ratios.append(f"{r:.3f}x" if r else "-")
        vs = [verdict(r) for r in present]
        v = "MISS" if "MISS" in vs else ("ok" if "ok" in vs else "")
        lines.append([w, row["unit"], _fmt(row.get("newt")), _fmt(row.get("triton")),
                      _fmt(row.get("torch")), *ratios, v])
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(head))]
    out = []
    for i, r in enumerate(lines):
        cells = [str(c).ljust(w) if k == 0 else str(c).rjust(w)
                 for k, (c, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def environment() -> dict:
    import torch
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:
        env["triton"] = None
    try:
        from newt.runtime import nvrtc
        env["nvrtc"] = nvrtc.version()
    except Exception:
        env["nvrtc"] = None
    return env


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; no plot written")
        return
    rs = [(r["workload"], ratio(r)) for r in rows if ratio(r)]
    if not rs:
        return
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rs) + 1))
    ax.barh([w for w, _ in rs], [v for _, v in rs], color="tab:green")
    ax.axvline(1.0, color="k", linewidth=1)
    ax.set_xlabel("newt / Triton (GB/s and TFLOP/s: higher is better; us and ms: lower)")
    ax.invert_yaxis()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def report(out, env, runs, failures):
    """The table and error lines of the results so far; written under `out` when given."""
    runs = [r for r in runs if r] or [[]]
    table = format_table(runs)
    errs = [f"  {r['workload']}: {p}: {m.splitlines()[0] if m else m}"
            for r in runs[-1] for p, m in r.get("errors", {}).items()]
    errs += [f"  bench_{n} failed: {tb.strip().splitlines()[-1]}" for n, tb in failures.items()]
    if out:
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump({"env": env, "runs": runs, "failures": failures}, f, indent=1)
        with open(os.path.join(out, "benchmarks.md"), "w") as f:
            f.write(f"Measured {env['date']} on {env['gpu']} (torch {env['torch']}, "
                    f"triton {env['triton']}, NVRTC {env['nvrtc']}), medians (warm launches: the "
                    f"fastest of the interleaved batches of a 5 s window, see bench_launch.py)."
                    "\n\n```\n"
                    f"{table}\n```\n")
        with open(os.path.join(out, "table.txt"), "w") as f:
            f.write(table + "\n" + ("errors:\n" + "\n".join(errs) + "\n" if errs else ""))
        plot(runs[-1], os.path.join(out, "newt_vs_triton.png"))
    return table, errs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="folder for results.json, benchmarks.md, .png")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated names: memory,launch,matmul")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    ap.add_argument("--plot-from", nargs=2, metavar=("RESULTS_JSON", "PNG"), default=None,
                    help="redraw the newt/Triton plot of a saved results.json (no GPU needed)")
    args = ap.parse_args(argv)
    if args.plot_from:
        with open(args.plot_from[0]) as f:
            saved = json.load(f)
        plot(saved["runs"][-1], args.plot_from[1])
        return
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks need a CUDA device (the interpreter is not timed); "
                 "run the examples instead: python examples/01_vector_add.py")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    env = environment()
    print(" ".join(f"{k}={v}" for k, v in env.items()))
    only = set(filter(None, args.only.split(",")))
    runs = [[] for _ in range(args.runs)]
    failures = {}
    for name, path in discover(only):
        try:
            mod = common.load_file(path, f"bench_{name}")
            if not callable(getattr(mod, "run", None)):
                raise AttributeError(f"bench_{name}.py defines no run(out_dir, quick=False) "
                                     f"returning rows (see benchmarks/run_all.py)")
        except Exception:
            failures[name] = traceback.format_exc()
            report(args.out, env, runs, failures)
            continue
        for i in range(args.runs):
            print(f"-- bench_{name} run {i + 1}/{args.runs}", flush=True)
            try:
                runs[i].extend(mod.run(args.out, quick=args.quick))
            except Exception:
                failures[name] = traceback.format_exc()
                print(failures[name], file=sys.stderr)
                break
            finally:  # results so far survive a later crash or a timeout
                report(args.out, env, runs, failures)
    table, errs = report(args.out, env, runs, failures)
    print()
    print(table)
    if errs:
        print("errors:\n" + "\n".join(errs))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
