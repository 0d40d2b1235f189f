"""Run Triton's tutorials on newt: each file with its imports pointed at newt, nothing else.

    python scripts/run_triton_tutorials.py PATH [--timeout S] [-k NAME]... [--interpret] [--keep]
                                           [--checks-only] [--pytest] [--reference]

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

The correctness parts: a tutorial checks its kernel (an assert, a printed ✅ or ❌) and then
runs `perf_report` benchmark sweeps that take minutes. `--checks-only` runs every line of the
tutorial but turns each sweep's `.run()` into a printed note (a `sitecustomize` on the child's
path patches `Mark.run` of the testing module; the tutorial's text is untouched); a tutorial
that prints ❌ fails. `--pytest` also runs, under pytest, the tutorial's parametrized `test_*`
functions (06's forward and backward check is one, and only pytest runs it). `--reference`
runs the files unmodified, under Triton, so both sides can be compared in one run.
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


SKIP_SWEEPS = """# Written by scripts/run_triton_tutorials.py --checks-only: a tutorial's benchmark sweeps
# (`perf_report(...)(fn).run()`) print a note instead of timing; everything else runs.
import importlib
import os

def _skip(self, *args, **kwargs):
    print("(benchmark sweep skipped: --checks-only)", flush=True)

_mod = importlib.import_module(os.environ["TUTORIAL_TESTING_MODULE"])
_mod.Mark.run = _skip
"""


def parametrized_tests(text: str) -> list[str]:
    """Names of the `test_*` functions pytest can run on its own: those whose parameters come
    from `@pytest.mark.parametrize` (a bare `def test_x(M, N)` is called by the tutorial's own
    code with arguments, and pytest would report missing fixtures)."""
    names, decorated = [], False
    for line in text.splitlines():
        if line.startswith("@pytest.mark.parametrize"):
            decorated = True
        elif line.startswith("def test_") and decorated:
            names.append(line[4:line.index("(")])
        elif line.strip() and not line.startswith("@"):
            decorated = False
    return names


def _run(cmd, workdir, env, timeout):
    """(returncode or None on timeout, stdout, stderr)."""
    try:
        r = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return None, _text(e.stdout), _text(e.stderr)
    return r.returncode, r.stdout, r.stderr


def run_one(path: str, workdir: str, timeout: float, env: dict, logs: str | None = None,
            reference: bool = False, pytest: bool = False) -> tuple[str, float, str]:
    """(result, seconds, why) of one tutorial copied into `workdir` (unmodified with
    `reference`); with `logs`, its output is written to LOGS/<name>.log. A tutorial that times
    out says what it printed last (its checks usually print before its benchmarks start).
    With `pytest`, its parametrized test functions run after it, under what is left of
    `timeout`."""
    dst = os.path.join(workdir, os.path.basename(path))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text if reference else substitute(text))
    t0 = time.monotonic()
    rc, out, err = _run([sys.executable, dst], workdir, env, timeout)
    tests = parametrized_tests(text) if pytest and rc == 0 else []
    if tests:
        left = max(1.0, timeout - (time.monotonic() - t0))
        rc, tout, terr = _run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               dst, "-k", " or ".join(tests)], workdir, env, left)
        out += f"\n--- pytest {' '.join(tests)} ---\n" + tout
        err += terr
    secs = time.monotonic() - t0
    _log(logs, path, out, err)
    if rc is None:
        last = [ln.strip() for ln in out.splitlines() if ln.strip()][-1:]
        return "timeout", secs, f"still running after {timeout:g} s" + (
            f"; last printed: {last[0]}" if last else "")
    if rc == 0 and "\u274c" not in out:
        return "pass", secs, " ".join(f"{t} passed" for t in tests)
    if rc == 0:
        return "fail", secs, "a check printed \u274c"
    return "fail", secs, _why(err, out)


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
    ap.add_argument("--checks-only", action="store_true",
                    help="run the checks, print a note instead of each benchmark sweep")
    ap.add_argument("--pytest", action="store_true",
                    help="also run each tutorial's parametrized test_* functions under pytest")
    ap.add_argument("--reference", action="store_true",
                    help="run the files unmodified (under Triton), for comparison")
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
    if args.checks_only:
        shim = os.path.join(workdir, "checks_only")
        os.makedirs(shim)
        with open(os.path.join(shim, "sitecustomize.py"), "w", encoding="utf-8") as f:
            f.write(SKIP_SWEEPS)
        env["PYTHONPATH"] = shim + os.pathsep + env["PYTHONPATH"]
        env["TUTORIAL_TESTING_MODULE"] = "triton.testing" if args.reference else "newt.testing"
    rows = []
    try:
        for path in files:
            name = os.path.basename(path)
            print(f"running {name} ...", flush=True)
            rows.append((name, *run_one(path, workdir, args.timeout, env, args.logs,
                                        args.reference, args.pytest)))
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
