"""@jit and the launch path.

    kernel[grid](*args, **constexprs, num_warps=4, num_stages=3)

On a call: classify the arguments into a specialization key (dtypes, devices, constexpr values,
16-byte alignment, ints equal to 1 or divisible by 16, tensors of 2**31+ elements), look it up,
and launch through runtime/launch.py on torch's current stream. The classification is a Python
function generated once per kernel from its signature (`_make_binder`), so a call parses nothing
and builds no ctypes objects (DESIGN.md, principle 6). A key not seen before is checked for every
launch error (CPU tensors, mixed devices, bad constexprs, bad num_warps), then resolved through
the disk cache (runtime/cache.py) or, only on a disk miss, compiler.compile.
Under NEWT_INTERPRET=1 (newt.options.flags.interpret) the kernel runs on the interpreter.
"""
from __future__ import annotations

import functools
import inspect
import types

from . import options
from .errors import LaunchError
from .language import constexpr as _constexpr

_INT32 = (-2**31, 2**31)


def _classify(v, dns: bool):
    """(key part, value passed) of a runtime argument that is not exactly a torch.Tensor."""
    if v.__class__ is bool:
        return ("i1",), v
    if v.__class__ is int:
        if _INT32[0] <= v < _INT32[1]:
            t = "i32"
        elif -2**63 <= v < 2**63:
            t = "i64"
        elif 0 <= v < 2**64:
            t = "u64"
        else:
            return ("bad", "int out of 64-bit range"), v
        return ((t,) if dns else (t, v == 1, v % 16 == 0)), v
    if v.__class__ is float:
        return ("fp32",), v
    if isinstance(v, _constexpr):
        return _classify(v.value, dns)
    import torch
    if isinstance(v, torch.Tensor):  # subclasses (nn.Parameter, ...)
        p = v.data_ptr()
        if dns:
            return (v.dtype, v.get_device()), p
        return (v.dtype, v.get_device(), not p & 15, v.numel() >= 2**31), p
    if isinstance(v, bool):
        return ("i1",), bool(v)
    if isinstance(v, int):
        return _classify(int(v), dns)
    if isinstance(v, float):
        return ("fp32",), float(v)
    return ("bad", type(v).__name__), None


class JITFunction:
    def __init__(self, fn, *, do_not_specialize=(), debug=None, **_triton_kwargs):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_names = {
            n for n, p in self.signature.parameters.items()
            if _is_constexpr_annotation(p.annotation, fn)}
        dns = set()
        for d in do_not_specialize:
            dns.add(self.arg_names[d] if isinstance(d, int) else d)
        self.do_not_specialize = dns
        self.debug = debug
        self.cache: dict = {}        # key tuple -> Launcher (memory cache, per process)
        self._binder = None          # generated per kernel, on the first launch
        self._meta_of = None
        self._source_key = None      # hash of this kernel's source and its callees'

    # ---- launch ------------------------------------------------------------------------------
    def __getitem__(self, grid):
        run = self.run
        return lambda *args, **kwargs: run(*args, grid=grid, **kwargs)

    def run(self, *args, grid, **kwargs):
        if options.flags.interpret:
            from .interpreter import launch as interp_launch
            return interp_launch(self, grid, args, kwargs)
        binder = self._binder or self._make_binder()
        try:
            key, vals = binder(*args, **kwargs)
        except TypeError as e:
            raise self._signature_error(e) from None
        try:
            launcher = self.cache.get(key)
        except TypeError:  # an unhashable constexpr value
            launcher = None
        if launcher is None:
            launcher = self._miss(key, args, kwargs)
        if grid.__class__ is not tuple:
            grid = grid(self._meta_of(*args, **kwargs)) if callable(grid) else grid
            if grid.__class__ is not tuple:
                grid = tuple(grid) if isinstance(grid, (list, tuple)) else (grid,)
        n = len(grid)
        gx = grid[0] if n else 0
        gy = grid[1] if n > 1 else 1
        gz = grid[2] if n > 2 else 1
        mx, my, mz = launcher.max_grid
        if 0 < gx <= mx and 0 < gy <= my and 0 < gz <= mz and n <= 3:
            return launcher(gx, gy, gz, vals)
        self._bad_grid(launcher, grid, gx, gy, gz)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @newt.jit kernel: launch it as "
                           f"{self.__name__}[grid](...), or call it from another kernel")

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    # ---- the generated argument classifier -------------------------------------------------
    def _make_binder(self):
        """Generate `binder(<the kernel's parameters>, *, num_warps=4, num_stages=3)` returning
        (key, values): one branch per parameter, no loops, no signature binding per call.
        Internal names start with `_n_` so that they cannot clash with kernel parameters."""
        import torch
        ns = {"_n_Tensor": torch.Tensor, "_n_classify": _classify, "_n_cx": _constexpr,
              "_n_defaults": {}}
        sig, body, keys, vals = [], [], [], []
        names = list(self.signature.parameters)
        for i, (a, p) in enumerate(self.signature.parameters.items()):
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY) or a.startswith("_n_") \
                    or a in ("num_warps", "num_stages"):
                raise LaunchError(f"kernel {self.__name__}: parameter {a!r} is not supported "
                                  "(no *args/**kwargs/keyword-only, no num_warps/num_stages)")
            if p.default is p.empty:
                sig.append(a)
            else:
                ns["_n_defaults"][a] = p.default
                sig.append(f"{a}=_n_defaults[{a!r}]")
            if a in self.constexpr_names:
                body.append(f"    _n_k{i} = {a}.value if {a}.__class__ is _n_cx else {a}")
                keys.append(f"_n_k{i}")
                vals.append("None")
                continue
            dns = a in self.do_not_specialize
            tkey = f"({a}.dtype, {a}.get_device())" if dns else \
                f"({a}.dtype, {a}.get_device(), not _n_v{i} & 15, {a}.numel() >= 2147483648)"
            body += [f"    if {a}.__class__ is _n_Tensor:",
                     f"        _n_v{i} = {a}.data_ptr()",
                     f"        _n_k{i} = {tkey}",
                     "    else:",
                     f"        _n_k{i}, _n_v{i} = _n_classify({a}, {dns})"]
            keys.append(f"_n_k{i}")
            vals.append(f"_n_v{i}")
        head = f"({', '.join(sig)}{', ' if sig else ''}*, num_warps=4, num_stages=3):\n"
        src = ("def binder" + head + "\n".join(body)
               + f"\n    return ({', '.join(keys + ['num_warps', 'num_stages'])},), "
               f"({''.join(v + ', ' for v in vals)})\n")
        meta = ", ".join(f"{n!r}: {n}" for n in names + ["num_warps", "num_stages"])
        src += f"def meta{head}    return {{{meta}}}\n"
        exec(compile(src, f"<newt binder of {self.__name__}>", "exec"), ns)
        self._binder, self._meta_of = ns["binder"], ns["meta"]
        return self._binder

    def _signature_error(self, e: TypeError) -> LaunchError:
        params = ", ".join(self.arg_names)
        return LaunchError(f"bad arguments for kernel {self.__name__}({params}) "
                           f"[+ num_warps=, num_stages=]: {e}".replace("binder()", f"{self.__name__}()"))

    # ---- a key not seen before ---------------------------------------------------------------
    def _miss(self, key, args, kwargs):
        from .runtime import specialize
        launcher = specialize.resolve(self, key, args, kwargs)
        self.cache[key] = launcher
        return launcher

    def _bad_grid(self, launcher, grid, gx, gy, gz):
        if not 1 <= len(grid) <= 3:
            raise LaunchError(f"kernel {self.__name__}: grid must have 1 to 3 dimensions, "
                              f"got {grid!r}")
        launcher.check_grid(gx, gy, gz)
        # A zero-sized grid launches nothing (as in Triton): an empty tensor needs no work.

    def source_key(self) -> str:
        """Hash of this kernel's source, of every @newt.jit function it calls (found by name in
        its globals and closure) and of the plain constants it reads. Computed once."""
        if self._source_key is None:
            from .runtime.cache import digest
            parts: list = []
            _collect_sources(self, set(), parts)
            self._source_key = digest(*parts)
        return self._source_key


def _code_names(code, out: set):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)


def _collect_sources(jf, seen: set, parts: list):
    if id(jf) in seen:
        return
    seen.add(id(jf))
    fn = jf.fn
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        src = fn.__code__.co_code.hex() + repr(fn.__code__.co_consts)
    parts.append((fn.__module__, fn.__qualname__, src))
    names: set = set()
    _code_names(fn.__code__, names)
    scope = dict(fn.__globals__)
    for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        if _cell_ok(c):
            scope[n] = c.cell_contents
    for name in sorted(names | set(fn.__code__.co_freevars)):
        v = scope.get(name)
        if isinstance(v, JITFunction):
            _collect_sources(v, seen, parts)
        elif isinstance(v, _constexpr):
            parts.append((name, repr(v.value)))
        elif isinstance(v, (bool, int, float, str)):
            parts.append((name, repr(v)))


def _cell_ok(c) -> bool:
    try:
        c.cell_contents
        return True
    except ValueError:
        return False


def _is_constexpr_annotation(ann, fn) -> bool:
    if ann is _constexpr:
        return True
    if isinstance(ann, str):  # `from __future__ import annotations` leaves strings
        return ann.split(".")[-1] == "constexpr"
    return False


def jit(fn=None, **kwargs):
    """Decorator: `@newt.jit` or `@newt.jit(do_not_specialize=[...])`."""
    if fn is None:
        return lambda f: JITFunction(f, **kwargs)
    return JITFunction(fn, **kwargs)
