"""Draw docs/img/newt_vs_triton.png from the measured table in docs/benchmarks.md.

    python scripts/plot_benchmarks.py [--table docs/benchmarks.md] [--out docs/img/newt_vs_triton.png]

The table between `<!-- measured:start -->` and `<!-- measured:end -->` is the one the README
and the benchmark runs write (benchmarks/run_all.py, scripts/sync_readme_numbers.py); the plot is
redrawn from it, so it never shows older numbers than the table. One bar per row and provider
(Triton, torch): newt's speed relative to it, the mean of the two runs' ratios, turned round for
the time rows (us, ms) so that right of 1.0 always means newt is faster. Needs matplotlib
(`pip install -e .[plot]`); no GPU.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_UNITS = ("us", "ms")


def read_table(text: str) -> tuple[str, list[dict]]:
    """(the "Measured ..." line, the rows) of the measured section of benchmarks.md."""
    m = re.search(r"<!-- measured:start -->\s*(Measured[^\n]*)\n.*?```\n(.*?)```", text, re.S)
    if m is None:
        raise ValueError("no measured table (<!-- measured:start --> ... ```table```) found")
    header, lines = m.group(1), m.group(2).splitlines()
    cols = [(k.start(), k.end()) for k in re.finditer(r"-+", lines[1])]
    names = ["workload", "unit", "newt", "triton", "torch", "r1", "r2", "target"]
    rows = []
    for line in lines[2:]:
        if not line.strip():
            continue
        # the workload column is left-aligned, the others right-aligned under their dashes
        cells = [line[a:b].strip() for a, b in cols]
        rows.append(dict(zip(names, cells)))
    return header, rows


def _num(s: str) -> float | None:
    try:
        return float(s.rstrip("x"))
    except ValueError:
        return None


def speedups(row: dict) -> dict:
    """{provider: newt's speed relative to it} (>1: newt faster)."""
    out = {}
    time_row = row["unit"] in TIME_UNITS
    ratios = [v for v in (_num(row["r1"]), _num(row["r2"])) if v]
    if ratios:
        r = sum(ratios) / len(ratios)
        out["Triton"] = 1 / r if time_row else r
    newt, torch = _num(row["newt"]), _num(row["torch"])
    if newt and torch:
        out["torch"] = torch / newt if time_row else newt / torch
    return out


def plot(header: str, rows: list[dict], path: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in rows if speedups(r)]
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.6))
    h = 0.38
    for k, (prov, color) in enumerate((("Triton", "tab:green"), ("torch", "tab:blue"))):
        ys = [i + (k - 0.5) * h for i, r in enumerate(rows) if prov in speedups(r)]
        xs = [speedups(r)[prov] for r in rows if prov in speedups(r)]
        ax.barh(ys, xs, height=h, color=color, label=f"newt vs {prov}")
        for y, x in zip(ys, xs):
            ax.text(x, y, f" {x:.2f}", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), [r["workload"] for r in rows], fontsize=8)
    ax.axvline(1.0, color="k", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("newt's speed relative to the provider (right of 1: newt faster; "
                  "time rows turned round)")
    ax.set_title(header.split(", medians")[0], fontsize=9)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "newt_vs_triton.png"))
    a = ap.parse_args(argv)
    with open(a.table) as f:
        header, rows = read_table(f.read())
    plot(header, rows, a.out)
    print(f"{a.out}: {len(rows)} rows, {header.split(' (')[0]}")


if __name__ == "__main__":
    sys.exit(main())
