"""Turns a fuzz Case (gen.py) into a runnable newt kernel and checks it.

Consumes a Case; produces: the kernel's Python source (registered in `linecache` so
`inspect.getsource` and error locations work), the JITFunction, input tensors (fresh random data,
never zero: floats in +-[0.25, 4], integers over their full range or small, both signs), the
output buffer (poisoned: NaN or a sentinel), the torch reference (tree.Node.eval), and a verdict.

Tolerances, by the lowest-precision float dtype the value flows through (`tolerance`):
fp16 2e-2, bf16 6e-2, fp32 2e-4, fp64 1e-9, relative, with the same figure times
max(1, max|expected|) as absolute slack (cancellation in a sum or a - b leaves absolute, not
relative, error). Integers and bools compare exactly; their values only ever depend on exact
float values (see tree.py), so there is no tolerance to give.
"""
from __future__ import annotations

import itertools
import linecache

import torch

import newt
from newt import dtypes as D

from . import tree
from .gen import Case

TOL = {D.float16: 2e-2, D.bfloat16: 6e-2, D.float32: 2e-4, D.float64: 1e-9}
_ids = itertools.count()
_LOADS = {"MN": ("rm * N + rn", "mask"), "M1": ("rm", "mm"), "1N": ("rn", "mn")}


def source(case: Case) -> str:
    """The kernel text of `case`."""
    em = Emitter()
    size = ": nl.constexpr" if case.const_sizes else ""
    params = ([n for n, *_ in case.inputs] + [n for n, *_ in case.scalars]
              + [n + size for n, _ in case.counts] + ["out", "M" + size, "N" + size]
              + [f"{n}: nl.constexpr" for n, _ in case.flags]
              + ["BM: nl.constexpr", "BN: nl.constexpr"])
    em.line("rm = nl.arange(0, BM)[:, None]")
    em.line("rn = nl.arange(0, BN)[None, :]")
    em.line("mm = rm < M")
    em.line("mn = rn < N")
    em.line("mask = mm & mn")
    for name, dt, shape, _ in case.inputs:
        off, m = _LOADS[shape]
        other = "True" if dt.is_bool() else ("1.0" if dt.is_floating() else "1")
        em.line(f"{name} = nl.load({name}_ptr + {off}, mask={m}, other={other})")
    r = case.root.emit(em)
    if case.root.shape != "MN":
        r = em.tmp(f"nl.broadcast_to({r}, (BM, BN))")
    em.line(f"nl.store(out + rm * N + rn, {r}, mask=mask)")
    params = [p + "_ptr" if p.startswith("x") else p for p in params]
    head = ["import newt", "import newt.language as nl", "", "", "@newt.jit",
            f"def fuzz_kernel({', '.join(params)}):"]
    return "\n".join(head + em.lines) + "\n"


class Emitter:
    """Collects the statements of the kernel body; every node value gets its own name."""

    def __init__(self):
        self.lines, self.indent, self.n = [], 1, 0

    def fresh(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def line(self, s: str):
        self.lines.append("    " * self.indent + s)

    def tmp(self, expr: str) -> str:
        v = self.fresh()
        self.line(f"{v} = {expr}")
        return v

    def block(self, head: str):
        self.line(head)
        return _Indent(self)


class _Indent:
    def __init__(self, em):
        self.em = em

    def __enter__(self):
        self.em.indent += 1

    def __exit__(self, *exc):
        self.em.indent -= 1


def load_kernel(src: str):
    """Exec `src` under a fresh file name registered in linecache; returns the JITFunction."""
    filename = f"<newt-fuzz-{next(_ids)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": f"newt_fuzz_{next(_ids)}"}
    exec(compile(src, filename, "exec"), ns)
    return ns["fuzz_kernel"]


def _rand_input(dt, shape, small, g):
    if dt.is_bool():
        return torch.rand(shape, generator=g) < 0.5
    if dt.is_floating():
        mag = torch.rand(shape, generator=g, dtype=torch.float64) * 3.75 + 0.25
        sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)
        return (mag * sign).to(dt.to_torch())
    if small:
        lo, hi = (1, 10) if dt.kind == "uint" else (-9, 10)
    else:
        lo, hi = (0, 2 ** dt.bits) if dt.kind == "uint" else (-2 ** (dt.bits - 1), 2 ** (dt.bits - 1))
        lo, hi = max(lo, -2 ** 63), min(hi, 2 ** 63 - 1)
    v = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)
    if dt is D.uint64 and not small:   # the upper half of the range too
        v = v ^ torch.where(torch.rand(shape, generator=g) < 0.5, tree.MIN64, 0)
    v = torch.where(v == 0, torch.ones_like(v), v)
    return tree.to_tensor(v, dt)


def inputs(case: Case, device):
    """(kernel keyword arguments, reference environment)."""
    g = torch.Generator().manual_seed(case.seed)
    kwargs, env = {}, {"M": case.M, "N": case.N, "BM": case.BM, "BN": case.BN}
    for name, dt, shape, small in case.inputs:
        t = _rand_input(dt, tree.SHAPE[shape](case.M, case.N), small, g)
        kwargs[name + "_ptr"] = t.to(device)
        env[name] = tree.from_tensor(t, dt)
    for name, dt, value in case.scalars:
        kwargs[name] = value
        env[name] = torch.tensor(value, dtype=torch.float32 if dt.is_floating() else torch.int64)
    for name, value in case.counts:
        kwargs[name] = env[name] = value
    kwargs.update(dict(case.flags), M=case.M, N=case.N, BM=case.BM, BN=case.BN)
    return kwargs, env


def poison(case: Case, device):
    dt = case.out_dt
    shape = (case.M, case.N)
    if dt.is_floating():
        return torch.full(shape, float("nan"), dtype=dt.to_torch(), device=device)
    if dt.is_bool():
        return torch.ones(shape, dtype=torch.bool, device=device)
    return tree.to_tensor(torch.full(shape, 0x5A5A5A5A5A5A5A5A & ((1 << (dt.bits - 1)) - 1)),
                          dt).to(device)


def expected(case: Case, env) -> torch.Tensor:
    v = case.root.eval(env)
    return tree.to_tensor(v.expand(case.M, case.N), case.out_dt).contiguous()


def run(case: Case, kernel, device) -> torch.Tensor:
    """Launch `kernel` (from load_kernel) on `device`; returns the output on the CPU."""
    kwargs, _ = inputs(case, device)
    out = poison(case, device)
    kernel[(1,)](**kwargs, out=out, num_warps=case.num_warps)
    return out.cpu()


def signature(case: Case):
    """(signature, constexprs) for newt.compiler.compile."""
    sig = {f"{n}_ptr": D.pointer_type(dt) for n, dt, *_ in case.inputs}
    sig.update({n: dt for n, dt, _ in case.scalars})
    sig["out"] = D.pointer_type(case.out_dt)
    sizes = dict(case.counts, M=case.M, N=case.N)
    if case.const_sizes:
        return sig, dict(case.flags, BM=case.BM, BN=case.BN, **sizes)
    sig.update({n: D.int32 for n in sizes})
    return sig, dict(case.flags, BM=case.BM, BN=case.BN)


def tolerance(case: Case) -> float:
    dts = case.root.float_dtypes(inexact_only=True)
    if case.out_dt.is_floating():
        dts.add(case.out_dt)
    return max((TOL[d] for d in dts), default=0.0)


def compare(actual: torch.Tensor, want: torch.Tensor, case: Case) -> str | None:
    """None if `actual` matches `want`, else a description of the first differences."""
    if case.out_dt.is_floating():
        a, e = actual.double(), want.double()
        tol = tolerance(case)
        slack = tol * max(1.0, float(e.abs().max()))
        bad = ~(((a - e).abs() <= slack + tol * e.abs()) | (a == e))
    else:
        a, e = tree.from_tensor(actual, case.out_dt), tree.from_tensor(want, case.out_dt)
        bad = a != e
    if not bool(bad.any()):
        return None
    idx = bad.nonzero()[:4].tolist()
    pairs = ", ".join(f"[{i},{j}] got {a[i, j].item()} expected {e[i, j].item()}"
                      for i, j in idx)
    return f"{int(bad.sum())} of {bad.numel()} elements differ: {pairs}"


def run_emulated(case: Case, kernel, timeout: float = 120.0) -> torch.Tensor:
    """Run the kernel's generated CUDA C++ on the CPU (tests/test_codegen_emulator.py) in a
    forked child, so that a crash of the emulated code (e.g. SIGFPE from an integer division
    by zero in padding lanes, harmless on a GPU) is reported instead of killing the caller."""
    import os
    import signal
    import tempfile
    import time
    import test_codegen_emulator as emu
    kwargs, _ = inputs(case, "cpu")
    out = poison(case, "cpu")
    with tempfile.NamedTemporaryFile(suffix=".pt") as f:
        pid = os.fork()
        if pid == 0:  # child: emulate, save the output, never return into the caller
            code = 1
            try:
                emu.emulate(kernel, (1,), **kwargs, out=out, num_warps=case.num_warps)
                torch.save(out, f.name)
                code = 0
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise RuntimeError(f"emulation took more than {timeout:.0f} s")
            time.sleep(0.02)
        if os.WIFSIGNALED(status):
            raise RuntimeError("emulated kernel crashed with "
                               f"{signal.Signals(os.WTERMSIG(status)).name}")
        if os.WEXITSTATUS(status) != 0:
            raise RuntimeError("emulation failed (see stderr)")
        return torch.load(f.name)
