"""`newt.runtime.driver.active`: Triton's host-side driver API under newt's names.

Sits beside the launch path, not on it: programs written for Triton ask the active driver about
the device before any kernel runs (`get_current_target()`, `utils.get_device_properties(i)`,
`get_active_torch_device()`). The answers come from the CUDA driver (driver.py's
cuDeviceGetAttribute) and from torch; nothing here is read by a launch.

Without a CUDA device the target is the one `newt.compile` builds for by default (sm_90a) and
the active torch device is the CPU, so that programs which only ask these questions run on the
interpreter (NEWT_INTERPRET=1).
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GPUTarget:
    """What a kernel is compiled for: backend "cuda", arch as an int (90 for sm_90a), warp size."""
    backend: str
    arch: int
    warp_size: int


# CUdevice_attribute numbers of the properties Triton's get_device_properties returns
_PROPERTIES = {
    "max_shared_mem": 97,          # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    "max_num_regs": 12,            # MAX_REGISTERS_PER_BLOCK
    "multiprocessor_count": 16,
    "warpSize": 10,
    "sm_clock_rate": 13,           # kHz
    "mem_clock_rate": 36,          # kHz
    "mem_bus_width": 37,           # bits
    "max_threads_per_sm": 39,      # MAX_THREADS_PER_MULTIPROCESSOR
}

# without a device: the figures of an H100 SXM / H200 (sm_90a, what newt.compile builds for by
# default), so that a program sizing its launch from them runs on the interpreter unchanged
SM90_PROPERTIES = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132,
                   "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 2619000,
                   "mem_bus_width": 5120, "max_threads_per_sm": 2048}


def _has_gpu() -> bool:
    import torch
    return torch.cuda.is_available()


class Utils:
    """`driver.active.utils`: device queries through the CUDA driver."""

    def get_device_properties(self, device) -> dict:
        """The device's limits under Triton's keys: max_shared_mem (bytes a block may opt in
        to), max_num_regs (per block), multiprocessor_count, warpSize, sm_clock_rate and
        mem_clock_rate (kHz), mem_bus_width (bits), max_threads_per_sm. Without a CUDA driver:
        SM90_PROPERTIES, the target newt.compile builds for by default."""
        import ctypes

        from . import driver
        try:
            driver.lib()
        except driver.DriverError:
            return dict(SM90_PROPERTIES)
        index = device.index if hasattr(device, "index") else int(device)
        dev = driver.Device.get(0 if index is None else index)
        cu = driver.lib()
        out = {}
        for key, attr in _PROPERTIES.items():
            v = ctypes.c_int()
            driver.check(cu.cuDeviceGetAttribute(ctypes.byref(v), attr, dev.handle),
                         f"cuDeviceGetAttribute({key})")
            out[key] = v.value
        return out


class ActiveDriver:
    """The CUDA driver as Triton's programs see it (`triton.runtime.driver.active`)."""

    def __init__(self):
        self.utils = Utils()

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        """torch's current CUDA device index (0 without a device)."""
        import torch
        return torch.cuda.current_device() if _has_gpu() else 0

    def set_current_device(self, device: int):
        import torch
        torch.cuda.set_device(device)

    def get_current_stream(self, device=None) -> int:
        """torch's current stream of `device` (the current one by default), as a raw handle."""
        import torch
        if device is None:
            device = self.get_current_device()
        return torch.cuda.current_stream(device).cuda_stream

    def get_current_target(self) -> GPUTarget:
        """GPUTarget("cuda", arch, 32) of the current device (arch 90 on H100/H200; without a
        device, 90: the arch newt.compile builds for by default)."""
        if not _has_gpu():
            return GPUTarget("cuda", 90, 32)
        from . import driver
        major, minor = driver.Device.get(self.get_current_device()).capability
        return GPUTarget("cuda", major * 10 + minor, 32)

    def get_active_torch_device(self):
        """torch.device("cuda", current index); the CPU when kernels run on the interpreter
        (NEWT_INTERPRET=1, which takes CPU tensors) or there is no CUDA device, so that a
        program creating its tensors on this device runs in either mode unchanged."""
        import torch

        from ..options import flags
        if flags.interpret or not _has_gpu():
            return torch.device("cpu")
        return torch.device("cuda", self.get_current_device())

    def get_device_interface(self):
        import torch
        return torch.cuda

    def get_benchmarker(self):
        from ..testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        """A buffer larger than L2: writing it before a timed call evicts the kernel's data."""
        import torch
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32,
                           device=self.get_active_torch_device())

    def clear_cache(self, cache):
        cache.zero_()


active = ActiveDriver()
