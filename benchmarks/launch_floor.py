"""Where a warm launch's host time goes, on the GPU: the 4-argument add launched by newt's whole
launch path, and by pieces of it, next to torch.add and Triton in one process (the timing of
bench_launch.host_us_per_launch: batches of 2,000 launches, the fastest of 7, the GPU waited
for at the end of each batch).

    PYTHONPATH=. python benchmarks/launch_floor.py

Rows:
  newt            add[g](x, y, out, n, BLOCK_SIZE=1024, num_warps=4): the benchmark row
  pack+ex         the Launcher's pack_into and its cuLaunchKernelEx, no key or lookup
  ex              cuLaunchKernelEx alone on the packed buffer (the driver's floor for newt)
  ex+stream       ex, plus torch's current-stream getter (what pack+ex calls once)
  legacy          cuLaunchKernel (11 prebuilt ctypes arguments) with the same kernelParams
  buffer          cuLaunchKernel with the arguments as one packed buffer (extra=
                  CU_LAUNCH_PARAM_BUFFER_POINTER): the driver copies a blob, no per-parameter
                  walk
  ex-stream       ex on a created stream instead of torch's default (legacy) stream
  torch, triton   torch.add(x, y, out=out) and the Triton twin
  empty           an empty lambda (the loop's own cost)
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import bench_launch  # noqa: E402
import common  # noqa: E402
from newt.runtime import driver  # noqa: E402


def prepared_add():
    """(add kernel, x, y, out, grid, its Launcher) after one checked launch of the row's add."""
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    add = common.newt_kernel("add")
    g = (4,)
    add[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)
    return add, x, y, out, g, next(iter(add.cache.values()))


def main():
    add, x, y, out, g, L = prepared_add()
    stream_of, dev = L.stream, L.device_index
    vals = (x.data_ptr(), y.data_ptr(), out.data_ptr(), 4096)
    L.pack(L.storage, 0, 4, 1, 1, L.block, 1, 1, L.shared, stream_of(dev), *vals)
    go, gargs = L.go, L.go_args
    a0, a1, a2 = gargs
    cu = driver.lib()
    vp = ctypes.c_void_p.from_param
    raw = cu._FuncPtr(("cuLaunchKernel", cu))
    raw.restype = ctypes.c_int
    u = ctypes.c_uint
    stream = stream_of(dev)
    largs = (vp(L.func), u(4), u(1), u(1), u(L.block), u(1), u(1), u(L.shared), vp(stream),
             vp(L.params_addr), None)
    # the four parameters as the kernel lays them out: three pointers and an i32 (28 bytes)
    blob = ctypes.create_string_buffer(32)
    struct.pack_into("<QQQi", blob, 0, *vals)
    size = ctypes.c_size_t(28)
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(blob), 2, ctypes.addressof(size), 0)
    bargs = (vp(L.func), u(4), u(1), u(1), u(L.block), u(1), u(1), u(L.shared), vp(stream),
             None, vp(ctypes.addressof(extra)))
    # a created stream: the same config buffer with another stream handle
    side = torch.cuda.Stream()
    cfg2 = ctypes.create_string_buffer(ctypes.string_at(L.config_addr, driver.LAUNCH_CONFIG_BYTES),
                                       driver.LAUNCH_CONFIG_BYTES)
    struct.pack_into("<Q", cfg2, 32, side.cuda_stream)
    c2 = vp(ctypes.addressof(cfg2))
    pack, buf, block, shared = L.pack, L.storage, L.block, L.shared
    calls = {
        "newt": lambda: add[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4),
        "pack+ex": lambda: (pack(buf, 0, 4, 1, 1, block, 1, 1, shared, stream_of(dev), *vals),
                            go(a0, a1, a2, None)),
        "ex": lambda: go(a0, a1, a2, None),
        "ex+stream": lambda: (stream_of(dev), go(a0, a1, a2, None)),
        "legacy": lambda: raw(*largs),
        "buffer": lambda: raw(*bargs),
        "ex-stream": lambda: go(c2, a1, a2, None),
        "torch": lambda: torch.add(x, y, out=out),
        "empty": lambda: None,
    }
    if common.have_triton():
        tadd = common.triton_twin(add)
        calls["triton"] = lambda: tadd[g](x, y, out, 4096, BLOCK_SIZE=1024, num_warps=4)
    # each way must launch the kernel: out recomputed from a poisoned buffer
    for name, fn in calls.items():
        if name in ("empty", "ex-stream"):
            continue
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        assert torch.equal(out, x + y), name
    best, med = bench_launch.host_us_per_launch(calls)
    print(f"{'way':12s} {'best us':>8s} {'median':>8s}")
    for name in calls:
        print(f"{name:12s} {best[name]:8.2f} {med[name]:8.2f}")


if __name__ == "__main__":
    main()
