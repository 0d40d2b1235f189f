"""NVRTC binding: compiles for sm_80 and sm_90a on a CPU, reports registers, formats errors."""
import pytest

import newt
from newt.runtime import nvrtc

ADD = r'''
extern "C" __global__ void add_kernel(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
'''

SMEM = r'''
extern "C" __global__ void smem_kernel(float* out) {
    __shared__ float buf[256];
    buf[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[255 - threadIdx.x];
}
'''


def test_version():
    v = nvrtc.version()
    major, minor = v.split(".")
    assert int(major) >= 12 and minor.isdigit()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compile_add(arch):
    r = nvrtc.compile_cuda(ADD, "add_kernel", arch)
    assert r.cubin[:4] == b"\x7fELF"
    assert ".entry add_kernel" in r.ptx
    assert f".target {arch}" in r.ptx
    rep = nvrtc.parse_ptxas_report(r.log)
    if rep["n_regs"] < 0:
        # NVRTC 13.0 on some machines returns an empty log in a process that has loaded
        # torch's CUDA libraries: the report then comes from the cubin (runtime/cubin.py)
        assert "ptxas info" not in r.log
        rep = r.report
    assert rep["n_regs"] > 0 and rep["n_spills"] == 0 and rep["local_bytes"] == 0
    assert r.report == rep


def test_static_shared_reported():
    """Static shared memory in the compile's report: from ptxas's -v log, or from the cubin
    when NVRTC returns an empty log (some NVRTC builds do, on the H200 machine among them)."""
    r = nvrtc.compile_cuda(SMEM, "smem_kernel", "sm_90a")
    assert r.report["shared_bytes"] == 1024 and r.report["n_regs"] > 0
    if r.log.strip():
        assert nvrtc.parse_ptxas_report(r.log)["shared_bytes"] == 1024


def test_parse_report_picks_entry_and_spills():
    log = ("ptxas info    : Compiling entry function 'a' for 'sm_80'\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 10 registers, used 0 barriers\n"
           "ptxas info    : Compiling entry function 'b' for 'sm_80'\n"
           "ptxas         .     48 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem\n")
    assert nvrtc.parse_ptxas_report(log, "b") == dict(
        n_regs=255, n_spills=40, local_bytes=48, shared_bytes=2048)
    assert nvrtc.parse_ptxas_report(log)["n_regs"] == 10
    assert nvrtc.parse_ptxas_report("")["n_regs"] == -1


def test_error_shows_log_and_numbered_source():
    src = 'extern "C" __global__ void bad_kernel() {\n    int x = undefined_name;\n}\n'
    with pytest.raises(newt.NVRTCError) as ei:
        nvrtc.compile_cuda(src, "bad_kernel", "sm_80")
    msg = str(ei.value)
    assert "bad_kernel" in msg and "sm_80" in msg
    assert "undefined_name" in msg and "is undefined" in msg      # the log
    assert "2 |     int x = undefined_name;" in msg              # numbered source


def test_bad_arch_rejected():
    with pytest.raises(newt.NVRTCError, match="arch"):
        nvrtc.compile_cuda(ADD, "add_kernel", "hopper")


def test_missing_library_names_places(monkeypatch):
    monkeypatch.setattr(nvrtc, "_lib", None)
    monkeypatch.setattr(nvrtc, "_candidate_dirs", lambda: ["/nonexistent/nvrtc/dir"])
    monkeypatch.setattr(nvrtc, "_SONAMES", ("libnvrtc-does-not-exist.so.99",))
    with pytest.raises(newt.NVRTCError) as ei:
        nvrtc.load()
    msg = str(ei.value)
    assert "/nonexistent/nvrtc/dir" in msg and "loader path" in msg and "pip install" in msg


_NO_BUILTINS = r'''
import ctypes, ctypes.util, sys
from newt.errors import NVRTCError
if ctypes.util.find_library("nvrtc-builtins"):   # the system's loader finds it anyway
    print("BUILTINS ON THE LOADER PATH")
    sys.exit(0)
from newt.runtime import nvrtc
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
nvrtc._declare(lib)
nvrtc._lib, nvrtc._lib_path = lib, sys.argv[1]
try:
    nvrtc.compile_cuda('extern "C" __global__ void k() {}', "k", "sm_90a")
except NVRTCError as e:
    print(e)
'''


def test_missing_builtins_library_names_the_fix(tmp_path):
    """libnvrtc without its builtins library beside it (a copy alone in a folder, in a process
    of its own: a loaded builtins library would be found by name): the error names the library
    and the install command, not the kernel's source."""
    import os
    import shutil
    import subprocess
    import sys
    nvrtc.load()
    real = os.path.realpath(nvrtc._lib_path)
    copy = tmp_path / os.path.basename(nvrtc._lib_path)
    shutil.copy(real, copy)
    env = dict(os.environ, LD_LIBRARY_PATH="")
    out = subprocess.run([sys.executable, "-c", _NO_BUILTINS, str(copy)], capture_output=True,
                         text=True, env=env, cwd=os.path.dirname(os.path.dirname(newt.__file__)),
                         timeout=120)
    msg = out.stdout
    if "BUILTINS ON THE LOADER PATH" in msg:
        pytest.skip("this machine's loader finds libnvrtc-builtins by name (a CUDA install)")
    assert "libnvrtc-builtins" in msg and "pip install nvidia-cuda-nvrtc" in msg, out
    assert "LD_LIBRARY_PATH" in msg and "__global__" not in msg, msg
