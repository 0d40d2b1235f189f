"""Triton's JITFunction methods beyond the launch itself: `warmup`, `src`, the launch options
newt accepts for Triton's sake (num_ctas). A mixin of jit.JITFunction; none of it runs on the
launch fast path.
"""
from __future__ import annotations

import inspect
import textwrap

from .errors import DriverError, LaunchError


def descriptor_class():
    from .tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor


def have_driver() -> bool:
    from .runtime import driver
    try:
        driver.lib()
        return True
    except DriverError:
        return False


# Triton launch options accepted and ignored, on the compiled path and in the interpreter alike
IGNORED_LAUNCH_OPTIONS = ("maxnreg", "enable_fp_fusion", "debug", "extern_libs")


def check_num_ctas(kernel_name: str, n):
    """num_ctas: any positive int (each program runs as one CTA); the interpreter checks the
    same."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise LaunchError(f"kernel {kernel_name}: num_ctas={n!r}: a positive int (CTAs per "
                          "program) is expected")


class HostAPI:
    __slots__ = ()

    def warmup(self, *args, grid=None, **kwargs):
        """Compile (or load from the disk cache) and prepare the launch for these arguments,
        without launching (Triton's `warmup(*args, grid=..., **meta)`; the grid is not needed
        and may be left out). Returns the kernel's handle (runtime/handle.py: `.n_regs`,
        `.n_spills`, `.metadata`, `.asm`): the Launcher on a GPU; without one, the compiled
        kernel for `arch=` (a keyword of newt's, default "sm_90a"), with CPU tensors standing in
        for CUDA ones."""
        arch = kwargs.pop("arch", None)
        self._launch_options(kwargs)
        self._note_descriptors(args, kwargs)
        if arch is not None or not have_driver():
            from .runtime import specialize
            from .runtime.handle import CompiledHandle
            arguments, num_warps, num_stages = specialize.bind(self, args, kwargs)
            sig, cx, spec, _ = specialize.specialize(self, arguments, allow_cpu=True)
            return CompiledHandle(specialize.get_binary(
                self, sig, cx, spec, arch=arch or "sm_90a", num_warps=num_warps,
                num_stages=num_stages), kernel=self)
        key, _ = self.binder()(*args, **kwargs)
        launcher = self.cache.get(key)
        if launcher is None:
            from .runtime import specialize
            arguments, _, _ = specialize.bind(self, args, kwargs)
            launcher = self._miss(key, {"num_warps": kwargs.get("num_warps", 4),
                                        "num_stages": kwargs.get("num_stages", 3), **arguments})
        return launcher

    @property
    def src(self) -> str:
        """The kernel's source text, from its `def` line (Triton's JITFunction.src)."""
        text = textwrap.dedent(inspect.getsource(self.fn))
        lines = text.splitlines(keepends=True)
        first = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def ")), 0)
        return "".join(lines[first:])

    def _launch_options(self, kwargs):
        """Remove the launch options newt accepts for Triton's sake from `kwargs`: num_ctas
        (Triton's CTAs per program, a thread-block cluster that shares one program's block; the
        program's results do not depend on it, and newt runs each program as one CTA), and the
        hints that do not change newt's code: maxnreg, enable_fp_fusion, debug, extern_libs
        (newt's libdevice names map to CUDA's own math functions, so no library is linked)."""
        for k in IGNORED_LAUNCH_OPTIONS:
            kwargs.pop(k, None)
        if "num_ctas" in kwargs:
            check_num_ctas(self.__name__, kwargs.pop("num_ctas"))

