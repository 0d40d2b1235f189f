"""Reading back what newt.profiler.finalize wrote (proton's `viewer.parse` / `print_tree`)."""
from __future__ import annotations

import json

from . import format_table


def parse(metric_names, file_name):
    """(rows, metric names) of a profile file; each row is a scope with its metrics."""
    with open(file_name) as f:
        data = json.load(f)
    rows = data["scopes"]
    names = list(metric_names) if metric_names else ["time/ms"]
    unknown = [m for m in names if not any(m in r for r in rows)]
    if rows and unknown:
        raise ValueError(f"metrics {unknown} are not in {file_name}; it has "
                         f"{sorted({k for r in rows for k in r} - {'name'})}")
    return rows, names


def print_tree(tree, metrics, depth=None, format=None, print_sorted=False):
    rows = sorted(tree, key=lambda r: -r.get(metrics[0], 0)) if print_sorted else tree
    print(format_table([{"name": r["name"], "count": r["count"], "time/ms": r["time/ms"],
                         "avg/ms": r["avg/ms"], **{m: r[m] for m in metrics if m in r}}
                        for r in rows]))
