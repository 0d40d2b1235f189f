"""newt: a small Triton-dialect GPU kernel JIT.

    @newt.jit kernels  ->  typed block IR  ->  CUDA C++  ->  NVRTC  ->  cubin  ->  driver launch

`newt.compile` (the AOT entry point) and `newt.testing` load lazily: a process that only launches
cached kernels never imports the compiler. So do the parts of Triton's host API that programs
written for Triton call: `newt.runtime.driver.active`, `newt.tools.tensor_descriptor`,
`newt.set_allocator` and the scoped profiler `newt.profiler`.
"""
from . import language  # noqa: F401
from .autotune import Config, autotune, heuristics  # noqa: F401
from .errors import (CompilationError, DriverError, KernelError, LaunchError,  # noqa: F401
                     NVRTCError, NewtError, OutOfBoundsError)
from .jit import JITFunction, jit  # noqa: F401
from .language import constexpr  # noqa: F401

__version__ = "0.1.0"

from . import compile_hooks as _compile_hooks  # noqa: E402
_compile_hooks.install()   # torch.compile traces launches as newt::launch (torch_ops.py)


def cdiv(x: int, y: int) -> int:
    """Ceiling division on the host (Triton's triton.cdiv)."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def __getattr__(name):
    if name == "compile":
        from .compiler import compile
        return compile
    if name == "set_allocator":
        from .runtime.allocation import set_allocator
        return set_allocator
    if name in ("testing", "compiler", "interpreter", "frontend", "codegen", "passes", "runtime",
                "tools", "profiler"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'newt' has no attribute {name!r}")
