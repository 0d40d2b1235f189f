"""Which tensor arguments of one launch the kernel may write: asked by torch.compile support
(torch_ops.py) at trace time, once per launch spelling, never by a plain launch.

The kernel's IR is built by the frontend for the launch's constexprs and argument types (no
specialization: that only folds values, never adds a store) and newt/ir/writes.py reads from it
which pointer parameters reach a store or an atomic. An @autotune kernel writes what any of its
configs writes, plus its reset_to_zero and restore_value arguments. Where the answer is not
known (the IR cannot be built, a tuning hook or an @heuristics value that runs user code on the
arguments), every tensor argument is taken as written: declared mutated, as a launch was before.
"""
from __future__ import annotations

from . import dtypes

_SCALARS = {"i": "i32", "b": "i1", "f": "fp32"}


def written_tensors(obj, layout: tuple, constexprs: dict, tensor_dtypes: tuple) -> tuple:
    """Indices into the launch's tensors of those the kernel may write. `layout` holds one
    (parameter name, kind, index) per argument as torch_ops.py builds it."""
    every = tuple(range(len(tensor_dtypes)))
    try:
        names = _written_names(obj, layout, constexprs, tensor_dtypes)
    except Exception:   # noqa: BLE001 -- no IR, no answer: the launch itself reports the error
        return every
    if names is None:
        return every
    return tuple(sorted({i for n, kind, i in layout if kind == "t" and n in names}))


def _written_names(obj, layout, constexprs, tensor_dtypes):
    from .autotune import Autotuner
    from .jit import JITFunction
    if isinstance(obj, JITFunction):
        return _of_kernel(obj, layout, constexprs, tensor_dtypes)
    if not (isinstance(obj, Autotuner) and isinstance(obj.fn, JITFunction)):
        return None       # @heuristics: its values come from the arguments, at run time
    if obj.user_pre_hook or obj.user_post_hook or any(c.pre_hook for c in obj.configs):
        return None       # a hook may write any argument
    names = set(obj.reset_to_zero) | set(obj.restore_value)
    for c in obj.configs:
        names |= _of_kernel(obj.fn, layout, {**constexprs, **c.kwargs}, tensor_dtypes)
    return names


def _of_kernel(jf, layout, constexprs, tensor_dtypes) -> frozenset:
    from .frontend import build_ir
    from .ir.writes import written_params
    signature, constexprs = {}, dict(constexprs)
    for name, kind, i in layout:
        if kind == "t":
            signature[name] = "*" + dtypes.from_torch(tensor_dtypes[i]).short
        elif kind == "n":
            constexprs[name] = None    # None is a compile-time value, as at a launch
        else:
            signature[name] = _SCALARS[kind]
    return written_params(build_ir(jf, signature, constexprs))
