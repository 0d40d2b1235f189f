"""The GPU-side cost of starting a kernel, on the GPU: an empty kernel of the matmul's grid
(128 CTAs of 256 threads) timed as do_bench times a kernel (L2 flush, start event, launch, end
event), over its parameter bytes and its dynamic shared memory. The host runs ahead (the flush
takes tens of microseconds), so the events measure only what the GPU does between them.

    PYTHONPATH=. python benchmarks/launch_latency.py

Rows: parameter bytes (64: a dozen scalars and pointers; 448: the same plus three 128-byte
tensor maps, as the TMA matmul takes) x dynamic shared memory (0, 144 KB, 192 KB, 211 KB:
none, a 3-stage and a 4-stage 128x256x64 ring, the persistent kernel's 216,064 bytes), each
after the flush and back to back (no flush: the previous launch had the same configuration).
"""
from __future__ import annotations

import ctypes
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from newt.runtime import driver, nvrtc  # noqa: E402

SRC = r"""
struct __align__(64) P64 { unsigned long long w[8]; };
struct __align__(64) P448 { unsigned long long w[56]; };
extern "C" __global__ void __launch_bounds__(256, 1)
k64(const __grid_constant__ P64 p, int* out) {
  extern __shared__ char sm[];
  if (threadIdx.x == 0 && p.w[1] == 12345ull) out[blockIdx.x] = sm[0];
}
extern "C" __global__ void __launch_bounds__(256, 1)
k448(const __grid_constant__ P448 p, int* out) {
  extern __shared__ char sm[];
  if (threadIdx.x == 0 && p.w[1] == 12345ull) out[blockIdx.x] = sm[0];
}
"""


def main():
    torch.cuda.init()
    torch.empty(1, device="cuda")
    dev = driver.Device.get(torch.cuda.current_device())
    res = nvrtc.compile_cuda(SRC, "k64", dev.arch)
    mod = driver.Module(dev, res.cubin, "latency")
    out = torch.zeros(1024, dtype=torch.int32, device="cuda")
    cu = driver.lib()
    stream = torch.cuda.current_stream().cuda_stream
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    reps = int(os.environ.get("REPS", "300"))
    rows = []
    for pbytes in (64, 448):
        k = mod.get_kernel(f"k{pbytes}")
        blob = ctypes.create_string_buffer(pbytes)
        ptr = ctypes.c_void_p(out.data_ptr())
        params = (ctypes.c_void_p * 2)(ctypes.addressof(blob), ctypes.addressof(ptr))
        for smem in (0, 147456, 196608, 216064):
            k.set_dynamic_shared(smem)

            def launch():
                driver.check(cu.cuLaunchKernel(k.handle, 128, 1, 1, 256, 1, 1, smem, stream,
                                               params, None), "cuLaunchKernel")
            for flush in (True, False):
                launch()
                torch.cuda.synchronize()
                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(reps)]
                for s, e in ev:
                    if flush:
                        cache.zero_()
                    s.record()
                    launch()
                    e.record()
                torch.cuda.synchronize()
                us = statistics.median(s.elapsed_time(e) * 1e3 for s, e in ev)
                rows.append((pbytes, smem, flush, us))
                print(rows[-1], flush=True)
    print(f"\n{'params':>6} {'smem':>7} {'after':>6} {'us':>6}")
    for p, s, f, us in rows:
        print(f"{p:6d} {s:7d} {'flush' if f else 'same':>6} {us:6.2f}")


if __name__ == "__main__":
    main()
