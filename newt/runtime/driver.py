"""The CUDA driver API through ctypes: cubin -> Module -> Kernel, device facts, errors.

Sits after NVRTC (which makes the cubin) and under the launch path (launch.py, which calls
cuLaunchKernel through `lib()` with a prepared argument buffer). Nouns follow cuda.core:
a Device knows its arch and limits; a Module is a cubin loaded into the device's primary context
(torch's context) and keeps the Device alive; a Kernel is one function of a Module and keeps the
Module alive, so a cubin is never unloaded while a kernel of it may still launch.

Every prototype is declared (argtypes/restype): an undeclared prototype truncates pointers.
Failures raise newt.DriverError with the CUresult name and the kernel's name.
"""
from __future__ import annotations

import ctypes
import threading

from ..errors import DriverError

c_int, c_uint, c_void_p, c_char_p, c_size_t = (ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
                                               ctypes.c_char_p, ctypes.c_size_t)
c_uint64, P = ctypes.c_uint64, ctypes.POINTER

# CUdevice_attribute
ATTR_MAX_THREADS_PER_BLOCK = 1
ATTR_MAX_GRID_DIM_X, ATTR_MAX_GRID_DIM_Y, ATTR_MAX_GRID_DIM_Z = 5, 6, 7
ATTR_MAX_SHARED_PER_BLOCK = 8
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_CC_MAJOR, ATTR_CC_MINOR = 75, 76
ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97
# CUfunction_attribute
FUNC_MAX_THREADS_PER_BLOCK = 0
FUNC_SHARED_SIZE_BYTES = 1
FUNC_LOCAL_SIZE_BYTES = 3
FUNC_NUM_REGS = 4
FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
# CUresult values the runtime reacts to
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_ASSERT = 710
DEFAULT_SHARED_LIMIT = 48 * 1024   # above this a kernel must opt in


class CUtensorMap(ctypes.Structure):
    """Opaque 128-byte TMA descriptor (CU_TENSOR_MAP_NUM_QWORDS = 16), 64-byte aligned in use."""
    _fields_ = [("opaque", c_uint64 * 16)]


_PROTOS = {
    "cuGetErrorName": (c_int, [c_int, P(c_char_p)]),
    "cuGetErrorString": (c_int, [c_int, P(c_char_p)]),
    "cuInit": (c_int, [c_uint]),
    "cuDriverGetVersion": (c_int, [P(c_int)]),
    "cuDeviceGetCount": (c_int, [P(c_int)]),
    "cuDeviceGet": (c_int, [P(c_int), c_int]),
    "cuDeviceGetAttribute": (c_int, [P(c_int), c_int, c_int]),
    "cuDeviceGetName": (c_int, [c_char_p, c_int, c_int]),
    "cuDevicePrimaryCtxRetain": (c_int, [P(c_void_p), c_int]),
    "cuCtxGetCurrent": (c_int, [P(c_void_p)]),
    "cuCtxSetCurrent": (c_int, [c_void_p]),
    "cuCtxPushCurrent_v2": (c_int, [c_void_p]),
    "cuCtxPopCurrent_v2": (c_int, [P(c_void_p)]),
    "cuCtxSynchronize": (c_int, []),
    "cuStreamSynchronize": (c_int, [c_void_p]),
    "cuModuleLoadData": (c_int, [P(c_void_p), c_void_p]),
    "cuModuleUnload": (c_int, [c_void_p]),
    "cuModuleGetFunction": (c_int, [P(c_void_p), c_void_p, c_char_p]),
    "cuFuncGetAttribute": (c_int, [P(c_int), c_int, c_void_p]),
    "cuFuncSetAttribute": (c_int, [c_void_p, c_int, c_int]),
    # kernelParams and extra as plain addresses: the launcher passes the prebuilt array's
    # address (an int), which converts faster than a ctypes array object.
    "cuLaunchKernel": (c_int, [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint,
                               c_uint, c_void_p, c_void_p, c_void_p]),
    # One pointer to a CUlaunchConfig the launcher packs together with the arguments: 4
    # arguments to convert per call instead of cuLaunchKernel's 11 (about 1 us less in ctypes).
    "cuLaunchKernelEx": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p]),
    "cuTensorMapEncodeTiled": (c_int, [P(CUtensorMap), c_int, ctypes.c_uint32, c_void_p,
                                       P(c_uint64), P(c_uint64), P(ctypes.c_uint32),
                                       P(ctypes.c_uint32), c_int, c_int, c_int, c_int]),
}

_lock = threading.RLock()
_lib = None


def load_library(path: str = "libcuda.so.1"):
    """Open a CUDA driver library and declare every prototype (tests pass a stand-in)."""
    try:
        cu = ctypes.CDLL(path)
    except OSError as e:
        raise DriverError(
            f"could not load the CUDA driver ({path}): {e}. A GPU launch needs an NVIDIA driver; "
            "without a GPU, run kernels with NEWT_INTERPRET=1 or compile them ahead of time with "
            "newt.compile") from None
    for name, (res, args) in _PROTOS.items():
        f = getattr(cu, name, None)
        if f is not None:  # cuTensorMapEncodeTiled is missing on old drivers
            f.restype, f.argtypes = res, args
    _check_with(cu, cu.cuInit(0), "cuInit")
    if getattr(cu, "cuLaunchKernelEx", None) is None:   # drivers before CUDA 12
        cu.cuLaunchKernelEx = _launch_ex_shim(cu)
    return cu


# CUlaunchConfig (cuda.h): grid xyz, block xyz, sharedMemBytes (u32 each), pad, hStream,
# attrs (pointer), numAttrs (u32), pad: 56 bytes. Arguments follow it in the launcher's buffer.
LAUNCH_CONFIG_FORMAT = "<IIIIIII4xQQI4x"
LAUNCH_CONFIG_BYTES = 56


def _launch_ex_shim(cu):
    import struct
    unpack = struct.Struct(LAUNCH_CONFIG_FORMAT).unpack_from

    def launch_ex(config_addr, func, params, extra):
        raw = ctypes.string_at(config_addr, LAUNCH_CONFIG_BYTES)
        gx, gy, gz, bx, by, bz, shared, stream, _, _ = unpack(raw)
        return cu.cuLaunchKernel(func, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
    return launch_ex


def lib():
    """libcuda.so.1 with every prototype declared, cuInit done. Raises DriverError if missing."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = load_library()
    return _lib


def error_name(res: int, cu=None) -> str:
    cu = cu or _lib
    s = c_char_p()
    if cu is None or cu.cuGetErrorName(res, ctypes.byref(s)) != 0 or not s.value:
        return f"CUresult {res}"
    return s.value.decode()


def _describe(cu, res: int) -> str:
    s = c_char_p()
    msg = ""
    if cu.cuGetErrorString(res, ctypes.byref(s)) == 0 and s.value:
        msg = f" ({s.value.decode()})"
    return f"{error_name(res, cu)}{msg}"


def _check_with(cu, res: int, what: str, kernel: str | None = None):
    if res:
        on = f" for kernel '{kernel}'" if kernel else ""
        hint = ""
        if res in (CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ASSERT):
            hint = ("\nhint: a device assert or an out-of-bounds access (check masks); rerun with "
                    "NEWT_DEBUG=1 to see the generated code, or under `compute-sanitizer` to find "
                    "the faulting access. The CUDA context is now unusable: restart the process.")
        raise DriverError(f"{what} failed{on}: {_describe(cu, res)}{hint}")


def check(res: int, what: str, kernel: str | None = None):
    if res:
        _check_with(lib(), res, what, kernel)


def arch_of(major: int, minor: int) -> str:
    """The exact NVRTC target of a compute capability: 9.0 -> sm_90a (wgmma/TMA need the 'a')."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


class Device:
    """One GPU, its limits and its primary context (the one torch uses)."""
    _all: dict[int, "Device"] = {}

    def __init__(self, index: int):
        cu = lib()
        self.index = index
        h = c_int()
        check(cu.cuDeviceGet(ctypes.byref(h), index), f"cuDeviceGet({index})")
        self.handle = h.value

        def attr(a):
            v = c_int()
            check(cu.cuDeviceGetAttribute(ctypes.byref(v), a, self.handle), "cuDeviceGetAttribute")
            return v.value

        self.capability = (attr(ATTR_CC_MAJOR), attr(ATTR_CC_MINOR))
        self.arch = arch_of(*self.capability)
        self.sm_count = attr(ATTR_MULTIPROCESSOR_COUNT)
        self.max_threads_per_block = attr(ATTR_MAX_THREADS_PER_BLOCK)
        self.max_grid = (attr(ATTR_MAX_GRID_DIM_X), attr(ATTR_MAX_GRID_DIM_Y),
                         attr(ATTR_MAX_GRID_DIM_Z))
        self.max_shared = max(attr(ATTR_MAX_SHARED_PER_BLOCK_OPTIN),
                              attr(ATTR_MAX_SHARED_PER_BLOCK))
        name = ctypes.create_string_buffer(256)
        check(cu.cuDeviceGetName(name, 256, self.handle), "cuDeviceGetName")
        self.name = name.value.decode(errors="replace")   # what tuned configs are keyed by
        ctx = c_void_p()
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.handle),
              "cuDevicePrimaryCtxRetain")
        self.context = ctx.value

    @classmethod
    def get(cls, index: int) -> "Device":
        d = cls._all.get(index)
        if d is None:
            with _lock:
                d = cls._all.get(index)
                if d is None:
                    _torch_cuda_ready(index)
                    d = cls._all[index] = Device(index)
        return d

    def make_current(self):
        """Bind this device's primary context to the calling thread (torch does the same)."""
        check(lib().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def __repr__(self):
        return f"Device({self.index}, {self.arch}, {self.sm_count} SMs)"


def run_in_context(device_index: int, fn):
    """fn() with the device's primary context current: made current if the thread has none,
    pushed and popped if the thread uses another device's."""
    cu = lib()
    dev = Device.get(device_index)
    prev = c_void_p()
    check(cu.cuCtxGetCurrent(ctypes.byref(prev)), "cuCtxGetCurrent")
    if not prev.value:
        dev.make_current()
        return fn()
    if prev.value == dev.context:
        return fn()
    check(cu.cuCtxPushCurrent_v2(dev.context), "cuCtxPushCurrent")
    try:
        return fn()
    finally:
        popped = c_void_p()
        cu.cuCtxPopCurrent_v2(ctypes.byref(popped))


def _torch_cuda_ready(index: int):
    """Make torch initialise CUDA first, so that its primary context is the one we share."""
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.init()
            with torch.cuda.device(index):
                torch.cuda.current_stream()
    except ImportError:
        pass


def current_device_index() -> int:
    import torch
    return torch.cuda.current_device()


def device_scope(index: int):
    """A `with` block in which torch's current device is `index`. Timing (CUDA events,
    synchronize) works on the current device's current stream, while a launch runs on its
    tensors' device: the autotuners time another device's launches inside its scope."""
    import torch
    return torch.cuda.device(index)


class Module:
    """A cubin loaded into a device's primary context. Holds the Device it lives on."""

    def __init__(self, device: Device, cubin: bytes, name: str = "?"):
        self.device, self.name = device, name
        self._cubin = cubin  # the driver reads the image during the call only; keep it anyway
        cu = lib()
        mod = c_void_p()
        with _lock:
            prev = c_void_p()
            check(cu.cuCtxGetCurrent(ctypes.byref(prev)), "cuCtxGetCurrent")
            if prev.value != device.context:
                check(cu.cuCtxPushCurrent_v2(device.context), "cuCtxPushCurrent", name)
            try:
                check(cu.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData", name)
            finally:
                if prev.value != device.context:
                    popped = c_void_p()
                    cu.cuCtxPopCurrent_v2(ctypes.byref(popped))
        self.handle = mod.value
        self._cu = cu      # unloaded by the library that loaded it, even after a swap (tests)

    def get_kernel(self, name: str) -> "Kernel":
        return Kernel(self, name)

    def __del__(self):
        h, cu = getattr(self, "handle", None), getattr(self, "_cu", None)
        if h and cu is not None:
            try:
                cu.cuModuleUnload(h)
            except Exception:  # interpreter shutdown: the library may be half torn down
                pass


class Kernel:
    """One __global__ function of a Module. Holds the Module (and so the Device)."""

    def __init__(self, module: Module, name: str):
        self.module, self.name = module, name
        cu = lib()
        f = c_void_p()
        check(cu.cuModuleGetFunction(ctypes.byref(f), module.handle, name.encode()),
              "cuModuleGetFunction", name)
        self.handle = f.value

    @property
    def device(self) -> Device:
        return self.module.device

    def attribute(self, attr: int) -> int:
        v = c_int()
        check(lib().cuFuncGetAttribute(ctypes.byref(v), attr, self.handle), "cuFuncGetAttribute",
              self.name)
        return v.value

    @property
    def n_regs(self) -> int:
        return self.attribute(FUNC_NUM_REGS)

    def set_dynamic_shared(self, nbytes: int):
        """Opt in to dynamic shared memory above 48 KB (up to the device's per-block limit)."""
        static = self.attribute(FUNC_SHARED_SIZE_BYTES)
        limit = self.device.max_shared
        if nbytes + static > limit:
            from ..errors import LaunchError
            raise LaunchError(
                f"kernel '{self.name}' needs {nbytes + static} bytes of shared memory "
                f"({nbytes} dynamic + {static} static), above the {limit} bytes per block of "
                f"{self.device.arch}: use smaller blocks or fewer num_stages")
        if nbytes + static > DEFAULT_SHARED_LIMIT:
            check(lib().cuFuncSetAttribute(self.handle, FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", self.name)


# The name of the most recent kernel launched, so that an error that only surfaces at a later
# synchronisation (a device assert, an illegal address) can still name a suspect.
last_launched = [None]


def synchronize(device_index: int | None = None):
    """Wait for the device; turn an asynchronous kernel failure into a DriverError naming the
    last newt kernel launched, with hints (NEWT_DEBUG, compute-sanitizer). Another device than
    the current one is synchronized in its own context, pushed for the call only: making it
    current would move torch's current device under the caller."""
    cu = lib()
    res = cu.cuCtxSynchronize() if device_index is None else \
        run_in_context(device_index, cu.cuCtxSynchronize)
    if res:
        name = last_launched[0]
        _check_with(cu, res, "kernel execution (seen at synchronize)", name)


def encode_tensor_map_tiled(dtype_code: int, rank: int, address: int, dims, strides_bytes, box,
                            elem_strides=None, interleave=0, swizzle=0, l2_promotion=0,
                            oob_fill=0) -> CUtensorMap:
    """cuTensorMapEncodeTiled (TMA). dims/box innermost first, strides for dims 1.. in bytes."""
    cu = lib()
    if getattr(cu, "cuTensorMapEncodeTiled", None) is None:
        raise DriverError("this driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12+)")
    tm = CUtensorMap()
    d = (c_uint64 * rank)(*dims)
    s = (c_uint64 * max(rank - 1, 1))(*strides_bytes)
    b = (ctypes.c_uint32 * rank)(*box)
    e = (ctypes.c_uint32 * rank)(*(elem_strides or [1] * rank))
    check(cu.cuTensorMapEncodeTiled(ctypes.byref(tm), dtype_code, rank, address, d, s, b, e,
                                    interleave, swizzle, l2_promotion, oob_fill),
          "cuTensorMapEncodeTiled")
    return tm


def __getattr__(name):
    # `driver.active` (Triton's host API, active.py) loads on first use, not with the launch path
    if name == "active":
        from .active import active
        return active
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
