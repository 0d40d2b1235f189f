"""The runtime on a real GPU (skipped without CUDA): launches agree with torch on the current
stream, dynamic shared memory above 48 KB, driver errors that name the kernel, and a first call
in a fresh process with a warm disk cache that never compiles. Timings are printed, not asserted
(run with -s to see them)."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch

import newt
import newt.language as nl

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(newt.__file__)))


@pytest.fixture(autouse=True)
def _cuda_target(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", False)


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) + nl.load(y_ptr + offs, mask=mask),
             mask=mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n", [1, 17, 1000, 4099])
def test_add_matches_torch(tmp_cache, dtype, n):
    x = torch.randn(n, device="cuda", dtype=dtype)
    y = torch.randn(n, device="cuda", dtype=dtype)
    out = torch.full_like(x, float("nan"))
    add_kernel[lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)](x, y, out, n, BLOCK=256)
    torch.testing.assert_close(out, x + y)
    out2 = torch.full_like(x[1:], float("nan"))          # misaligned views: another specialization
    add_kernel[(newt.cdiv(n - 1, 128) or 1,)](x[1:], y[1:], out2, n - 1, BLOCK=128, num_warps=2)
    torch.testing.assert_close(out2, x[1:] + y[1:])


def test_launches_on_the_current_stream(tmp_cache):
    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            add_kernel[(newt.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    s.synchronize()
    torch.testing.assert_close(out, x + y)


SMEM_REVERSE = r'''
extern "C" __global__ void smem_reverse(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
'''


def _raw_launcher(source, name, params, threads, shared):
    from newt.runtime import cache, driver, nvrtc
    from newt.runtime.launch import Launcher
    dev = driver.Device.get(torch.cuda.current_device())
    res = nvrtc.compile_cuda(source, name, dev.arch)
    meta = dict(name=name, params=[dict(name=f"p{i}", dtype=d, index=i)
                                   for i, d in enumerate(params)],
                num_threads=threads, shared_bytes=shared)
    return Launcher(cache.KernelBinary(meta, res.cubin), dev, list(range(len(params))))


def test_dynamic_shared_memory_above_48k():
    n = 100 * 1024 // 4                                   # 100 KB of floats
    L = _raw_launcher(SMEM_REVERSE, "smem_reverse", ["*fp32", "*fp32", "i32"], 256, n * 4)
    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    L.launch(1, 1, 1, (x.data_ptr(), out.data_ptr(), n))
    torch.testing.assert_close(out, x.flip(0))


def test_too_much_shared_memory_is_a_launch_error():
    from newt.runtime import driver
    limit = driver.Device.get(torch.cuda.current_device()).max_shared
    with pytest.raises(newt.LaunchError, match="shared memory"):
        _raw_launcher(SMEM_REVERSE, "smem_reverse", ["*fp32", "*fp32", "i32"], 256, limit + 4096)


def test_device_info():
    from newt.runtime import driver
    d = driver.Device.get(torch.cuda.current_device())
    major, minor = torch.cuda.get_device_capability()
    assert d.capability == (major, minor)
    assert d.sm_count == torch.cuda.get_device_properties(d.index).multi_processor_count
    assert d.arch == driver.arch_of(major, minor)


FAULT = '''
import sys, torch
sys.path.insert(0, {root!r})
import newt
from newt.runtime import cache, driver, nvrtc
from newt.runtime.launch import Launcher
src = 'extern "C" __global__ void bad_store(float* p) {{ p[threadIdx.x] = 1.0f; }}'
dev = driver.Device.get(0)
meta = dict(name="bad_store", params=[dict(name="p", dtype="*fp32", index=0)], num_threads=32,
            shared_bytes=0)
L = Launcher(cache.KernelBinary(meta, nvrtc.compile_cuda(src, "bad_store", dev.arch).cubin), dev, [0])
L.launch(1, 1, 1, (16,))                                  # an address nobody owns
try:
    newt.runtime.synchronize()
except newt.DriverError as e:
    print("DRIVER_ERROR", e)
'''


def test_fault_is_reported_with_kernel_name_and_hints():
    # In a child process: an illegal address leaves the CUDA context unusable.
    r = subprocess.run([sys.executable, "-c", FAULT.format(root=ROOT)], capture_output=True,
                       text=True, timeout=300)
    out = r.stdout
    assert "DRIVER_ERROR" in out, (r.stdout, r.stderr)
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in out and "bad_store" in out
    assert "compute-sanitizer" in out and "NEWT_DEBUG" in out


FIRST_CALL = '''
import sys, time, json
sys.path[:0] = [{kdir!r}, {root!r}]
import torch
torch.cuda.init()
x = torch.randn(4097, device="cuda"); y = torch.randn(4097, device="cuda")
out = torch.full_like(x, float("nan"))
torch.cuda.synchronize()
import newt, kmod
if {warm}:
    import newt.compiler
    def no(*a, **k):
        raise AssertionError("compiled on a warm cache")
    newt.compiler.compile = no
t = time.perf_counter()
kmod.add_kernel[(5,)](x, y, out, 4097, BLOCK=1024)
t1 = time.perf_counter()
torch.cuda.synchronize()
ok = bool(torch.allclose(out, x + y))
heavy = sorted(m for m in sys.modules if m.startswith(("newt.frontend", "newt.codegen", "newt.passes")))
print(json.dumps(dict(ms=(t1 - t) * 1e3, ok=ok, heavy=heavy)))
'''

KMOD = '''
import newt
import newt.language as nl

@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) + nl.load(y_ptr + offs, mask=mask),
             mask=mask)
'''


def test_first_call_with_warm_disk_cache(tmp_path):
    (tmp_path / "kmod.py").write_text(KMOD)
    env = dict(os.environ, NEWT_CACHE_DIR=str(tmp_path / "cache"))
    res = {}
    for warm in (False, True):
        code = FIRST_CALL.format(kdir=str(tmp_path), root=ROOT, warm=warm)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        res[warm] = json.loads(r.stdout.strip().splitlines()[-1])
        assert res[warm]["ok"]
    assert res[True]["heavy"] == []
    print(f"\nfirst call: cold {res[False]['ms']:.1f} ms, warm disk cache {res[True]['ms']:.2f} ms")


@newt.jit
def mm_shaped(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BM + nl.arange(0, BM)
    mask = offs < M
    nl.store(c + offs * scm, nl.load(a + offs * sam, mask=mask), mask=mask)


def test_launch_overhead_report(tmp_cache):
    """Host time per warm launch (printed; TARGETS.md: <= 6 us for 4 args, <= 8 us for 12)."""
    x = torch.randn(1024, device="cuda")
    a = torch.randn(64, 64, device="cuda")

    def t_add():
        add_kernel[(1,)](x, x, x, 1024, BLOCK=1024)

    def t_mm():
        mm_shaped[(1,)](a, a, a, 64, 64, 64, 64, 1, 64, 1, 64, 1, BM=64)
    for name, f in (("4-arg add", t_add), ("12-arg matmul-shaped", t_mm)):
        f()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            n = 2000
            t = time.perf_counter()
            for _ in range(n):
                f()
            best = min(best, (time.perf_counter() - t) / n * 1e6)
            torch.cuda.synchronize()
        print(f"\n{name}: {best:.2f} us host time per launch")
