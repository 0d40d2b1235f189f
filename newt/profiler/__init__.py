"""`newt.profiler`: a scoped profiler with the calls of Triton's proton.

Sits beside the pipeline: it times regions of the host program, not compiled code.

    import newt.profiler as proton
    proton.start("matmul")
    with proton.scope("fp16 4096", {"flops16": 2 * M * N * K, "bytes": nbytes}):
        c = matmul(a, b)     # whatever it launches is timed
    proton.finalize()        # prints a table; writes matmul.hatchet (read by proton.viewer)

A scope records a pair of CUDA events on torch's current stream around its body (wall-clock time
without a GPU), so it measures the GPU time of everything the body launched; `finalize`
synchronizes once and adds them up per scope name. Metrics given to a scope are summed, and
rates are derived from them: `flops<N>` -> `tflop<N>/s`, `flops` -> `tflop/s`, `bytes` ->
`gbyte/s`. A session started with `hook="triton"` also records kernels: each launch made
through an autotuner, `@heuristics` or `kernel.run` is a scope of its own, named (with its
metrics) by the kernel's `launch_metadata` (kernels.py). Differences from proton: kernel records
are events around each launch, not CUPTI's, and a direct `kernel[grid](...)` launch is not
recorded (put it in a scope); one level of scopes (nested scopes are timed on their own, not
shown as a tree); the `.hatchet` file is newt's own JSON, which `newt.profiler.viewer` reads.
"""
from __future__ import annotations

import contextlib
import functools
import json
import time

from . import kernels

_sessions: list = []          # one dict per start()


def _now_marker():
    import torch
    if torch.cuda.is_available():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e
    return time.perf_counter()


def _elapsed_ms(a, b) -> float:
    if isinstance(a, float):
        return (b - a) * 1e3
    return a.elapsed_time(b)


def start(name: str | None = None, *, context: str = "shadow", data: str = "tree",
          backend: str | None = None, mode=None, hook: str | None = None) -> int:
    """Start a session (active at once); returns its id. `name` names the output file.
    `hook="triton"` also records each kernel launched through `kernel.run` or an autotuner
    (kernels.py)."""
    _sessions.append(dict(name=name, active=True, open=[], done=[], finalized=False,
                          kernels=hook == "triton"))
    kernels.watch(any(s["kernels"] for s in _session(None)))
    return len(_sessions) - 1


def _session(session):
    live = [i for i, s in enumerate(_sessions) if not s["finalized"]]
    if session is None:
        return [_sessions[i] for i in live]
    if session not in live:
        raise ValueError(f"no profiling session {session} is open (started: {len(_sessions)})")
    return [_sessions[session]]


def activate(session: int | None = None):
    """Record scopes again in `session` (every open session by default)."""
    for s in _session(session):
        s["active"] = True


def deactivate(session: int | None = None, flushing: bool = False):
    """Stop recording scopes in `session` (every open session by default)."""
    for s in _session(session):
        s["active"] = False


def enter_scope(name: str, metrics: dict | None = None, kernel: bool = False):
    """Open scope `name` in every open session (a `kernel` record: in those started with
    hook="triton")."""
    marker = None
    for s in _session(None):
        if kernel and not s["kernels"]:
            continue
        if s["active"]:
            marker = marker or _now_marker()
            s["open"].append((name, marker, dict(metrics or {})))
        else:
            s["open"].append(None)


def exit_scope(name: str | None = None, kernel: bool = False):
    marker = None
    for s in _session(None):
        if (kernel and not s["kernels"]) or not s["open"]:
            continue
        entry = s["open"].pop()
        if entry is not None:
            marker = marker or _now_marker()
            s["done"].append((*entry, marker))


class scope(contextlib.ContextDecorator):
    """`with scope(name, metrics):` or `@scope(name)`: time the body under `name`."""

    def __init__(self, name: str, metrics: dict | None = None):
        self.name, self.metrics = name, metrics

    def __enter__(self):
        enter_scope(self.name, self.metrics)
        return self

    def __exit__(self, *exc):
        exit_scope(self.name)
        return False


def _rates(row: dict) -> dict:
    out = {}
    sec = row["time/ms"] * 1e-3
    for k, v in row.items():
        if not sec or not isinstance(v, (int, float)):
            continue
        if k.startswith("flops"):
            out[f"tflop{k[5:]}/s"] = v / sec / 1e12
        elif k == "bytes":
            out["gbyte/s"] = v / sec / 1e9
    return out


def summary(session: int | None = None) -> list[dict]:
    """Per scope name (in first-seen order): count, time/ms (total), avg/ms, the summed
    metrics and the rates derived from them. Synchronizes once."""
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    rows: dict = {}
    for s in _session(session) if session is not None else _sessions:
        for name, a, metrics, b in s["done"]:
            row = rows.setdefault(name, {"name": name, "count": 0, "time/ms": 0.0})
            row["count"] += 1
            row["time/ms"] += _elapsed_ms(a, b)
            for k, v in metrics.items():
                row[k] = row.get(k, 0) + v
    for row in rows.values():
        row["avg/ms"] = row["time/ms"] / row["count"]
        row.update(_rates(row))
    return list(rows.values())


def format_table(rows: list[dict]) -> str:
    cols = ["count", "time/ms", "avg/ms"]
    for r in rows:
        cols += [k for k in r if k.endswith("/s") and k not in cols]
    width = max([len("scope")] + [len(r["name"]) for r in rows])
    lines = ["scope".ljust(width) + "".join(f"{c:>14}" for c in cols)]
    for r in rows:
        cells = "".join(f"{r[c]:>14.4g}" if c in r else f"{'':>14}" for c in cols)
        lines.append(r["name"].ljust(width) + cells)
    return "\n".join(lines)


def finalize(session: int | None = None, output_format: str = "hatchet"):
    """Close `session` (every open one by default): print its table and, if it was started
    with a name, write `<name>.<output_format>` for `newt.profiler.viewer`."""
    targets = _session(session)
    ids = [_sessions.index(s) for s in targets]
    for i, s in zip(ids, targets):
        rows = summary(i)
        s["finalized"] = True
        kernels.watch(any(t["kernels"] for t in _session(None)))
        print(format_table(rows))
        if s["name"]:
            with open(f"{s['name']}.{output_format}", "w") as f:
                json.dump({"newt_profile": 1, "scopes": rows}, f, indent=1)


def profile(func=None, *, name=None, **kwargs):
    """Decorator: run `func` inside its own session, finalized when it returns."""
    if func is None:
        return functools.partial(profile, name=name, **kwargs)

    @functools.wraps(func)
    def wrapper(*args, **kw):
        sid = start(name or func.__name__, **kwargs)
        try:
            return func(*args, **kw)
        finally:
            finalize(sid)
    return wrapper
