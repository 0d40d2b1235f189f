"""The launch fast path's prepared state: one argument buffer and one cuLaunchKernel per call.

Sits at the end of the pipeline: jit.py's generated launch function looks a Launcher up by key,
packs the call's values into `storage` with the prebuilt struct and calls `cu_launch`. Everything
that can be built once is built in `Launcher.__init__` (DESIGN.md, principle 6, as tinygrad
does): the struct that packs every runtime parameter, in the Python function's order, into one
ctypes buffer at fixed 8-byte slots, and the `void**` array pointing at the slots the compiled
kernel takes (a parameter compiled as the constant 1 is packed into a slot no pointer names).

A Launcher's buffer is shared by its calls: launch one specialization from one thread at a time.
"""
from __future__ import annotations

import ctypes
import struct

from ..errors import LaunchError
from . import driver
from .handle import KernelInfo

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


def _prepared_launch(cu_launch, config_addr, func, params_addr):
    """(function, its first three arguments) of this launcher's cuLaunchKernelEx call; the
    fourth is None. For a ctypes function, an undeclared copy of it takes prebuilt argument
    objects: `c_void_p.from_param(address)` makes the same kind of object `byref` does, which
    ctypes copies into the call as is (a c_void_p instance would be converted into one on every
    call, and a declared prototype would run from_param on every argument)."""
    if not isinstance(cu_launch, ctypes._CFuncPtr):   # the Python shim of old drivers
        return cu_launch, (config_addr, func, params_addr)
    owner = driver.lib()
    raw = owner._FuncPtr((cu_launch.__name__, owner))
    raw.restype = ctypes.c_int
    arg = ctypes.c_void_p.from_param
    return raw, (arg(config_addr), arg(func), arg(params_addr))


def _packing_maps(pack_into, params, first: int, recipes, slot_of, persistent=None):
    """pack_into that also points params[first + k] at the tensor map of recipe k, built
    (or found in the cache) from the packed values. `persistent` = (c_int32 slot, SM count)
    for a persistent kernel (passes/tc/persistent.py): at most one CTA per SM is launched (the
    kernel loops over the programs) and the grid itself goes into the hidden parameter."""
    from .tensormap import recipe_builder
    build = recipe_builder(recipes, slot_of)
    n = len(recipes)
    if persistent is None:
        def pack(buf, off, gx, gy, gz, bx, by, bz, shared, stream, *vals):
            pack_into(buf, off, gx, gy, gz, bx, by, bz, shared, stream, *vals)
            params[first:first + n] = build(vals)
        return pack
    grid, sm_count = persistent

    def pack_persistent(buf, off, gx, gy, gz, bx, by, bz, shared, stream, *vals):
        pack_into(buf, off, gx if gx < sm_count else sm_count, gy, gz, bx, by, bz, shared,
                  stream, *vals)
        grid.value = gx
        params[first:first + n] = build(vals)
    return pack_persistent


class Launcher(KernelInfo):
    """One compiled specialization loaded on one device, ready to launch. It is also what a
    launch returns (handle.py: `.n_regs`, `.n_spills`, `.metadata`, `.asm`)."""

    __slots__ = ("binary", "kernel", "name", "device_index", "func", "pack", "storage", "params",
                 "params_addr", "config_addr", "block", "shared", "max_grid", "cu_launch",
                 "stream", "go", "go_args", "fast", "positions", "slots")

    def __init__(self, binary, device: "driver.Device", runtime_positions: list[int]):
        """`runtime_positions`: the Python parameter index of each value the launch function
        packs, in packing order (every non-constexpr parameter)."""
        meta = binary.meta
        self.binary, self.name = binary, meta["name"]
        self.positions = tuple(runtime_positions)
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
        by_index = {p["index"]: p for p in meta["params"]}
        slot_of = {pos: k for k, pos in enumerate(runtime_positions)}
        missing = [p["name"] for p in meta["params"] if p["index"] not in slot_of]
        if missing:
            raise LaunchError(f"kernel '{self.name}': compiled parameters {missing} are not "
                              "runtime parameters of the Python function")
        # The buffer: a CUlaunchConfig (grid, block, shared bytes, stream; attrs NULL, 0 of
        # them: the pad bytes pack as zeros), then one 8-byte slot per runtime parameter. One
        # pack_into per call writes grid, stream and arguments together.
        fmt = "<IIIIIII4xQ16x"
        cfg = driver.LAUNCH_CONFIG_BYTES
        for pos in runtime_positions:
            p = by_index.get(pos)
            code = struct_code(p["dtype"]) if p else "q"   # compiled out (== 1): packed, unused
            fmt += code + "x" * (8 - struct.calcsize("<" + code))
        self.pack = struct.Struct(fmt).pack_into
        self.slots = tuple((by_index[pos]["name"], by_index[pos]["dtype"]) if pos in by_index
                           else None for pos in runtime_positions)   # for error messages
        assert struct.calcsize(fmt) == cfg + 8 * len(runtime_positions)
        self.storage = ctypes.create_string_buffer(cfg + 8 * len(runtime_positions))
        self.config_addr = ctypes.addressof(self.storage)
        base = self.config_addr + cfg
        # One trailing NULL: the driver reads only as many slots as the kernel has; the NULL lets
        # a recording stand-in driver (tests) find the end.
        addrs = [base + 8 * slot_of[p["index"]] for p in meta["params"]]
        # TMA tensor maps (passes/tc/dot_tma.py) follow the user's parameters: their slots point at
        # maps encoded from this call's arguments, so packing also refreshes them
        recipes = meta.get("tma_maps") or ()
        # a persistent kernel (passes/tc/persistent.py) takes the grid as its last parameter
        grid = ctypes.c_int32() if meta.get("persistent") else None
        hidden = [ctypes.addressof(grid)] if grid is not None else []
        self.params = (ctypes.c_void_p * (len(addrs) + len(recipes) + len(hidden) + 1))(
            *addrs, *([None] * len(recipes)), *hidden, None)
        self.params_addr = ctypes.addressof(self.params)
        assert grid is None or recipes, "a persistent kernel's ring arrives by TMA: it has maps"
        self.pack = self.pack if not recipes else _packing_maps(
            self.pack, self.params, len(addrs), recipes, slot_of,
            None if grid is None else (grid, device.sm_count))
        self.cu_launch = driver.lib().cuLaunchKernelEx
        self.go, self.go_args = _prepared_launch(self.cu_launch, self.config_addr, self.func,
                                                 self.params_addr)
        self.stream = _raw_stream_getter()
        # What the generated launch function unpacks in one step (jit.py's hot tuple): local
        # variables instead of a dozen attribute reads per launch.
        self.fast = (self.pack, self.storage, self.block, self.shared, self.stream,
                     self.device_index, self.go, *self.go_args, self.name, self)

    def __getitem__(self, grid):
        """`handle[grid](*args)`: launch this specialization with the kernel's arguments in
        order, constexprs included (and skipped), as Triton's compiled kernels launch. Nothing
        is checked against the specialization (Triton checks nothing either): tensors and ints
        must be of the kinds it was compiled for."""
        def run(*args):
            if len(self.positions) and max(self.positions) >= len(args):
                raise LaunchError(f"kernel '{self.name}': launching a compiled kernel directly "
                                  f"needs its {max(self.positions) + 1} arguments in order "
                                  "(tensor descriptor arguments: launch the @jit function)")
            vals = tuple(v.data_ptr() if hasattr(v, "data_ptr") else v
                         for v in (args[p] for p in self.positions))
            g = tuple(grid) + (1,) * (3 - len(grid))
            self.launch(*g, vals)
            return self
        return run

    def launch(self, gx: int, gy: int, gz: int, values: tuple):
        """The slow path's launch (the generated launch function inlines the same two calls)."""
        try:
            self.pack(self.storage, 0, gx, gy, gz, self.block, 1, 1, self.shared,
                      self.stream(self.device_index), *values)
        except (struct.error, OverflowError) as e:
            raise LaunchError(f"kernel '{self.name}': {self._misfit(values) or e}") from None
        res = self.go(*self.go_args, None)
        driver.last_launched[0] = self.name
        if res:
            self.failed(res, gx, gy, gz)

    def _misfit(self, values) -> str | None:
        """Which argument does not fit its parameter's type (the pack's own error names none)."""
        for slot, v in zip(self.slots, values):
            if slot is not None:
                try:
                    struct.pack("<" + struct_code(slot[1]), v)
                except (struct.error, OverflowError, TypeError) as e:
                    return f"argument `{slot[0]}` = {v!r} does not fit its type {slot[1]} ({e})"
        return None

    def failed(self, res, gx, gy, gz):
        if res in (driver.CUDA_ERROR_INVALID_CONTEXT, driver.CUDA_ERROR_INVALID_HANDLE):
            # This thread has no current context, or another device's (tensors on a device that
            # is not torch's current one). No context: bind the device's primary one, as torch
            # does on first use in a thread. Another one: push ours for this launch only, so that
            # torch's current device does not change under the user.
            res = driver.run_in_context(self.device_index, lambda: self.cu_launch(
                self.config_addr, self.func, self.params_addr, None))
            if not res:
                return
        driver.check(res, f"cuLaunchKernel(grid=({gx}, {gy}, {gz}), block={self.block}, "
                          f"shared={self.shared})", self.name)
