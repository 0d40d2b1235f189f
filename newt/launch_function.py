"""The launch function of a kernel: Python source generated once per kernel from its
signature, so that a launch parses nothing and builds no ctypes objects (DESIGN.md, principle 6).

Where it sits: jit.py's JITFunction asks `build` for it on a kernel's first launch (and again
with the argument classes of that launch, for the fast branch); the generated `launch` is the
per-call path: one branch per parameter builds the flat key tuple, a tuple compare with the
last key launched (else one dict lookup: JITFunction._lookup) finds the Launcher's prepared
state, one pack_into fills its argument buffer, one cuLaunchKernel (runtime/launch.py).
"""
from __future__ import annotations

import textwrap

from .arg_kinds import classify
from .errors import LaunchError
from .jit_host import descriptor_class
from .language import constexpr
from .launch_grid import EmptyGrid, grid3


class _Missing:
    def __repr__(self):
        return "<missing>"


MISSING = _Missing()      # an argument the call did not pass (JITFunction._miss reports it)

OPTION_DEFAULTS = (("num_warps", 4), ("num_stages", 3))


def constexpr_key(v):
    """Key element of a constexpr value that is not a plain int (see build)."""
    if isinstance(v, constexpr):
        v = v.value
        if v.__class__ is int:
            return v
    return (v.__class__, v)


def build(jf, kinds=None, what="launch", desc_ranks=None, hot=None):
    """The namespace of the Python source generated, once per kernel, for `launch(grid, <the kernel's parameters>, *, num_warps=4,
    num_stages=3)`: one branch per parameter builds the flat key tuple, one dict lookup finds
    the Launcher, one pack_into fills its argument buffer, one cuLaunchKernel. No loops, no
    signature binding, no per-call ctypes objects. Also `meta` (the dict a grid callable
    receives), or with what="binder" only `binder` (key and values, for tests and
    warmup). Internal names start with `_n_`.

    `kinds` (the argument classes of the first launch, per parameter) adds a guarded fast
    branch that builds the same key as one flat tuple, without per-parameter tuples.

    Returns (that namespace; the Python parameter index of each value the launch function
    packs, the Launcher's runtime_positions). `desc_ranks`: the rank of the TensorDescriptor
    each such parameter takes; `hot`: the kernel's one-element list holding (key,
    *Launcher.fast) of the last key launched."""
    import torch
    from .runtime import descriptor_args
    from .runtime.cache import python_code
    from .runtime.driver import last_launched
    ns = {"_n_Tensor": torch.Tensor, "_n_classify": classify, "_n_ck": constexpr_key,
          "_n_defaults": {}, "_n_cache": jf.cache, "_n_self": jf,
          "_n_last": last_launched, "_n_M": MISSING, "_n_hot": hot,
          "_n_grid3": grid3, "_n_Empty": EmptyGrid}
    sig, kw_sig, body, keys, vals, rt_pos = [], [], [], [], [], []
    guard, fast_keys, fast_vals = [], [], []
    names = list(jf.signature.parameters)
    next_index = len(names)      # a descriptor's ints come after the parameters

    for i, (a, p) in enumerate(jf.signature.parameters.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or a.startswith("_n_"):
            raise LaunchError(f"kernel {jf.__name__}: parameter {a!r} is not supported "
                              "(no *args/**kwargs)")
        to = kw_sig if p.kind == p.KEYWORD_ONLY else sig   # keyword-only: after *_n_more
        if p.default is p.empty:  # a sentinel, so that a missing argument reaches _miss
            to.append(f"{a}=_n_M")
        else:
            ns["_n_defaults"][a] = p.default
            to.append(f"{a}=_n_defaults[{a!r}]")
        if a in jf.constexpr_names:
            # an int stands for itself; any other value is (its type, value), so that True,
            # 1 and 1.0 are different keys (they compile differently)
            body.append(f"    _n_k{i} = {a} if {a}.__class__ is int else _n_ck({a}),")
            keys.append(f"*_n_k{i}")
            fast_keys.append(f"{a} if {a}.__class__ is int else _n_ck({a})")
            continue
        if a in desc_ranks:
            code, key, n = descriptor_args.launch_code(a, i, desc_ranks[a])
            ns["_n_TD"] = descriptor_class()
            body += [f"    {c}" for c in code] + [f"    _n_k{i} = ({key},)"]
            keys.append(f"*_n_k{i}")
            vals += [f"_n_v{i}"] + [f"_n_v{i}_{k}" for k in range(n)]
            rt_pos += [i] + list(range(next_index, next_index + n))
            next_index += n
            guard.append("True")
            fast_vals += code
            fast_keys.append(key)
            continue
        # The key is one flat tuple: each parameter adds elements whose first one tells its
        # kind apart (a torch dtype, an int code 0/1/16, or a str/tuple from _classify), so
        # different argument kinds never produce equal keys.
        dns = a in jf.do_not_specialize
        # "2**31+ elements" asks the nbytes getter first and numel() only past 2 GiB: nbytes
        # is numel times a whole number of bytes, so it is never below numel, and a getter
        # costs less than numel(), a method that parses its (empty) argument list
        tkey = f"{a}.dtype, {a}.get_device()" if dns else (
            f"{a}.dtype, {a}.get_device(), not _n_v{i} & 15, "
            f"{a}.nbytes > 2147483647 and {a}.numel() > 2147483647")
        ikey = (f"0 if -2147483648 <= {a} <= 2147483647 else _n_classify({a}, True)[0]"
                if dns else
                f"(1 if {a} == 1 else 0 if {a} & 15 or not {a} else 16) if -2147483648 <= {a} <= "
                f"2147483647 else _n_classify({a}, False)[0]")
        body += [f"    if {a}.__class__ is _n_Tensor:",
                 f"        _n_v{i} = {a}.data_ptr()",
                 f"        _n_k{i} = {tkey}",
                 f"    elif {a}.__class__ is int:",
                 f"        _n_v{i} = {a}",
                 f"        _n_k{i} = {ikey},",
                 "    else:",
                 f"        _n_k{i}, _n_v{i} = _n_classify({a}, {dns})"]
        keys.append(f"*_n_k{i}")
        vals.append(f"_n_v{i}")
        rt_pos.append(i)
        kind = (kinds or {}).get(a)
        if kind is torch.Tensor:
            guard.append(f"{a}.__class__ is _n_Tensor")
            fast_vals.append(f"_n_v{i} = {a}.data_ptr()")
            fast_keys.append(tkey)
        elif kind is int:
            guard.append(f"{a}.__class__ is int and -2147483648 <= {a} <= 2147483647")
            fast_vals.append(f"_n_v{i} = {a}")
            fast_keys.append("0" if dns else f"1 if {a} == 1 else 0 if {a} & 15 or not {a} else 16")
        elif kind in (float, bool):
            guard.append(f"{a}.__class__ is {kind.__name__}")
            fast_vals.append(f"_n_v{i} = {a}")
            fast_keys.append('"fp32"' if kind is float else '"i1"')
        elif kind is type(None):
            guard.append(f"{a} is None")
            fast_vals.append(f"_n_v{i} = 0")
            fast_keys.append("None")
        else:
            guard.append("False")
    # a parameter named num_warps / num_stages is also that launch option (as in Triton)
    params = ", ".join(sig + ["*_n_more"] + kw_sig + [f"{o}={d}" for o, d in OPTION_DEFAULTS
                                                      if o not in names] + ["**_n_extra"])
    check = "    if _n_more or _n_extra:\n        _n_self._extra_args(_n_more, _n_extra)"
    by_name = "{" + ", ".join(f"{n!r}: {n}" for n in dict.fromkeys(
        names + ["num_warps", "num_stages"])) + "}"
    key = f"    _n_key = ({', '.join(keys + ['num_warps', 'num_stages'])},)"
    v = ", ".join(vals)
    slow = "\n".join(body) + "\n" + key
    if kinds is not None and "False" not in guard:
        fv = "".join(f"        {e}\n" for e in fast_vals)
        fk = ", ".join(fast_keys + ["num_warps", "num_stages"])
        kernel_body = (f"    if {' and '.join(guard) or 'True'}:\n{fv}"
                       f"        _n_key = ({fk},)\n"
                       "    else:\n" + textwrap.indent(slow, "    "))
    else:
        kernel_body = slow
    binder_src = f"""
def binder({params}):
{check}
{chr(10).join(body)}
{key}
    return _n_key, ({v}{',' if vals else ''})
"""
    src = f"""
def meta({params}):
    return {by_name}

def launch(_n_grid, {params}):
{check}
{kernel_body}
    _n_h = _n_hot[0]
    if _n_key != _n_h[0]:   # a tuple compare: cheaper than hashing the key for the dict
        _n_h = _n_self._lookup(_n_key, {by_name})
    _, _n_pack, _n_buf, _n_block, _n_shared, _n_stream, _n_dev, _n_go, _n_c, _n_f, _n_p, \\
        _n_name, _n_L = _n_h
    if _n_grid.__class__ is int:   # a 1-D grid's int, checked where it was bound (_grid_arg)
        _n_gx = _n_grid
        _n_gy = _n_gz = 1
    else:
        if _n_grid.__class__ is not tuple and callable(_n_grid):
            _n_grid = _n_grid({by_name})
        if _n_grid.__class__ is tuple and len(_n_grid) == 1 \\
                and (_n_gx := _n_grid[0]).__class__ is int and 0 < _n_gx <= 2147483647:
            _n_gy = _n_gz = 1
        else:
            try:
                _n_gx, _n_gy, _n_gz = _n_grid3(_n_self, _n_grid, _n_L)
            except _n_Empty:   # a zero in the grid: nothing to launch (as Triton)
                return _n_L
    try:
        _n_pack(_n_buf, 0, _n_gx, _n_gy, _n_gz, _n_block, 1, 1, _n_shared, _n_stream(_n_dev),
                {v})
    except Exception:  # a value that does not fit its type: Launcher.launch reports it
        return _n_self._slow_launch(_n_L, (_n_gx, _n_gy, _n_gz), ({v}{',' if vals else ''}))
    _n_r = _n_go(_n_c, _n_f, _n_p, None)
    _n_last[0] = _n_name
    if _n_r:
        _n_self._failed(_n_L, _n_r, (_n_gx, _n_gy, _n_gz))
    return _n_L
"""
    if what == "binder":
        src = binder_src
    try:
        exec(python_code(src, f"<newt launcher of {jf.__name__}>"), ns)
    except SyntaxError as e:  # a parameter name Python cannot take as an argument
        raise LaunchError(f"kernel {jf.__name__}: cannot build its launcher ({e})") from None
    return ns, rt_pos
