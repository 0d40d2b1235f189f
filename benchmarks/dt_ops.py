"""Every deuteron op of the examples (examples/dt_ops_*.py) on the GPU against torch: one table
row per op with pass/fail (and why), the first-call time (trace, compile, tune), the kernel time
against eager torch and, for the matmul that has one, against the hand-written newt kernel.

    python benchmarks/dt_ops.py [--effort none|quick|full] [--ops a,b] [--timeout S] [--budget S]
    python benchmarks/dt_ops.py --cpu      # correctness only, on the newt interpreter

Correctness first, on fresh random inputs with every host allocation of the kernels NaN-poisoned:
at small odd sizes, then at the timed size. Timing: CUDA events, median of 20 after warm-up.
Robust: the ops run in a worker process; an op that raises is reported and the next one runs;
an op that hangs past --timeout (default 60 s) or crashes the worker (a bad CUDA launch leaves
the context unusable) is reported and a fresh worker goes on with the rest. Bounded: nothing new
starts after --budget seconds (default 240), the rest is reported as not run. The default
effort is "none" (heuristic configs, no tuning) to stay inside that; --effort quick gives tuned
numbers at up to ~20 s of tuning per kernel and shape, so give it room or fewer ops, e.g.
`--effort quick --timeout 300 --budget 3000`, or `--effort quick --ops matmul,bmm,softmax`.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
MARK = "@@dt_ops "


def _ops():
    for p in (ROOT, EXAMPLES):
        if p not in sys.path:
            sys.path.insert(0, p)
    import dt_ops_basic
    import dt_ops_jagged
    import dt_ops_matmul
    return (dt_ops_basic.OPS + dt_ops_matmul.OPS + dt_ops_jagged.OPS,
            dict(dt_ops_matmul.NEWT_BASELINE))


# ----------------------------------------------------------------------------- worker

def _time_ms(fn, reps=20):
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def _emit(kind, **row):
    sys.stdout.write(MARK + json.dumps(dict(row, kind=kind)) + "\n")
    sys.stdout.flush()


def _one(op, baselines, cpu=False):
    import torch
    from dt_ops_common import check
    if cpu:                                            # the interpreter: correctness only
        t0 = time.perf_counter()
        check(op, "cpu", small=True, seed=1)
        return {"first_s": time.perf_counter() - t0}
    check(op, "cuda", small=True, seed=1)              # odd sizes
    t0 = time.perf_counter()
    args, _ = check(op, "cuda", small=False, seed=2)   # the timed size (tunes on first call)
    torch.cuda.synchronize()
    row = {"first_s": time.perf_counter() - t0}
    row["dt_ms"] = _time_ms(lambda: op.run(*args))
    eager = op.eager or op.ref
    if eager is not None:
        try:
            row["torch_ms"] = _time_ms(lambda: eager(*args))
        except Exception as e:                          # e.g. torch has no such fp8 kernel
            row["torch_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
    base = baselines.get(op.name)
    if base is not None:
        row["newt_ms"] = _time_ms(lambda: base(*args))
    return row


def worker(names, cpu=False, fault=""):
    import torch
    import newt
    ops, baselines = _ops()
    by_name = {op.name: op for op in ops}
    if cpu:
        newt.options.flags.interpret = True
    elif not torch.cuda.is_available():
        for n in names:
            _emit("row", name=n, ok=False, reason="no CUDA device (--cpu runs the interpreter)")
        return
    faults = dict(f.split(":") for f in fault.split(",") if f)   # the harness's own tests
    for n in names:
        _emit("start", name=n)
        if faults.get(n) == "hang":
            time.sleep(3600)
        if faults.get(n) == "crash":
            os._exit(3)
        try:
            if faults.get(n) == "raise":
                raise RuntimeError("injected failure")
            row = _one(by_name[n], baselines, cpu)
            _emit("row", name=n, ok=True, **row)
        except Exception as e:
            msg = str(e).strip().splitlines()
            _emit("row", name=n, ok=False,
                  reason=f"{type(e).__name__}: {(msg[-1] if msg else '')[:160]}")


# ----------------------------------------------------------------------------- parent

def _spawn(names, args):
    env = dict(os.environ, DEUTERON_AUTOTUNE_EFFORT=args.effort, DEUTERON_QUIET="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--ops", ",".join(names)]
    cmd += ["--cpu"] if args.cpu else []
    cmd += ["--fault", args.fault] if args.fault else []
    err = tempfile.TemporaryFile()          # a file, not a pipe: a chatty worker never blocks
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
    proc.err_file = err
    return proc


class _Lines:
    """Lines of a pipe with a deadline: select() on the descriptor and our own buffer (a
    buffered reader could hold a complete line that select() then never reports)."""

    def __init__(self, pipe):
        self.fd, self.buf, self.eof = pipe.fileno(), b"", False

    def next(self, timeout):
        """A line, "" at end of file, None on timeout."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf and not self.eof:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            self.eof = not chunk
            self.buf += chunk
        if b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            return line.decode(errors="replace") + "\n"
        line, self.buf = self.buf, b""
        return line.decode(errors="replace")


def run(args):
    ops, _ = _ops()
    names = [op.name for op in ops]
    if args.ops:
        want = args.ops.split(",")
        unknown = [w for w in want if w not in names]
        if unknown:
            raise SystemExit(f"unknown ops: {unknown}; known: {names}")
        names = [n for n in names if n in want]
    matmul = {op.name for op in ops if op.matmul}
    results, todo, t_start = {}, list(names), time.monotonic()
    while todo:
        if time.monotonic() - t_start > args.budget:
            for n in todo:
                results[n] = {"ok": False, "reason": f"not run: past the {args.budget:.0f} s budget"}
            break
        proc = _spawn(todo, args)
        lines = _Lines(proc.stdout)
        current, deadline = None, time.monotonic() + args.timeout + 30   # + worker start-up
        while True:
            line = lines.next(max(0.0, deadline - time.monotonic()))
            if line is None:                       # the op in progress hangs: give up on it
                proc.kill()
                proc.wait()
                if current is not None:
                    results[current] = {"ok": False, "reason": f"timeout after {args.timeout:.0f} s"}
                    todo.remove(current)
                elif todo:
                    results[todo[0]] = {"ok": False, "reason": "worker did not start"}
                    todo.pop(0)
                break
            if not line:                           # the worker died (a crash)
                proc.err_file.seek(0)
                err = proc.err_file.read().decode(errors="replace").strip().splitlines()
                proc.wait()
                n = current or (todo[0] if todo else None)
                if n is not None:
                    results[n] = {"ok": False, "reason": "worker crashed: "
                                  + (err[-1][:160] if err else f"exit {proc.returncode}")}
                    todo.remove(n)
                break
            if not line.startswith(MARK):
                continue
            msg = json.loads(line[len(MARK):])
            if msg["kind"] == "start":
                current, deadline = msg["name"], time.monotonic() + args.timeout
                if time.monotonic() - t_start > args.budget:
                    proc.kill()
                    proc.wait()
                    break
            else:
                results[msg["name"]] = msg
                todo.remove(msg["name"])
                current = None
                if not todo:
                    proc.wait()
                    break
    _table(names, results, matmul, args)
    return results


def _fmt(v, spec):
    width = int(spec.split(".")[0])
    return format(v, spec) if isinstance(v, (int, float)) else format("-", f">{width}")


def _table(names, results, matmul, args):
    where = "the CPU interpreter (correctness only)" if args.cpu else "the GPU"
    print(f"deuteron ops on {where} (effort={args.effort}); times in ms, x = torch / deuteron")
    head = (f"{'op':<26} {'result':<6} {'first s':>8} {'deuteron':>9} {'torch':>9} {'x':>6} "
            f"{'newt':>9} {'dt/newt':>7}  reason")
    print(head)
    print("-" * len(head))
    n_ok = 0
    for n in names:
        r = results.get(n, {"ok": False, "reason": "not run"})
        n_ok += bool(r.get("ok"))
        dt_ms, t_ms, nw = r.get("dt_ms"), r.get("torch_ms"), r.get("newt_ms")
        speed = t_ms / dt_ms if dt_ms and t_ms else None
        vs_newt = nw / dt_ms if dt_ms and nw else None
        reason = r.get("reason", "") or r.get("torch_error", "")
        print(f"{n + ('*' if n in matmul else ''):<26} {'pass' if r.get('ok') else 'FAIL':<6} "
              f"{_fmt(r.get('first_s'), '8.2f')} {_fmt(dt_ms, '9.4f')} {_fmt(t_ms, '9.4f')} "
              f"{_fmt(speed, '6.2f')} {_fmt(nw, '9.4f')} {_fmt(vs_newt, '7.2f')}  {reason}")
    print(f"{n_ok}/{len(names)} ops pass (* matmul-like; dt/newt = newt ms / deuteron ms)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--effort", default="none", choices=["none", "quick", "full"])
    p.add_argument("--ops", default="")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per op")
    p.add_argument("--budget", type=float, default=240.0, help="seconds for the whole run")
    p.add_argument("--cpu", action="store_true", help="correctness only, on the interpreter")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--fault", default="", help=argparse.SUPPRESS)   # name:raise|hang|crash
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    if args.worker:
        sys.path.insert(0, EXAMPLES)
        worker(args.ops.split(","), args.cpu, args.fault)
        return
    run(args)


if __name__ == "__main__":
    main()
