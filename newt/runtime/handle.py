"""What `kernel[grid](...)` and `kernel.warmup(...)` return: the compiled kernel's facts.

Triton's launch returns the CompiledKernel it launched; programs read `.n_regs`, `.n_spills`,
`.metadata.shared`, `.asm["ptx"]` from it (to size grids by occupancy, or to inspect code).
`KernelInfo` gives those names to anything holding a KernelBinary (`.binary`): the Launcher
(launch.py, which the launch function returns as it is, so a launch does no extra work) and,
without a GPU, `CompiledHandle` (what `warmup` returns when there is no device to load onto).
Everything here is computed when asked, from the binary's metadata.
"""
from __future__ import annotations

import types


class KernelInfo:
    __slots__ = ()

    @property
    def n_regs(self) -> int:
        return int(self.binary.meta.get("n_regs", -1))

    @property
    def n_spills(self) -> int:
        return int(self.binary.meta.get("n_spills", 0))

    @property
    def metadata(self) -> types.SimpleNamespace:
        """name, num_warps, num_stages, num_ctas (1), shared (bytes of shared memory per block,
        dynamic and static), arch, target, n_regs, n_spills, local_bytes (Triton's names)."""
        from .active import GPUTarget
        m = self.binary.meta
        arch = m.get("arch", "")
        digits = "".join(c for c in arch if c.isdigit())
        return types.SimpleNamespace(
            name=m["name"], num_warps=m.get("num_warps", 4), num_stages=m.get("num_stages", 3),
            num_ctas=1, shared=int(m.get("shared_bytes", 0)) + self._static_shared(), arch=arch,
            target=GPUTarget("cuda", int(digits or 0), 32), n_regs=self.n_regs,
            n_spills=self.n_spills, local_bytes=int(m.get("local_bytes", 0)))

    def _static_shared(self) -> int:
        from .cubin import resources
        r = resources(self.binary.cubin, self.binary.meta["name"])
        return int(r["shared_bytes"]) if r else 0

    @property
    def asm(self) -> dict:
        """{"source": the CUDA C++, "ptx", "cubin" (bytes), and "sass" when nvdisasm is on
        PATH}."""
        texts = self.binary.asm
        if texts is None:     # loaded from the disk cache: the text is in an entry of its own
            from .cache import disk_cache
            key = self.binary.meta.get("asm_key")
            texts = (disk_cache().load_json(key) if key else None) or {}
        out = {"source": texts.get("source", ""), "ptx": texts.get("ptx", ""),
               "cubin": self.binary.cubin}
        sass = disassemble(self.binary.cubin)
        if sass is not None:
            out["sass"] = sass
        return out

    def _init_handles(self):
        """Triton loads a kernel lazily; newt's is loaded when it is made: nothing to do."""


class CompiledHandle(KernelInfo):
    """A compiled kernel not loaded on any device (warmup without a GPU). `handle[grid](*args)`
    launches the @jit function it came from with those arguments (constexprs included, in
    order, as Triton's compiled kernels take them): on the interpreter when NEWT_INTERPRET=1."""
    __slots__ = ("binary", "name", "kernel")

    def __init__(self, binary, kernel=None):
        self.binary, self.name, self.kernel = binary, binary.meta["name"], kernel

    def __getitem__(self, grid):
        if self.kernel is None:
            raise TypeError(f"{self!r} was compiled without a device and cannot launch")
        return self.kernel[grid]

    def __repr__(self):
        return f"CompiledHandle({self.name}, {self.binary.meta.get('arch', '')})"


def disassemble(cubin: bytes) -> str | None:
    """nvdisasm's listing of a cubin, or None without nvdisasm."""
    import os
    import shutil
    import subprocess
    import tempfile
    tool = shutil.which("nvdisasm")
    if tool is None or not cubin:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        r = subprocess.run([tool, "-c", path], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None
