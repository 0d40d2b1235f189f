"""Test doubles for the runtime: a stand-in CUDA driver (runtime_fake_libcuda.c, built with the
system C compiler) and a fake compile() that returns a CompiledKernel-shaped object. They let
the launch path run on CPU tensors on a machine without a GPU."""
import ctypes
import functools
import os
import shutil
import subprocess
import types

import pytest

from newt import dtypes

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_CUBIN = b"\x7fELF" + b"\0" * 60


def build_fake_libcuda(out_dir) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in CUDA driver")
    out = os.path.join(str(out_dir), "libfakecuda.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", out,
                    os.path.join(HERE, "runtime_fake_libcuda.c")], check=True)
    return out


class FakeCompile:
    """Stands in for newt.compiler.compile: records calls; params equal to 1 are dropped, as the
    compile contract says; shared_bytes from the BLOCK constexpr when `shared_per_block` is set."""

    def __init__(self, shared_bytes=0):
        self.calls = []
        self.shared_bytes = shared_bytes

    def __call__(self, fn, signature, constexprs=None, *, arch="sm_90a", num_warps=4,
                 num_stages=3, specialization=None):
        self.calls.append(dict(fn=fn, signature=dict(signature), constexprs=dict(constexprs or {}),
                               arch=arch, num_warps=num_warps, num_stages=num_stages,
                               specialization=specialization))
        names = list(fn.arg_names)
        params = []
        for n, s in signature.items():
            if (specialization or {}).get(n, {}).get("equal_to_1"):
                continue
            params.append(types.SimpleNamespace(name=n, dtype=dtypes.from_signature(s),
                                                index=names.index(n)))
        return types.SimpleNamespace(
            name=fn.__name__, params=params, num_threads=32 * num_warps,
            shared_bytes=self.shared_bytes, n_regs=32, n_spills=0, local_bytes=0,
            options=types.SimpleNamespace(arch=arch, num_warps=num_warps, num_stages=num_stages),
            cubin=FAKE_CUBIN)


def fake_state(cu):
    g = lambda name, t=ctypes.c_int: t.in_dll(cu, name)  # noqa: E731
    return types.SimpleNamespace(
        launches=g("fake_launches").value,
        grid=tuple((ctypes.c_uint * 3).in_dll(cu, "fake_last_grid")),
        block=tuple((ctypes.c_uint * 3).in_dll(cu, "fake_last_block")),
        shared=g("fake_last_shared", ctypes.c_uint).value,
        stream=g("fake_last_stream", ctypes.c_void_p).value,
        params=list((ctypes.c_uint64 * 64).in_dll(cu, "fake_last_params")),
        dyn_shared_set=g("fake_dyn_shared_set").value,
        modules=g("fake_modules_loaded").value)


def install_fake_gpu(cu, monkeypatch):
    """Make the runtime use the stand-in driver `cu` (from driver.load_library), with CPU tensors
    standing in for CUDA tensors of device 0 and a fixed stream handle (0x5000 + device)."""
    import newt
    from newt.runtime import driver, launch, specialize
    ctypes.c_int.in_dll(cu, "fake_nparams").value = 8
    ctypes.c_int.in_dll(cu, "fake_launch_result").value = 0
    ctypes.c_int.in_dll(cu, "fake_sync_result").value = 0
    monkeypatch.setattr(driver, "_lib", cu)
    monkeypatch.setattr(driver.Device, "_all", {})
    # The stand-in's devices are not torch's: on a machine with a real GPU, torch would be asked
    # to initialise a device the stand-in invents (device 1 of two) and refuse the ordinal.
    monkeypatch.setattr(driver, "_torch_cuda_ready", lambda index: None)
    monkeypatch.setattr(driver, "current_device_index", lambda: 0)
    monkeypatch.setattr(specialize, "specialize",
                        functools.partial(specialize.specialize, allow_cpu=True))
    monkeypatch.setattr(launch, "_raw_stream_getter", lambda: (lambda i: 0x5000 + i))
    monkeypatch.setattr(newt.options.flags, "interpret", False)
