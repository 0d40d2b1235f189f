"""A model step under torch.compile with and without newt's and deuteron's kernels: graph
breaks (torch._dynamo.explain) and the time per step, under the default inductor backend and
under mode="reduce-overhead" (CUDA graphs).

    PYTHONPATH=. python benchmarks/compiled_step.py          # GPU: counts, timings, and
                                                             # whether reduce-overhead kept
                                                             # its CUDA graphs
    PYTHONPATH=. python benchmarks/compiled_step.py --cpu    # no GPU: graph-break counts only
                                                             # (interpreter, aot_eager)

The step: `rms_norm(silu(x @ w1 + b1)) @ w2 + x`, forward only, fp32. Three versions of it:
torch ops only; the bias + SiLU as the newt kernel of examples/09_data_parallel.py; and the
row normalization as that example's deuteron kernel too. Each version must give torch's result.
"CUDA graphs" says whether inductor ran the reduce-overhead step as a CUDA graph ("no" when it
skipped them, e.g. for a graph input the step mutates: a launch declares mutated only the
tensors its kernel writes, newt/launch_writes.py).
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import newt  # noqa: E402

ex = common.load_file(os.path.join(ROOT, "examples", "09_data_parallel.py"), "newt_example_dp")


def bias_silu_newt(h, b):
    out = torch.empty_like(h)
    ex.bias_silu_kernel[(newt.cdiv(h.numel(), 1024),)](h, b, out, h.shape[1], h.numel(),
                                                       BLOCK=1024)
    return out


def step_torch(x, w1, b1, w2):
    z = x @ w1 + b1
    return ex._rms_norm_torch(z * torch.sigmoid(z)) @ w2 + x


def step_newt(x, w1, b1, w2):
    return ex._rms_norm_torch(bias_silu_newt(x @ w1, b1)) @ w2 + x


def step_newt_deuteron(x, w1, b1, w2):
    return ex.rms_norm(bias_silu_newt(x @ w1, b1)) @ w2 + x


STEPS = {"torch only": step_torch, "newt bias+SiLU": step_newt,
         "newt + deuteron rms_norm": step_newt_deuteron}


def cudagraph_skips() -> int:
    from torch._dynamo.utils import counters
    return counters["inductor"]["cudagraph_skips"]


def graph_breaks(fn, args) -> int:
    torch._dynamo.reset()
    return torch._dynamo.explain(fn)(*args).graph_break_count


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cpu = "--cpu" in argv or not torch.cuda.is_available()
    if cpu:
        newt.options.flags.interpret = True
    dev = "cpu" if cpu else "cuda"
    m, d, h = (8, 16, 32) if cpu else (8192, 1024, 1024)
    torch.manual_seed(0)
    args = (torch.randn(m, d, device=dev), torch.randn(d, h, device=dev) / d ** 0.5,
            torch.randn(h, device=dev) * 0.1, torch.randn(h, d, device=dev) / h ** 0.5)
    want = step_torch(*args)
    modes = [("aot_eager", None)] if cpu else [("inductor", None), ("inductor", "reduce-overhead")]
    print(f"{'step':28s} {'eager':>10s}" + "".join(f" {b + (' ' + m if m else ''):>28s}"
                                                  for b, m in modes)
          + "   graph breaks" + ("" if cpu else "   CUDA graphs"))
    for name, fn in STEPS.items():
        breaks = graph_breaks(fn, args)
        cells = []
        eager_ms = None if cpu else newt.testing.do_bench(lambda: fn(*args))
        graphs = ""
        for backend, mode in modes:
            torch._dynamo.reset()
            skips = cudagraph_skips()
            compiled = torch.compile(fn, fullgraph=True, backend=backend, mode=mode)
            for _ in range(3):     # reduce-overhead: warm-up, record, replay
                got = compiled(*args)
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
            if mode == "reduce-overhead":
                graphs = "no (skipped)" if cudagraph_skips() > skips else "yes"
            cells.append("ok" if cpu else f"{newt.testing.do_bench(lambda: compiled(*args)):.3f} ms")
        print(f"{name:28s} {'-' if eager_ms is None else f'{eager_ms:.3f} ms':>10s}"
              + "".join(f" {c:>28s}" for c in cells) + f"   {breaks:>12d}   {graphs}")


if __name__ == "__main__":
    main()
