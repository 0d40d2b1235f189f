"""torch.compile support for deuteron kernels: a call traces as the custom op `deuteron::call`.

Sits beside kernel.py, never on its path: dynamo cannot trace a call (host code runs the user's
function with a tracer, tunes, compiles, launches), so deuteron/__init__.py points dynamo at
`traced_call` instead of Kernel.__call__ (newt/compile_hooks.py says how). One op serves every
kernel:

    deuteron::call(key, tensors, ints, floats) -> Tensor[]

`key` names a registry entry made at trace time (the kernel by its newt.compile_names name, where
each argument goes, the constant arguments, which tensors it may write). A kernel whose function
may write one of its arguments (`x[t] = ...`: arg_writes.py reads it from the source) traces as
`deuteron::call_inplace(key, tensors, written, ints, floats)` instead, only the tensors it may
write declared mutated (so a graph input it only reads is not copied back into, and
mode="reduce-overhead" keeps its CUDA graph): torch functionalizes a mutating custom op only when
it returns nothing, so such a kernel may return its arguments but no new tensors. The real
implementation calls the kernel as eager code does. The fake one runs the kernel's eager oracle
`k.ref` on the fake tensors: its results give the shapes, strides and dtypes of the outputs, and
which results are the input tensors themselves (an in-place kernel returning its argument). Those are handed back as the inputs; every other tensor result is a new
tensor (a result sharing an input's memory is copied: an op's outputs may not alias its inputs).
"""
from __future__ import annotations

import torch

from newt import compile_names

from .arg_writes import written_tensors

_REGISTRY: dict = {}     # key -> [kernel, layout, kwarg names, results structure or None,
#                                  indices of the tensors it may write]
_KEYS: dict = {}


@torch.compiler.assume_constant_result
def _register(kernel_name: str, layout: tuple, kwarg_names: tuple) -> str:
    spec = (kernel_name, layout, kwarg_names)
    key = _KEYS.get(spec)
    if key is None:
        key = f"{kernel_name}/{len(_REGISTRY)}"
        _KEYS[spec] = key
        writes = written_tensors(compile_names.lookup(kernel_name).fn, layout, kwarg_names)
        _REGISTRY[key] = [kernel_name, layout, kwarg_names, None, writes]
    return key


@torch.compiler.assume_constant_result
def _writes(key) -> tuple:
    """Indices of the call's tensors the kernel may write (empty: it writes none)."""
    return _REGISTRY[key][4]


@torch.compiler.assume_constant_result
def _structure(key) -> tuple:
    """The results' structure, recorded by the fake implementation when dynamo traced the op."""
    return _REGISTRY[key][3]


def _arguments(key, tensors, ints, floats):
    kernel_name, layout, kwarg_names = _REGISTRY[key][:3]
    kernel = compile_names.lookup(kernel_name)
    values = []
    for kind, v in layout:
        values.append(tensors[v] if kind == "t" else ints[v] if kind == "i" else
                      bool(ints[v]) if kind == "b" else floats[v] if kind == "f" else v)
    n = len(values) - len(kwarg_names)
    return kernel, values[:n], dict(zip(kwarg_names, values[n:]))


def _flatten(key, result, tensors):
    """(new tensors, structure) of a call's result: a tensor, a tuple / list of tensors and
    constants, or None. A structure leaf is ("out", j), ("input", i) or ("const", value)."""
    leaves = []

    def leaf(v):
        if isinstance(v, torch.Tensor):
            for i, t in enumerate(tensors):
                if v is t:
                    return ("input", i)
            leaves.append(v)
            return ("out", len(leaves) - 1)
        return ("const", v)

    if isinstance(result, (tuple, list)):
        structure = (type(result).__name__, tuple(leaf(v) for v in result))
    else:
        structure = ("one", leaf(result))
    return leaves, structure


def _run(key, tensors, ints, floats):
    kernel, args, kwargs = _arguments(key, tensors, ints, floats)
    leaves, _ = _flatten(key, kernel(*args, **kwargs), tensors)
    storages = {t.untyped_storage().data_ptr() for t in tensors}
    return [t.clone() if t.untyped_storage().data_ptr() in storages else t for t in leaves]


def _fake(key, tensors, ints, floats):
    kernel, args, kwargs = _arguments(key, tensors, ints, floats)
    leaves, structure = _flatten(key, kernel.ref(*args, **kwargs), tensors)
    _REGISTRY[key][3] = structure
    return [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
            for t in leaves]


@torch.library.custom_op("deuteron::call", mutates_args=())
def call_op(key: str, tensors: list[torch.Tensor], ints: list[int],
            floats: list[float]) -> list[torch.Tensor]:
    return _run(key, tensors, ints, floats)


@call_op.register_fake
def _call_fake(key, tensors, ints, floats):
    return _fake(key, tensors, ints, floats)


@torch.library.custom_op("deuteron::call_inplace", mutates_args=("written",))
def call_inplace_op(key: str, tensors: list[torch.Tensor], written: list[torch.Tensor],
                    ints: list[int], floats: list[float]) -> None:
    """A kernel that stores into its arguments: torch's functionalization takes a mutating op
    only when it returns nothing, so such a kernel may return its arguments, not new tensors.
    `tensors` are those it only reads, `written` those it may write."""
    if _run(key, _merged(key, tensors, written), ints, floats):
        raise TypeError(f"deuteron kernel {_REGISTRY[key][0]}: {_IN_PLACE_RESULTS}")


@call_inplace_op.register_fake
def _call_inplace_fake(key, tensors, written, ints, floats):
    if _fake(key, _merged(key, tensors, written), ints, floats):
        raise TypeError(f"deuteron kernel {_REGISTRY[key][0]}: {_IN_PLACE_RESULTS}")


def _merged(key, read: list, written: list) -> list:
    """The call's tensors in their first order, from the read and the written lists."""
    out = [None] * (len(read) + len(written))
    for j, i in enumerate(_REGISTRY[key][4]):
        out[i] = written[j]
    rest = iter(read)
    return [t if t is not None else next(rest) for t in out]


_IN_PLACE_RESULTS = ("inside torch.compile a kernel that stores into its arguments may return "
                     "only its arguments, constants or None, not new tensors (return the new "
                     "tensors from a second kernel, or pass them in as arguments)")


def _split(name, values):
    layout, tensors, ints, floats = [], [], [], []
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            for j, t in enumerate(tensors):
                if t is v:
                    break
            else:
                j = len(tensors)
                tensors.append(v)
            layout.append(("t", j))
        elif isinstance(v, bool):
            layout.append(("b", len(ints)))
            ints.append(int(v))
        elif isinstance(v, (int, torch.SymInt)):
            layout.append(("i", len(ints)))
            ints.append(v)
        elif isinstance(v, (float, torch.SymFloat)):
            layout.append(("f", len(floats)))
            floats.append(v)
        elif v is None or isinstance(v, (str, torch.dtype)):
            layout.append(("c", v))
        else:
            raise TypeError(f"deuteron kernel {name}: argument #{i} is a {type(v).__name__}; "
                            "inside torch.compile a call takes tensors, ints, floats, bools, "
                            "strings, dtypes and None")
    return tuple(layout), tensors, ints, floats


def traced_call(kernel, *args, **kwargs):
    names = tuple(kwargs)
    values = list(args)
    for n in names:
        values.append(kwargs[n])
    layout, tensors, ints, floats = _split(kernel.__name__, values)
    key = _register(kernel.compile_name, layout, names)
    writes = _writes(key)
    if writes:
        torch.ops.deuteron.call_inplace(key, [t for i, t in enumerate(tensors) if i not in writes],
                                        [tensors[i] for i in writes], ints, floats)
        outs = []
    else:
        outs = torch.ops.deuteron.call(key, tensors, ints, floats)
    kind, leaves = _structure(key)
    if kind == "one":
        return _leaf(leaves, outs, tensors)
    results = [_leaf(s, outs, tensors) for s in leaves]
    return tuple(results) if kind == "tuple" else results


def _leaf(s, outs, tensors):
    kind, v = s
    return outs[v] if kind == "out" else tensors[v] if kind == "input" else v
