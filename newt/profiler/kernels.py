"""Kernel records of a profiling session started with `hook="triton"` (proton's hook).

Sits beside the launch, not on its fast path: `kernel.run(...)` (what an autotuner or
`@heuristics` calls for every launch) asks `newt.options.flags.launch_hook` once; this module
sets it while some open session records kernels, and clears it after. A direct
`kernel[grid](...)` launch does only lookups and is not recorded; put it in a `scope`.

Each recorded launch is a scope of its own: named after the kernel, or, when the kernel was
declared `@newt.jit(launch_metadata=fn)`, by `fn(grid, kernel, args)` (Triton's signature: the
grid as a 3-tuple, an object with the kernel's `.name`, the launch's arguments by name with the
constexprs) whose dict gives `"name"` and the metrics (`flops16`, `bytes`, ...) summed under it.
"""
from __future__ import annotations

import types


def watch(on: bool):
    """Install (or remove) the launch hook `record` in newt.options.flags."""
    from .. import options
    options.flags.launch_hook = record if on else None


def _metadata(jf, grid, args, kwargs):
    """(name, metrics) of one launch, from the kernel's launch_metadata when it has one."""
    fn = getattr(jf, "launch_metadata", None)
    if fn is None:
        return jf.__name__, {}
    kw = {k: v for k, v in kwargs.items() if k in jf.arg_names}
    bound = jf.signature.bind_partial(*args, **kw)
    bound.apply_defaults()
    named = dict(bound.arguments)
    g = grid(named) if callable(grid) else grid
    g = tuple(g) + (1,) * (3 - len(tuple(g)))
    md = dict(fn(g, types.SimpleNamespace(name=jf.__name__), named) or {})
    name = str(md.pop("name", jf.__name__))
    return name, {k: v for k, v in md.items() if isinstance(v, (int, float))}


def record(jf, grid, args, kwargs, launch):
    """Run `launch()` (the launch itself) inside a kernel scope named by _metadata."""
    from . import enter_scope, exit_scope
    name, metrics = _metadata(jf, grid, args, kwargs)
    enter_scope(name, metrics, kernel=True)
    try:
        return launch()
    finally:
        exit_scope(name, kernel=True)
