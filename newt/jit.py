"""@jit and the launch path.

    kernel[grid](*args, **constexprs, num_warps=4, num_stages=3)

On a call: classify the arguments into a specialization key (dtypes, constexpr values, 16-byte
alignment, ints equal to 1, tensors of 2**31+ elements), look it up, compile on a miss
(compiler.compile, disk cache), then launch through the runtime on torch's current stream.
Under NEWT_INTERPRET=1 (newt.options.flags.interpret) the kernel runs on the interpreter.
The fast path does only lookups (DESIGN.md, principle 6).
"""
from __future__ import annotations

import functools
import inspect

from . import options


class JITFunction:
    def __init__(self, fn, *, do_not_specialize=(), debug=None):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_names = {
            n for n, p in self.signature.parameters.items()
            if _is_constexpr_annotation(p.annotation, fn)}
        self.do_not_specialize = set(do_not_specialize)

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid)

    def run(self, *args, grid, **kwargs):
        if options.flags.interpret:
            from .interpreter import launch as interp_launch
            return interp_launch(self, grid, args, kwargs)
        raise NotImplementedError("GPU launch path not built yet")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @newt.jit kernel: launch it as "
                           f"{self.__name__}[grid](...), or call it from another kernel")

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"


def _is_constexpr_annotation(ann, fn) -> bool:
    from .language import constexpr
    if ann is constexpr:
        return True
    if isinstance(ann, str):  # `from __future__ import annotations` leaves strings
        return ann.split(".")[-1] == "constexpr"
    return False


def jit(fn=None, **kwargs):
    """Decorator: `@newt.jit` or `@newt.jit(do_not_specialize=[...])`."""
    if fn is None:
        return lambda f: JITFunction(f, **kwargs)
    return JITFunction(fn, **kwargs)
