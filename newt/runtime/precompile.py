"""Compile many specializations at once, each in its own forked process, into the disk cache.

Sits beside the launch slow path: the autotuner hands it one job per candidate config before
timing them. Each child runs the compiler (frontend -> passes -> codegen -> NVRTC) and writes the
KernelBinary to the disk cache; the parent then launches from the cache. Two gains:
  - compiles run in parallel (one per CPU core), so tuning N configs costs about N/cores compiles;
  - a compiler crash (NVRTC 13.0 was seen to segfault on some wgmma code) kills only its child:
    the parent reports that config as failed instead of dying.
Children are forked, so they see the parent's kernels without re-importing anything; they never
touch the GPU. Where fork is unavailable, or the disk cache is not writable, nothing is done and
the caller compiles in-process as usual.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback

from . import cache

_JOBS: list = []   # read by forked children (copied address space), never pickled


def _child(i: int, conn):
    try:
        from . import specialize
        jf, sig, cx, spec, arch, nw, ns = _JOBS[i]
        specialize.get_binary(jf, sig, cx, spec, arch=arch, num_warps=nw, num_stages=ns)
        conn.send(None)
    except BaseException as e:  # a compile error: the parent reports it; it may retry in-process
        conn.send(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
    finally:
        conn.close()
        os._exit(0)


def available() -> bool:
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def compile_in_workers(jobs: list, max_workers: int | None = None, job_timeout: float = 180.0):
    """jobs: [(jitfn, signature, constexprs, specialization, arch, num_warps, num_stages)].
    Returns one entry per job: None (in the disk cache now), "crashed: ..." (the child died or
    hung past `job_timeout` seconds: do not compile this one in-process), or the child's error
    text (a normal compile error, which the in-process compile will raise again)."""
    global _JOBS
    results: list = [None] * len(jobs)
    if not jobs or not available():
        return results
    root = cache.disk_cache().root
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        return results
    if not os.access(root, os.W_OK):   # children could not hand their cubins back
        return results
    ctx = multiprocessing.get_context("fork")
    _JOBS = list(jobs)
    workers = max(1, min(max_workers or os.cpu_count() or 1, len(jobs)))
    pending = list(range(len(jobs)))
    running: dict = {}
    try:
        while pending or running:
            while pending and len(running) < workers:
                i = pending.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_child, args=(i, send), daemon=True)
                try:
                    p.start()
                except (AssertionError, OSError):   # e.g. inside a daemonic worker process
                    send.close()
                    recv.close()
                    for j in [i] + pending:
                        results[j] = None            # the caller compiles in-process
                    pending.clear()
                    break
                send.close()
                running[i] = (p, recv, time.monotonic())
            for i, (p, recv, t0) in list(running.items()):
                if recv.poll(0.005):
                    try:
                        results[i] = recv.recv()
                    except EOFError:   # died before answering
                        p.join()
                        results[i] = f"crashed: the compiler process died (exit {p.exitcode})"
                    p.join()
                    del running[i]
                elif not p.is_alive():
                    p.join()
                    results[i] = f"crashed: the compiler process died (exit {p.exitcode})"
                    del running[i]
                elif time.monotonic() - t0 > job_timeout:
                    p.kill()
                    p.join()
                    results[i] = f"crashed: compile took more than {job_timeout:.0f} s"
                    del running[i]
    finally:
        for p, _, _ in running.values():
            p.kill()
        _JOBS = []
    return results
