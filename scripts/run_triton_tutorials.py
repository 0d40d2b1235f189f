"""Run Triton's tutorials on newt: each file with its imports pointed at newt, nothing else.

    python scripts/run_triton_tutorials.py PATH [--timeout S] [-k NAME]... [--interpret] [--keep]

PATH is a folder of tutorial files you have (a Triton checkout's python/tutorials). Each
`*.py` in it is copied to a temporary folder with only its import lines rewritten, so that the
names the code uses stay Triton's and mean newt's:

    import triton                        ->  import newt as triton
    import triton.language as tl         ->  import newt.language as tl
    from triton.tools.x import Y         ->  from newt.tools.x import Y
    import triton.profiler               ->  import newt.profiler; import newt as triton

then run in its own process (from the temporary folder, with this checkout's newt first on the
path) under a timeout. A table follows: each tutorial, pass / fail / timeout, its time, and
the line that says why it failed (the exception the traceback ends with). The exit status is
the number of tutorials that did not pass (a timeout says what the tutorial printed last).
`--interpret` sets NEWT_INTERPRET=1 (CPU tensors, for the tutorials that create them on the
active torch device); `--keep` keeps the copies; `--logs DIR` keeps each one's output.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def substitute(source: str, old: str = "triton", new: str = "newt", line_fn=None) -> str:
    """The source with every import of `old` rewritten to import `new` under the same names;
    every other line unchanged (or passed through `line_fn`)."""
    imp = re.compile(rf"^(\s*)import\s+{old}((?:\.\w+)*)(\s+as\s+\w+)?\s*(#.*)?$")
    frm = re.compile(rf"^(\s*)from\s+{old}((?:\.\w+)*)\s+import\s")
    out = []
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body):]
        m = imp.match(body)
        if m:
            indent, sub, alias, comment = m.group(1), m.group(2), m.group(3), m.group(4)
            if alias:                               # import old[.x] as y
                body = f"{indent}import {new}{sub}{alias}"
            elif sub:                               # import old.x binds `old`
                body = f"{indent}import {new}{sub}; import {new} as {old}"
            else:
                body = f"{indent}import {new} as {old}"
            body += f"  {comment}" if comment else ""
        elif frm.match(body):
            body = frm.sub(lambda m: f"{m.group(1)}from {new}{m.group(2)} import ", body, 1)
        elif line_fn is not None:
            body = line_fn(body)
        out.append(body + end)
    return "".join(out)


def _why(stderr: str, stdout: str) -> str:
    """The exception line a traceback ends with, else the last line written."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    for ln in reversed(lines):   # (notes added to an exception follow its line)
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", ln):
            return ln
    rest = lines or [ln.strip() for ln in (stdout or "").splitlines() if ln.strip()]
    return rest[-1] if rest else ""


def _text(b) -> str:
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")


def run_one(path: str, workdir: str, timeout: float, env: dict,
            logs: str | None = None) -> tuple[str, float, str]:
    """(result, seconds, why) of one tutorial copied into `workdir`; with `logs`, its output
    is written to LOGS/<name>.log. A tutorial that times out says what it printed last (its
    checks usually print before its benchmarks start)."""
    dst = os.path.join(workdir, os.path.basename(path))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(dst, "w", encoding="utf-8") as f:
        f.write(substitute(text))
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, dst], cwd=workdir, env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = _text(e.stdout)
        _log(logs, path, out, _text(e.stderr))
        last = [ln.strip() for ln in out.splitlines() if ln.strip()][-1:]
        return "timeout", time.monotonic() - t0, f"still running after {timeout:g} s" + (
            f"; last printed: {last[0]}" if last else "")
    secs = time.monotonic() - t0
    _log(logs, path, r.stdout, r.stderr)
    if r.returncode == 0:
        return "pass", secs, ""
    return "fail", secs, _why(r.stderr, r.stdout)


def _log(logs, path, out, err):
    if logs:
        os.makedirs(logs, exist_ok=True)
        name = os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(logs, name + ".log"), "w", encoding="utf-8") as f:
            f.write(out + ("\n--- stderr ---\n" + err if err else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="folder of Triton tutorial files")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per tutorial")
    ap.add_argument("-k", dest="only", action="append", default=[],
                    help="run only files whose name contains this (repeatable)")
    ap.add_argument("--interpret", action="store_true", help="run with NEWT_INTERPRET=1")
    ap.add_argument("--keep", action="store_true", help="keep the rewritten copies")
    ap.add_argument("--logs", help="write each tutorial's output to LOGS/<name>.log")
    args = ap.parse_args(argv)
    files = sorted(os.path.join(args.path, n) for n in os.listdir(args.path)
                   if n.endswith(".py") and (not args.only or any(k in n for k in args.only)))
    if not files:
        print(f"no tutorial files (*.py) in {args.path}")
        return 1
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    if args.interpret:
        env["NEWT_INTERPRET"] = "1"
    workdir = tempfile.mkdtemp(prefix="newt-tutorials-")
    rows = []
    try:
        for path in files:
            name = os.path.basename(path)
            print(f"running {name} ...", flush=True)
            rows.append((name, *run_one(path, workdir, args.timeout, env, args.logs)))
    finally:
        if args.keep:
            print(f"copies kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return print_table(rows, "tutorial")


def print_table(rows, label):
    """The summary of (name, result, seconds, why) rows; returns how many did not pass."""
    width = max(len(label), *(len(r[0]) for r in rows))
    print(f"\n{label.ljust(width)}  result   seconds  why")
    for name, result, secs, why in rows:
        print(f"{name.ljust(width)}  {result:7s} {secs:8.1f}  {why[:160]}")
    failed = sum(r[1] != "pass" for r in rows)
    print(f"\n{len(rows) - failed} of {len(rows)} pass")
    return failed


if __name__ == "__main__":
    sys.exit(main())
