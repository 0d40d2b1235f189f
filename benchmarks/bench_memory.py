"""Memory-bound rows of TARGETS.md: vector add, softmax and layernorm forward (plus the
silu-and-mul example), newt vs Triton (same kernel source, `nl` -> `tl`) vs torch, in one process.

Every provider's output is poisoned with NaN, computed once and compared with torch before it is
timed; a provider that fails the check is reported, not timed. Times are medians of CUDA-event
timings with an L2 flush before each (newt.testing.do_bench, Triton's method); GB/s counts the
bytes read and written once. Also prints newt.testing.do_bench next to triton.testing.do_bench
on the same kernel, to show the two timers agree.

    python benchmarks/bench_memory.py            # or through benchmarks/run_all.py
"""
from __future__ import annotations

import functools
import sys

import torch

import common
from newt.testing import assert_close, do_bench

_median = functools.partial(do_bench, return_mode="median")   # the figures this table reports

NAN = float("nan")


# Problem sizes: "full" is TARGETS.md; "quick" a smoke run on a GPU; "tiny" for the CPU
# interpreters (tests exercise this file's logic there, with a fake timer).
SIZES = {
    "full": dict(add=1 << 27, softmax=(32768, 4096), layernorm=(32768, 4096), silu=(8192, 8192),
                 ln1500=1023),
    "quick": dict(add=1 << 22, softmax=(4096, 4096), layernorm=(4096, 4096), silu=(2048, 8192),
                  ln1500=1023),
    "tiny": dict(add=5003, softmax=(3, 781), layernorm=(2, 4096), silu=(3, 1500), ln1500=2),
}


def _workloads(sizes, dev):
    """One dict per workload: name, nbytes, make() -> inputs, out (key of the output),
    kernel(k, inputs), torch(inputs), ref(inputs), optional target_ratio and tol."""
    n_add, sm, ln, sl = sizes["add"], sizes["softmax"], sizes["layernorm"], sizes["silu"]

    def add_inputs():
        x, y = torch.randn(n_add, device=dev), torch.randn(n_add, device=dev)
        return dict(x=x, y=y, out=torch.full_like(x, NAN))

    def sm_inputs():
        x = torch.randn(*sm, device=dev)
        return dict(x=x, out=torch.full_like(x, NAN))

    def ln_inputs():
        m, n = ln
        x = torch.randn(m, n, device=dev).half()
        return dict(x=x, w=torch.randn(n, device=dev).half(),
                    b=torch.randn(n, device=dev).half(), y=torch.full_like(x, NAN),
                    mean=torch.full((m,), NAN, device=dev),
                    rstd=torch.full((m,), NAN, device=dev))

    def sl_inputs():
        x = torch.randn(sl[0], 2 * sl[1], device=dev).half()
        return dict(x=x, out=torch.full((sl[0], sl[1]), NAN, device=dev, dtype=torch.half))

    ln_ref = lambda d: torch.nn.functional.layer_norm(  # noqa: E731
        d["x"], (d["x"].shape[1],), d["w"], d["b"], 1e-5)
    return [
        dict(name=f"vector add fp32 n={_pow2(n_add)}", nbytes=3 * n_add * 4,
             make=add_inputs, out="out", target_ratio=1.0,
             kernel=lambda k, d: common.launch_add(k, d["x"], d["y"], d["out"]),
             torch=lambda d: torch.add(d["x"], d["y"], out=d["out"]),
             ref=lambda d: d["x"] + d["y"]),
        dict(name=f"softmax fp32 {sm[0]}x{sm[1]}", nbytes=2 * sm[0] * sm[1] * 4,
             make=sm_inputs, out="out", target_ratio=1.0,
             kernel=lambda k, d: common.launch_softmax(k, d["x"], d["out"]),
             torch=lambda d: torch.softmax(d["x"], dim=1),
             ref=lambda d: torch.softmax(d["x"], dim=1)),
        dict(name=f"layernorm fwd fp16 {ln[0]}x{ln[1]}",
             nbytes=2 * ln[0] * ln[1] * 2 + 4 * ln[1] + 8 * ln[0],
             make=ln_inputs, out="y", target_ratio=1.0, tol=1e-2,
             kernel=lambda k, d: common.launch_layernorm(
                 k, d["x"], d["w"], d["b"], d["y"], d["mean"], d["rstd"], block=4096),
             torch=ln_ref, ref=ln_ref),
        dict(name=f"silu-and-mul fp16 {sl[0]}x{sl[1]}", nbytes=3 * sl[0] * sl[1] * 2,
             make=sl_inputs, out="out",
             kernel=lambda k, d: common.launch_silu(k, d["x"], d["out"]),
             torch=lambda d: (torch.nn.functional.silu(d["x"][:, :sl[1]]) * d["x"][:, sl[1]:]),
             ref=lambda d: (torch.nn.functional.silu(d["x"][:, :sl[1]].float())
                            * d["x"][:, sl[1]:].float()).half()),
    ]


def _pow2(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)


def _check_layernorm_1500(kernel, m, dev):
    """N = 1,500 with the benchmark's BLOCK 4096: masking and the variance of padded rows."""
    n = 1500
    x = torch.randn(m, n, device=dev).half()
    w, b = torch.randn(n, device=dev).half(), torch.randn(n, device=dev).half()
    y = torch.full_like(x, NAN)
    mean = torch.empty(m, device=dev)
    rstd = torch.empty(m, device=dev)
    common.launch_layernorm(kernel, x, w, b, y, mean, rstd, block=4096)
    ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5).half()
    assert_close(y, ref, atol=1e-2, rtol=1e-2, msg="layernorm N=1500")


def run(out_dir=None, quick=False):
    """Rows for run_all.py (see its docstring for the row format)."""
    return measure(SIZES["quick" if quick else "full"])


def measure(sizes, dev="cuda", bench=_median, providers=None, sync=torch.cuda.synchronize):
    """Check then time every workload for every provider; `providers` maps a name to a
    {workload key: kernel} dict (default: newt, and Triton when importable)."""
    errors = {}
    if providers is None:
        providers = {"newt": common.kernels("newt")}
        if common.have_triton():
            try:
                providers["triton"] = common.kernels("triton")
            except Exception as exc:
                errors["triton"] = f"twin kernels failed: {type(exc).__name__}: {exc}"
    rows = []
    for w in _workloads(sizes, dev):
        row = dict(bench="memory", workload=w["name"], unit="GB/s", higher_is_better=True,
                   newt=None, triton=None, torch=None, errors=dict(errors))
        if "target_ratio" in w:
            row["target_ratio"] = w["target_ratio"]
        d = w["make"]()
        expected = w["ref"](d)
        key = _key(w)
        calls = {p: (lambda k=ks[key]: w["kernel"](k, d)) for p, ks in providers.items()}
        calls["torch"] = lambda: w["torch"](d)
        for p, fn in list(calls.items()):          # every result checked before any timing
            if p == "torch":
                continue
            try:
                d[w["out"]].fill_(NAN)
                fn()
                sync()
                assert_close(d[w["out"]], expected, atol=w.get("tol"), rtol=w.get("tol"),
                             msg=f"{p} {w['name']}")
                if key == "layernorm":
                    _check_layernorm_1500(providers[p]["layernorm"], sizes["ln1500"], dev)
            except Exception as exc:  # report and go on: one broken provider hides nothing
                row["errors"][p] = f"{type(exc).__name__}: {str(exc)[:400]}"
                del calls[p]
        ms, notes = common.timed_in_rounds(calls, lambda fn: (bench(fn), None))
        row["errors"].update(notes)
        for p, t in ms.items():
            row[p] = common.gbps(w["nbytes"], t)
        rows.append(row)
        del d, expected, calls  # the lambdas hold the inputs too
        if dev == "cuda":
            torch.cuda.empty_cache()
    if dev == "cuda":
        rows.append(_timer_agreement())
    return rows


def _key(w) -> str:
    return {"vector": "add", "softmax": "softmax", "layernorm": "layernorm",
            "silu-and-mul": "silu"}[w["name"].split()[0]]


def _timer_agreement():
    """newt.testing.do_bench vs triton.testing.do_bench timing one torch kernel (us)."""
    row = dict(bench="memory", workload="do_bench agreement: torch.mul 64 MB (us)", unit="us",
               higher_is_better=False, newt=None, triton=None, torch=None, errors={})
    x = torch.randn(1 << 24, device="cuda")
    y = torch.empty_like(x)
    fn = lambda: torch.mul(x, 2.0, out=y)  # noqa: E731
    row["newt"] = do_bench(fn, return_mode="median") * 1e3
    if common.have_triton():
        import triton.testing
        row["triton"] = triton.testing.do_bench(fn, return_mode="median") * 1e3
    return row


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        vals = "  ".join(f"{p}={r[p]:.1f}" for p in ("newt", "triton", "torch") if r[p])
        print(f"{r['workload']:42s} {vals} {r['unit']}", *r["errors"].items())
