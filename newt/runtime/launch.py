"""The launch fast path: a prepared argument buffer and one cuLaunchKernel per call.

Sits at the end of the pipeline: jit.py hands it a KernelBinary (cache.py) once per compiled
specialization and device, then, per call, the argument values and the grid. Everything that can
be built once is built in `Launcher.__init__` (DESIGN.md, principle 6, as tinygrad does): the
struct that packs every parameter into one ctypes buffer at a fixed 8-byte slot, the `void**`
array pointing at the slots, the getter that picks the passed parameters out of the call's
values. A launch is then: pack_into, cuLaunchKernel.

A Launcher's buffer is shared by its calls: launch one specialization from one thread at a time.
"""
from __future__ import annotations

import ctypes
import struct
from operator import itemgetter

from ..errors import LaunchError
from . import driver

# struct codes of parameter types (dtype short spellings); pointers are 64-bit addresses.
_CODES = {"i1": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
          "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
          "fp16": "e", "fp32": "f", "fp64": "d"}


def struct_code(short: str) -> str:
    if short.startswith("*"):
        return "Q"
    code = _CODES.get(short)
    if code is None:
        raise LaunchError(f"scalar kernel parameters of type {short} are not supported; "
                          "pass it as fp32 or as a one-element tensor")
    return code


def _raw_stream_getter():
    """torch's current stream of a device as an int handle, through the cheapest accessor."""
    import torch
    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fast is not None:
        return fast
    return lambda index: torch.cuda.current_stream(index).cuda_stream


class Launcher:
    """One compiled specialization loaded on one device, ready to launch."""

    __slots__ = ("binary", "kernel", "name", "device_index", "func", "pack", "storage", "params",
                 "getter", "block", "shared", "max_grid", "_launch", "_stream", "n_params")

    def __init__(self, binary, device: "driver.Device"):
        meta = binary.meta
        self.binary, self.name = binary, meta["name"]
        module = driver.Module(device, binary.cubin, self.name)
        self.kernel = module.get_kernel(self.name)    # holds the Module, which holds the Device
        self.device_index, self.max_grid = device.index, device.max_grid
        self.func = self.kernel.handle
        self.block = int(meta["num_threads"])
        self.shared = int(meta["shared_bytes"])
        if self.block > device.max_threads_per_block:
            raise LaunchError(f"kernel '{self.name}' needs {self.block} threads per block, above "
                              f"the device limit {device.max_threads_per_block}")
        self.kernel.set_dynamic_shared(self.shared)
        params = meta["params"]
        self.n_params = len(params)
        fmt = "<" + "".join(struct_code(p["dtype"]) + "x" * (8 - struct.calcsize(
            "<" + struct_code(p["dtype"]))) for p in params)
        self.pack = struct.Struct(fmt).pack_into
        self.storage = ctypes.create_string_buffer(max(8 * len(params), 8))
        base = ctypes.addressof(self.storage)
        self.params = (ctypes.c_void_p * max(len(params), 1))(
            *[base + 8 * i for i in range(len(params))])
        idx = [p["index"] for p in params]
        if len(idx) == 0:
            self.getter = lambda vals: ()
        elif len(idx) == 1:
            i0 = idx[0]
            self.getter = lambda vals: (vals[i0],)
        else:
            self.getter = itemgetter(*idx)
        self._launch = driver.lib().cuLaunchKernel
        self._stream = _raw_stream_getter()

    def __call__(self, gx: int, gy: int, gz: int, vals: tuple):
        """Launch on torch's current stream of this launcher's device."""
        try:
            self.pack(self.storage, 0, *self.getter(vals))
        except struct.error as e:
            raise LaunchError(f"kernel '{self.name}': an argument does not fit its parameter "
                              f"type ({e})") from None
        res = self._launch(self.func, gx, gy, gz, self.block, 1, 1, self.shared,
                           self._stream(self.device_index), self.params, None)
        driver.last_launched[0] = self.name
        if res:
            self._failed(res, gx, gy, gz, vals)

    def _failed(self, res, gx, gy, gz, vals):
        if res in (driver.CUDA_ERROR_INVALID_CONTEXT, driver.CUDA_ERROR_INVALID_HANDLE):
            # This thread has no (or another) current context: bind the device's primary context,
            # as torch does on first use in a thread, and try once more.
            driver.Device.get(self.device_index).make_current()
            res = self._launch(self.func, gx, gy, gz, self.block, 1, 1, self.shared,
                               self._stream(self.device_index), self.params, None)
            if not res:
                return
        driver.check(res, f"cuLaunchKernel(grid=({gx}, {gy}, {gz}), block={self.block}, "
                          f"shared={self.shared})", self.name)

    def check_grid(self, gx, gy, gz):
        """Slow path of the grid check (the fast path compares against max_grid inline)."""
        for axis, g, m in zip("xyz", (gx, gy, gz), self.max_grid):
            if not isinstance(g, int):
                raise LaunchError(f"kernel '{self.name}': grid {axis} must be an int, got "
                                  f"{type(g).__name__} {g!r}")
            if g < 0 or g > m:
                raise LaunchError(f"kernel '{self.name}': grid {axis} = {g} is outside "
                                  f"[0, {m}] (the device's limit)")
