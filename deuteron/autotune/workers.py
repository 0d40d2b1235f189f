"""Compiling candidates in parallel child processes, so that tuning pays about N/cores compiles
and a compiler crash (NVRTC has been seen to segfault on some inputs) kills one child, not the
user's process.

    start(jobs, fn, ...) -> Batch     children begin compiling now; the caller may do other work
    Batch.results()      -> [(status, payload)]   "ok" | "error" | "crashed" | "skipped"
    compile_all(tasks, fn) -> [(ok, message)]      the two together

Children are forked, one per job, at most one per CPU core at a time. A forked child starts in
microseconds with everything the parent has imported (torch, newt's compiler, the generated
@newt.jit functions: jobs are read from the inherited `_JOBS`, never pickled) and never touches
the GPU, so it needs no CUDA initialisation. Spawn-started workers, as used before, each
imported torch and deuteron again (about 6 s of CPU per worker on a 2-core machine), re-imported
the user's `__main__`, and were started afresh whenever a batch size changed.

A job that runs past `job_timeout` is killed and reported "crashed"; jobs not yet started when
`deadline` (time.monotonic) passes are "skipped" (the first job always runs). Where fork is
unavailable, jobs run one after another in this process (no crash isolation).

`compile_job` is the newt task: compile one specialization with `newt.runtime.specialize.
get_binary` for the device's arch and write it to newt's disk cache, where the user's process
finds it at launch (the same key: same @newt.jit object, signature, constexprs, specialization).
It returns the ptxas report (registers, spills, local and shared bytes), which the tuner uses to
skip spilling configs without running them.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import time

_JOBS: list = []      # read by forked children (an inherited copy), never pickled
_FN = None


def fork_available() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 2
    return max(1, min(32, n))


def _child(i: int, w: int):
    try:   # a crash is reported by the parent; no traceback dump from the child
        import faulthandler
        faulthandler.disable()
    except Exception:
        pass
    try:
        res = ("ok", _FN(_JOBS[i]))
    except BaseException as e:   # an ordinary compile error: reported, not fatal
        res = ("error", f"{type(e).__name__}: {e}")
    try:
        data = pickle.dumps(res)
    except Exception as e:
        data = pickle.dumps(("error", f"unpicklable result: {e}"))
    view = memoryview(data)
    while view:
        view = view[os.write(w, view):]
    os._exit(0)


class Batch:
    """Jobs compiling in forked children. `results()` waits for them (starting the rest)."""

    def __init__(self, jobs, fn, max_workers=None, job_timeout=120.0, deadline=None):
        self.jobs, self.fn = list(jobs), fn
        self.workers = max(1, max_workers or default_workers())
        self.job_timeout, self.deadline = job_timeout, deadline
        self.out: list = [None] * len(self.jobs)
        self.pending = list(range(len(self.jobs)))
        self.running: dict = {}       # read fd -> (job index, pid, start time, chunks)
        self.forked = fork_available()
        if self.forked:
            self._fill()

    def _fill(self):
        global _JOBS, _FN
        _JOBS, _FN = self.jobs, self.fn
        while self.pending and len(self.running) < self.workers:
            i = self.pending[0]
            if i != 0 and self.deadline is not None and time.monotonic() > self.deadline:
                for j in self.pending:
                    self.out[j] = ("skipped", "tuning budget spent before it compiled")
                self.pending.clear()
                return
            self.pending.pop(0)
            r, w = os.pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:         # the child: compile, answer, exit
                os.close(r)
                _child(i, w)
            os.close(w)
            self.running[r] = (i, pid, time.monotonic(), [])

    def _finish(self, r, status=None):
        i, pid, _, chunks = self.running.pop(r)
        os.close(r)
        if status is not None:
            os.kill(pid, signal.SIGKILL)
        _, code = os.waitpid(pid, 0)
        if status is not None:
            self.out[i] = status
            return
        try:
            self.out[i] = pickle.loads(b"".join(chunks))
        except Exception:        # no (or a torn) answer: the child died compiling
            how = (f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code)
                   else f"exit {os.WEXITSTATUS(code)}")
            self.out[i] = ("crashed", f"the compiler crashed (worker process died: {how})")

    def results(self) -> list:
        if not self.forked:
            for i in self.pending:
                if i != 0 and self.deadline is not None and time.monotonic() > self.deadline:
                    self.out[i] = ("skipped", "tuning budget spent before it compiled")
                    continue
                try:
                    self.out[i] = ("ok", self.fn(self.jobs[i]))
                except Exception as e:
                    self.out[i] = ("error", f"{type(e).__name__}: {e}")
            self.pending.clear()
            return self.out
        try:
            while self.running or self.pending:
                self._fill()
                if not self.running:
                    break
                ready, _, _ = select.select(list(self.running), [], [], 0.05)
                for r in ready:
                    data = os.read(r, 1 << 16)
                    if data:
                        self.running[r][3].append(data)
                    else:
                        self._finish(r)
                now = time.monotonic()
                for r, (i, pid, t0, _) in list(self.running.items()):
                    if now - t0 > self.job_timeout:
                        self._finish(r, ("crashed",
                                         f"compile took more than {self.job_timeout:.0f} s"))
        except BaseException:      # e.g. Ctrl-C: leave no children running or unreaped
            self.cancel()
            raise
        return self.out

    def cancel(self):
        for r in list(self.running):
            self._finish(r, ("skipped", "cancelled"))
        self.pending.clear()


def start(jobs, fn, max_workers=None, job_timeout=120.0, deadline=None) -> Batch:
    return Batch(jobs, fn, max_workers, job_timeout, deadline)


def compile_all(tasks: list, fn, max_workers: int | None = None, timeout: float = 300.0) -> list:
    """[(ok, message)] for each task, in order: `fn(task) -> (ok, message)` in forked children."""
    out = []
    for status, payload in start(tasks, fn, max_workers, timeout).results():
        if status == "ok":
            out.append(payload if isinstance(payload, tuple) else (True, str(payload)))
        else:
            out.append((False, payload))
    return out


def shutdown():
    """Nothing stays running between batches (kept for callers of the former worker pool)."""


# ----------------------------------------------------------------------------- the newt task

def warm_compiler():
    """Import newt's compiler in this process before forking, so every child inherits it
    instead of importing it itself."""
    import newt.compiler  # noqa: F401
    from newt.runtime import specialize  # noqa: F401


def compile_job(job) -> dict:
    """job = (jitfn, signature, constexprs, specialization, arch, num_warps, num_stages): compile
    into newt's disk cache (a hit when a previous run compiled it); returns the ptxas report."""
    from newt.runtime import specialize
    jf, sig, cx, spec, arch, nw, ns = job
    kb = specialize.get_binary(jf, sig, cx, spec, arch=arch, num_warps=nw, num_stages=ns)
    m = kb.meta
    return {k: m.get(k, 0) for k in ("n_regs", "n_spills", "local_bytes", "shared_bytes")}


def job_of(launch, arch: str) -> tuple:
    """The compile job of a recorded deuteron Launch (kernel.Launch): the same specialization the
    JIT computes when the launch runs."""
    from newt.runtime import specialize
    jf = launch.jitfn
    arguments, nw, ns = specialize.bind(jf, launch.args, launch.kwargs)
    sig, cx, spec, _ = specialize.specialize(jf, arguments, allow_cpu=True)
    return (jf, sig, cx, spec, arch, nw, ns)
