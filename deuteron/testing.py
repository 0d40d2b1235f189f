"""Checking and timing kernels the way Helion's examples do: `run_example`, `DEVICE`,
`HALF_DTYPE`, `LONG_INT_TYPE`, `code_and_output`.

Sits beside the pipeline, not in it: an example calls `run_example(kernel, baseline, args)`,
which runs every kernel and baseline on the same inputs, checks each against the first
baseline (and, with bwd=True, their gradients), then times them all with newt.testing.do_bench
on a GPU and prints a small table. Without a GPU, DEVICE is the CPU, kernels run on newt's
interpreter, and the timing is skipped (interpreter timings say nothing about a GPU).
"""
from __future__ import annotations

import sys

import torch

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
HALF_DTYPE = torch.float16       # Helion picks bfloat16 only on TPUs
LONG_INT_TYPE = torch.int64


def _tensors(result) -> list:
    """The tensors of a result (a tensor, or a tuple/list of tensors and other values), in
    order; non-tensor members (None, numbers) are skipped."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _tensors(r)]
    return []


def _clone(value):
    """A fresh copy of an argument, so a kernel that writes its inputs cannot change what the
    next one sees; a leaf that requires grad stays a leaf that requires grad."""
    if isinstance(value, torch.Tensor):
        out = value.detach().clone()
        return out.requires_grad_(value.requires_grad)
    if isinstance(value, (tuple, list)):
        return type(value)(_clone(v) for v in value)
    return value


def _grad_leaves(args) -> list:
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def _check(name, got, want, rtol, atol, what="output"):
    if len(got) != len(want):
        raise AssertionError(f"{name}: {len(got)} {what} tensors, the baseline has {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(
            g.detach().to(torch.float32), w.detach().to(torch.float32), rtol=rtol, atol=atol,
            msg=lambda m, i=i: f"{name}: {what} {i} differs from the baseline\n{m}")


def _gradients(fn, args, grad_out):
    """Run fn on fresh copies of args, backpropagate grad_out from its first output, and
    return the gradients of the arguments that require grad."""
    fresh = [_clone(a) for a in args]
    out = _tensors(fn(*fresh))[0]
    out.backward(grad_out)
    return [a.grad if a.grad is not None else torch.zeros_like(a) for a in _grad_leaves(fresh)]


def run_example(kernel_fn, baseline_fn, args, kernel_name="helion", baseline_name="torch",
                rtol=1e-2, atol=1e-1, bwd=False, **ignored):
    """Check every kernel (a function, or {name: function}) against the first baseline (same
    forms) on `args`, within rtol/atol; with bwd=True also the gradients of the arguments that
    require grad, from one random output gradient. Then, on a GPU, time all of them and print
    a table; returns {name: milliseconds} ({} when timing is skipped). Helion's other keywords
    (max_mismatch_pct, trace_path, ...) are accepted and have no effect."""
    kernels = dict(kernel_fn) if isinstance(kernel_fn, dict) else {kernel_name: kernel_fn}
    baselines = (dict(baseline_fn) if isinstance(baseline_fn, dict)
                 else {baseline_name: baseline_fn})
    everyone = {**kernels, **baselines}
    first, reference = next(iter(baselines.items()))
    args = tuple(args)
    want = [t.detach().clone() for t in _tensors(reference(*[_clone(a) for a in args]))]
    for name, fn in everyone.items():
        if name != first:
            print(f"Testing {name} correctness...", file=sys.stderr)
            _check(name, _tensors(fn(*[_clone(a) for a in args])), want, rtol, atol)
    if bwd:
        if not _grad_leaves(args):
            raise AssertionError("run_example(bwd=True): no argument requires grad")
        probe = _tensors(reference(*[_clone(a) for a in args]))[0]
        grad_out = torch.randn_like(probe)
        want_grads = _gradients(reference, args, grad_out)
        for name, fn in everyone.items():
            if name != first:
                _check(name, _gradients(fn, args, grad_out), want_grads, rtol, atol,
                       what="gradient")
    return _time_all(everyone, args, first)


def _time_all(everyone, args, first) -> dict:
    if DEVICE.type != "cuda":
        print("all implementations agree with the baseline; timing skipped (no GPU: kernels "
              "ran on newt's interpreter)")
        return {}
    from newt.testing import do_bench
    frozen = [_clone(a) for a in args]
    times = {name: do_bench(lambda fn=fn: fn(*frozen)) for name, fn in everyone.items()}
    width = max(len("implementation"), *(len(n) for n in times))
    print(f"\n{'implementation'.ljust(width)}  time (ms)  speedup vs {first}")
    for name, ms in times.items():
        print(f"{name.ljust(width)}  {ms:9.4f}  {times[first] / ms:6.2f}x")
    return times


def code_and_output(kernel, args, **config):
    """(the generated newt source, the kernel's output) for `args`; keywords are a
    deuteron.Config's (block_sizes=..., num_warps=...) and pin the config of this run."""
    from .config import Config
    args = tuple(args)
    source = kernel.to_newt_source(*args)
    if not config:
        return source, kernel(*args)
    return source, kernel.run(args, {}, Config(**config))


__all__ = ["DEVICE", "HALF_DTYPE", "LONG_INT_TYPE", "run_example", "code_and_output"]
