"""torch.compile support: what dynamo traces in place of a `kernel[grid](...)` launch.

Sits beside the launch path, never on it. A launch is host code dynamo cannot trace (ctypes,
data_ptr, struct packing), so compile_hooks.py points dynamo at `traced_getitem` instead of
JITFunction.__getitem__ (and at `traced_run` instead of JITFunction.run, `traced_wrapper` for
@autotune / @heuristics kernels). The traced code turns the launch into one call of the custom op
`newt::launch(key, tensors, written, ints, floats, grid)`:

    key       a string naming a registry entry made at trace time (`_register`, a constant to
              dynamo): the kernel (by its compile_names name: traced code hands no object to
              such a function), the parameter layout, the constexprs, num_warps, num_stages,
              and which tensor arguments the kernel writes
    tensors   the tensor arguments the kernel only reads, each once
    written   the tensor arguments it may write (stores, atomics), each once; only these are
              declared mutated. The kernel's IR, built at trace time, says which
              (launch_writes.py); where it cannot be built, every tensor counts as written.
    ints      int and bool arguments (SymInts under dynamic shapes)
    floats    float arguments
    grid      the grid, evaluated at trace time (a grid callable sees the same meta dict as in
              eager mode), or empty when the launch object evaluates it (@autotune: the grid
              depends on the config chosen at run time)

Its real implementation launches through the ordinary path (`kernel[grid](**arguments)`), so
the compiled graph, inductor's generated code and CUDA-graph replays (mode="reduce-overhead")
all launch exactly as eager code does. Its fake implementation does nothing: a launch returns
nothing and writes in place.

Why the split: torch functionalizes a mutating op, and a graph input it mutates is copied back
into after the graph; inductor then runs that graph without CUDA graphs ("skipping cudagraphs
due to mutated inputs"). Declared precisely, a launch that reads the graph's inputs and writes
tensors allocated inside the compiled function mutates no input, and reduce-overhead keeps its
CUDA graph; a launch that does write an input is treated as torch treats any custom op that
mutates its input. A tensor the kernel only reads that shares memory with one it writes (two
views of one buffer) stays on the read side: where inductor must write a copy (the old contents
are still needed later), the kernel reads the old contents through that view, as if all its
reads came before its writes. This module imports torch._dynamo: it is loaded only while dynamo
traces, never by a plain launch.
"""
from __future__ import annotations

import torch

from . import compile_names, dtypes
from .errors import LaunchError
from .launch_writes import written_tensors

_REGISTRY: dict = {}    # key -> (launchable, layout, constexprs, num_warps, num_stages, grid,
#                           indices of the tensors it writes)
_KEYS: dict = {}        # (id of the launchable, spec) -> key


@torch.compiler.assume_constant_result
def _register(obj_name: str, layout: tuple, names: tuple, num_warps, num_stages, grid,
              tensor_dtypes: tuple, *values) -> str:
    """The registry key of one launch spelling; runs for real at trace time (dynamo records the
    returned string as a constant), so the graph holds only the string. The constexprs come as
    `names` and separate `values`: dynamo hands an object (an nl dtype) over as itself only
    when it is an argument of its own, not inside a tuple."""
    constexprs = tuple(zip(names, (_decoded(v) for v in values)))
    spec = (obj_name, layout, constexprs, num_warps, num_stages, grid, tensor_dtypes)
    key = _KEYS.get(spec)
    if key is None:
        key = f"{obj_name}/{len(_REGISTRY)}"
        _KEYS[spec] = key
        written = written_tensors(compile_names.lookup(obj_name), layout, dict(constexprs),
                                  tensor_dtypes)
        _REGISTRY[key] = (obj_name, layout, constexprs, num_warps, num_stages, grid, written)
    return key


@torch.compiler.assume_constant_result
def _written_of(key: str) -> tuple:
    """Indices (into the launch's tensors) of the tensors the kernel may write."""
    return _REGISTRY[key][6]


_DTYPE = "newt.dtype"     # an nl dtype constexpr crosses into _register as (_DTYPE, its name)


def _encoded(v):
    # some torch releases (2.11) hand no user object to an assume_constant_result function
    return (_DTYPE, v.name) if isinstance(v, dtypes.dtype) else v


def _decoded(v):
    return dtypes.from_name(v[1]) if type(v) is tuple and len(v) == 2 and v[0] == _DTYPE else v


@torch.compiler.assume_constant_result
def _signature_of(jf_name: str) -> tuple:
    """(parameter names, ((name, default), ...), constexpr names, names with a default) of a
    kernel, as constants.
    Defaults other than plain Python scalars (an nl dtype) stay out of the traced code, which
    could not hand them back as constants; the launch inside the op fills them in itself."""
    params = compile_names.lookup(jf_name).signature.parameters
    plain = (int, float, bool, str, type(None))
    defaults = tuple((n, p.default) for n, p in params.items()
                     if p.default is not p.empty and type(p.default) in plain)
    constexpr_names = compile_names.lookup(jf_name).constexpr_names
    return (tuple(params), defaults, tuple(n for n in params if n in constexpr_names),
            tuple(n for n, p in params.items() if p.default is not p.empty))


@torch.library.custom_op("newt::launch", mutates_args=("written",))
def launch_op(key: str, tensors: list[torch.Tensor], written: list[torch.Tensor],
              ints: list[int], floats: list[float], grid: list[int]) -> None:
    obj_name, layout, constexprs, num_warps, num_stages, fixed_grid, writes = _REGISTRY[key]
    obj = compile_names.lookup(obj_name)
    tensors = _merged(tensors, written, writes)
    arguments = dict(constexprs)
    for name, kind, i in layout:
        if kind == "t":
            arguments[name] = tensors[i]
        elif kind == "i":
            arguments[name] = ints[i]
        elif kind == "b":
            arguments[name] = bool(ints[i])
        elif kind == "f":
            arguments[name] = floats[i]
        else:
            arguments[name] = None
    if num_warps is not None:    # None: an @autotune config chooses them
        arguments["num_warps"] = num_warps
    if num_stages is not None:
        arguments["num_stages"] = num_stages
    obj[tuple(grid) if grid else fixed_grid](**arguments)


@launch_op.register_fake
def _launch_fake(key, tensors, written, ints, floats, grid):
    return None


def _merged(read: list, written: list, writes: tuple) -> list:
    """The launch's tensors in their first order, from the read and the written lists."""
    out = [None] * (len(read) + len(written))
    for j, i in enumerate(writes):
        out[i] = written[j]
    rest = iter(read)
    return [t if t is not None else next(rest) for t in out]


def _launched(key: str, tensors: list, ints: list, floats: list, grid: list):
    """The one newt::launch call of a traced launch: its tensors cut into read and written."""
    writes = _written_of(key)
    torch.ops.newt.launch(key, [t for i, t in enumerate(tensors) if i not in writes],
                          [tensors[i] for i in writes], ints, floats, grid)


def _split(name: str, values: dict, names, constexpr_names, obj):
    """Layout, tensors, ints, floats and constexprs of one launch's arguments."""
    layout, tensors, ints, floats, constexprs = [], [], [], [], []
    for n in names:
        v = values[n]
        if n in constexpr_names:
            if isinstance(v, torch.Tensor):
                raise LaunchError(f"kernel {name}: constexpr argument `{n}` is a tensor")
            constexprs.append((n, _encoded(v)))
        elif isinstance(v, torch.Tensor):
            for i, t in enumerate(tensors):
                if t is v:
                    break
            else:
                i = len(tensors)
                tensors.append(v)
            layout.append((n, "t", i))
        elif isinstance(v, bool):
            layout.append((n, "b", len(ints)))
            ints.append(int(v))
        elif isinstance(v, (int, torch.SymInt)):
            layout.append((n, "i", len(ints)))
            ints.append(v)
        elif isinstance(v, (float, torch.SymFloat)):
            layout.append((n, "f", len(floats)))
            floats.append(v)
        elif v is None:
            layout.append((n, "n", 0))
        else:
            raise LaunchError(
                f"kernel {name}: argument `{n}` is a {type(v).__name__}; inside torch.compile a "
                "launch takes tensors, ints, floats, bools and None (convert other objects to "
                "tensors outside the compiled function)")
    return tuple(layout), tensors, ints, floats, constexprs


def _bind(jf, args, kwargs):
    names, defaults, constexpr_names, optional = _signature_of(jf.compile_name)
    if len(args) > len(names):
        raise LaunchError(f"kernel {jf.__name__}() takes {len(names)} arguments but "
                          f"{len(args)} were given")
    values = {}
    for n, d in defaults:
        values[n] = d
    for n, a in zip(names, args):
        values[n] = a
    for n, a in kwargs.items():
        if n not in names:
            raise LaunchError(f"kernel {jf.__name__}() got an unexpected keyword argument '{n}'")
        values[n] = a
    missing = [n for n in names if n not in values]
    if any(n not in optional for n in missing):
        raise LaunchError(f"kernel {jf.__name__}() missing argument(s): {', '.join(missing)}")
    return tuple(n for n in names if n in values), constexpr_names, values


def _grid_list(grid) -> list:
    if isinstance(grid, (int, torch.SymInt)):
        return [grid]
    return list(grid)


def compiled_launch(jf, grid, args, kwargs):
    """A JITFunction launch as dynamo traces it: one newt::launch call."""
    kwargs = dict(kwargs)
    num_warps = kwargs.pop("num_warps", 4)
    num_stages = kwargs.pop("num_stages", 3)
    names, constexpr_names, values = _bind(jf, args, kwargs)
    if callable(grid):
        meta = dict(values)
        meta["num_warps"] = num_warps
        meta["num_stages"] = num_stages
        grid = grid(meta)
    layout, tensors, ints, floats, constexprs = _split(jf.__name__, values, names,
                                                      constexpr_names, jf)
    key = _register(jf.compile_name, layout, tuple(n for n, _ in constexprs), num_warps,
                    num_stages, None, tuple(t.dtype for t in tensors),
                    *[v for _, v in constexprs])
    _launched(key, tensors, ints, floats, _grid_list(grid))


def traced_getitem(jf, grid):
    def launch(*args, **kwargs):
        return compiled_launch(jf, grid, args, kwargs)
    return launch


def traced_run(jf, *args, grid, **kwargs):
    return compiled_launch(jf, grid, args, kwargs)


def wrapper_launch(wrapper, grid, args, kwargs):
    """An @autotune / @heuristics launch: the wrapper itself runs inside the op (it chooses the
    config from real tensors), so a grid callable must be a function defined outside the
    compiled region (dynamo passes it as a constant); a tuple grid is evaluated here."""
    jf = wrapper
    while not hasattr(jf, "constexpr_names"):   # Autotuner(Heuristics(JITFunction)) ...
        jf = jf.fn
    kwargs = dict(kwargs)
    num_warps = kwargs.pop("num_warps", None)
    num_stages = kwargs.pop("num_stages", None)
    names, constexpr_names, values = _bind_partial(jf, args, kwargs)
    layout, tensors, ints, floats, constexprs = _split(jf.__name__, values, names,
                                                      constexpr_names, wrapper)
    fixed = grid if callable(grid) else None
    key = _register(wrapper.compile_name, layout, tuple(n for n, _ in constexprs), num_warps,
                    num_stages, fixed, tuple(t.dtype for t in tensors),
                    *[v for _, v in constexprs])
    _launched(key, tensors, ints, floats, [] if callable(grid) else _grid_list(grid))


def _bind_partial(jf, args, kwargs):
    """Like _bind, but the parameters a config or heuristic supplies may be absent."""
    names, defaults, constexpr_names, _ = _signature_of(jf.compile_name)
    values = {}
    for n, d in defaults:
        values[n] = d
    for n, a in zip(names, args):
        values[n] = a
    values.update(kwargs)
    present = tuple(n for n in names if n in values)
    return present, constexpr_names, values


def traced_wrapper_getitem(wrapper, grid):
    def launch(*args, **kwargs):
        return wrapper_launch(wrapper, grid, args, kwargs)
    return launch
