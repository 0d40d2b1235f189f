"""The launch fast path: replaying recorded launches instead of re-tracing every call.

The first call with given argument metadata traces, lowers and launches as usual, and a
PlanBuilder records each launch with where its tensors came from: the i-th argument, or the
user's local variable holding it (an output allocated by host code). Later calls with equal
metadata (`plan_key`: shapes, strides, dtypes, devices, the values of non-tensor arguments, and
for a callable argument what its traced body depends on: code object, defaults and closure
values, never its id(), which Python reuses once the object is freed)
run the user function again, so host code still allocates and returns outputs, but each outer
`dt.tile` yields nothing (the body is skipped) and the recorded launch fires with this call's
tensors instead. Guards: the tile extents and every substituted tensor's shape, strides, dtype
and device must match the recording; on any mismatch this loop and the rest of the run are
traced normally and the plan is dropped. (Host values derived from tensor *data* that reach a
tile body are baked into the generated source; such kernels should not rely on this path:
pass those values as arguments instead.)
"""
from __future__ import annotations

import dataclasses
import functools
import types

import torch

from . import language, rng
from .errors import user_frame
from .ir import BlockSize
from .trace import Tracer


def _meta(t: torch.Tensor):
    return (t.shape, t.stride(), t.dtype, t.device)


def value_key(a, depth=0):
    """A hashable stand-in for one argument: equal keys trace to the same program."""
    if isinstance(a, torch.Tensor):
        return _meta(a)
    if isinstance(a, (int, float, bool, str, bytes, type(None), torch.dtype, torch.device)):
        return (type(a), a)
    if isinstance(a, (tuple, list)) and depth < 4:
        return (type(a), tuple(value_key(x, depth + 1) for x in a))
    if isinstance(a, dict) and depth < 4:
        return (dict, tuple((k, value_key(v, depth + 1)) for k, v in sorted(a.items(), key=repr)))
    if isinstance(a, types.MethodType) and depth < 4:
        return ("method", value_key(a.__func__, depth + 1), value_key(a.__self__, depth + 1))
    if isinstance(a, functools.partial) and depth < 4:
        return ("partial", value_key(a.func, depth + 1), value_key(a.args, depth + 1),
                value_key(a.keywords, depth + 1))
    code = getattr(a, "__code__", None)
    if isinstance(code, types.CodeType) and depth < 4:
        cells = tuple(value_key(c.cell_contents, depth + 1) if _filled(c) else None
                      for c in (a.__closure__ or ()))
        return ("fn", code, value_key(a.__defaults__, depth + 1),
                value_key(a.__kwdefaults__, depth + 1), cells)
    if isinstance(a, (types.BuiltinFunctionType, type)):
        return ("builtin", a)                  # immortal in practice: identity is meaning
    return _Pinned(a)


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


class _Pinned:
    """Any other object keys on identity, and the key keeps it alive: its id() cannot be
    reused by a different object while the plan exists."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _Pinned) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def plan_key(args, kwargs):
    parts = [value_key(a) for a in args]
    for k in sorted(kwargs):
        parts.append((k, value_key(kwargs[k])))
    return tuple(parts)


class _Entry:
    __slots__ = ("sizes", "launch", "slots", "metas", "n_tunable")

    def __init__(self, sizes, launch, slots, metas, n_tunable):
        self.sizes, self.launch, self.slots, self.metas, self.n_tunable = sizes, launch, slots, metas, n_tunable


class Plan:
    def __init__(self, config, entries):
        self.config, self.entries, self.valid = config, entries, True

    def replay(self, kernel, args, kwargs):
        run = _ReplayRun(self, kernel, args, kwargs)
        language._active.append(run)
        try:
            return kernel.body(*args, **kwargs)
        finally:
            if run.tracer is not None:
                run.tracer.close()
            language._active.pop()


class PlanBuilder:
    """Collects the launches of one traced run (kernel.run calls `add` after each launch)."""

    def __init__(self, config, args, kwargs):
        self.config, self.args, self.kwargs = config, args, kwargs
        self.entries, self.ok = [], True

    def add(self, prog, low, launch):
        slots, metas = [], []
        for j, (_, what) in enumerate(low.params):
            if what[0] == "seed":        # drawn again by each replay (rng.py)
                slots.append((j, ("seed", prog.index)))
                metas.append(None)
                continue
            if what[0] != "ptr" or what[1].workspace:    # deuteron's own: the launch keeps it
                continue
            t = what[1].tensor
            src = next((("arg", i) for i, a in enumerate(self.args) if a is t), None)
            src = src or next((("kwarg", k) for k, a in self.kwargs.items() if a is t), None)
            src = src or (("local", what[1].local) if what[1].local else None)
            if src is None:        # e.g. a temporary made inside the loop: cannot be found again
                self.ok = False
                return
            slots.append((j, src))
            metas.append(_meta(t))
        sizes = tuple((d.lo, d.lo + d.extent) for d in prog.grid)
        n_tunable = sum(1 for d in prog.dims if d.tunable)
        # the entry keeps no tensor of this call (each replay binds its own, _bind): a kept
        # output allocated under a CUDA-graph warm-up would stay alive in the graph's private
        # pool, which torch.compile's reduce-overhead mode rejects ("not tracked as outputs")
        kept = list(launch.args)
        for j, _ in slots:
            kept[j] = None
        launch = dataclasses.replace(launch, args=tuple(kept))
        self.entries.append(_Entry(sizes, launch, slots, metas, n_tunable))

    @property
    def plan(self):
        return Plan(self.config, self.entries)


class _ReplayRun:
    """The active run while replaying: outer dt.tile calls launch and yield nothing."""

    def __init__(self, plan, kernel, args, kwargs):
        self.plan, self.kernel, self.args, self.kwargs = plan, kernel, args, kwargs
        self.i, self.offset, self.tracer = 0, 0, None
        self.seeds = None          # rng.Seeds of this call, made at its first seed slot

    def tile(self, begins, ends, block_size, multi, index_only=False):
        if self.tracer is None:
            entry = self.plan.entries[self.i] if self.i < len(self.plan.entries) else None
            self.i += 1
            launch = entry and self._bind(entry, begins, ends)
            if launch is not None:
                launch()
                self.offset += entry.n_tunable
                return iter(())
            self.plan.valid = False          # fall back: trace this loop and the rest
            self.tracer = Tracer(self.kernel.fn.__name__, self.kernel._loop_vars,
                                 on_program=self.kernel.launcher(self.plan.config))
            self.tracer.config = self.plan.config
            self.tracer.tunable_offset = self.offset
            self.tracer.program_offset = self.i - 1
            if self.seeds is not None:     # launches before this one drew the call's base
                self.tracer.seeds = self.seeds
        return self.tracer.tile(begins, ends, block_size, multi, index_only)

    def __getattr__(self, name):
        # what a loop body calls (hl.load, hl.jagged_tile, hl.associative_scan, ...): reached
        # only once a loop fell back to tracing
        tracer = self.__dict__.get("tracer")
        if tracer is None:
            raise AttributeError(name)
        return getattr(tracer, name)

    @property
    def config(self):
        return self.plan.config

    def register_block_size(self, lo, hi=None):
        if self.tracer is not None:
            return self.tracer.register_block_size(lo, hi)
        lo, hi = (1, int(lo)) if hi is None else (int(lo), int(hi))
        index, self.offset = self.offset, self.offset + 1
        return BlockSize(self.plan.config.block_sizes[index], index, lo, hi)

    def full(self, shape, value, dtype):
        if self.tracer is None:
            raise RuntimeError("dt.zeros/dt.full outside a tile loop")
        return self.tracer.full(shape, value, dtype)

    def _bind(self, entry, begins, ends):
        if not all(isinstance(b, int) and isinstance(e, int) for b, e in zip(begins, ends)):
            return None
        if tuple(zip(begins, ends)) != entry.sizes:
            return None
        frame_locals = None
        args = list(entry.launch.args)
        for (j, (kind, where)), meta in zip(entry.slots, entry.metas):
            if kind == "arg":              # plan_key already matched the arguments' metadata
                args[j] = self.args[where]
                continue
            if kind == "seed":
                self.seeds = self.seeds or rng.Seeds()
                args[j] = self.seeds.of(where)
                continue
            if kind == "kwarg":
                t = self.kwargs.get(where)
            else:
                if frame_locals is None:
                    frame_locals = user_frame().f_locals
                t = frame_locals.get(where)
            if not isinstance(t, torch.Tensor) or _meta(t) != meta:
                return None
            args[j] = t
        L = entry.launch
        return type(L)(L.jitfn, L.grid, tuple(args), L.kwargs, L.name, L.source)
