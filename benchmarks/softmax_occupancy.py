"""An experiment on the GPU: does the TARGETS softmax (fp32 32768x4096, one row per program, 8
warps) run faster with fewer CTAs resident per SM? deuteron's tuner picks 16 warps for the same
softmax and reads 1.1-1.5% above the 8-warp kernel in every call since 2026-11-29. At 16 warps
an SM holds 4 rows at a time, at 8 warps 8. Here the same 8-warp kernel is launched with unused
dynamic shared memory that caps its residency: 0 (8 CTAs per SM, thread-bound), 30 KB (7), 32
KB (6), 40 KB (5), 48 KB (4) and 64 KB (3). Beside it run Triton's kernel from the same source
with the same launch, and newt's at 16 warps. Every launch is checked against torch first,
then timed in interleaved rounds.

    PYTHONPATH=. [ROUNDS=5] python benchmarks/softmax_occupancy.py

The padding goes into the Launcher's shared-memory size (what cuLaunchKernelEx receives), so
the kernel's code is the benchmark's. An SM holds 228 KB of shared memory; each CTA also takes
1 KB the system reserves.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from newt.testing import do_bench  # noqa: E402

PADS_KB = (0, 30, 32, 40, 48, 64)
SM_SHARED, RESERVED = 228 * 1024, 1024


def resident(pad_bytes: int, base_bytes: int = 0, threads: int = 256, regs_limit: int = 8) -> int:
    """CTAs one SM holds with `pad_bytes` more dynamic shared memory (bounded by 2048 threads
    and by `regs_limit`, the register bound ptxas reports as blocks per SM)."""
    per = base_bytes + pad_bytes + RESERVED
    return min(SM_SHARED // per, 2048 // threads, regs_limit)


def occupancy(launcher, shared: int) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor for the launcher's kernel and block."""
    import ctypes
    from newt.runtime import driver
    blocks = ctypes.c_int()
    fn = driver.lib().cuOccupancyMaxActiveBlocksPerMultiprocessor
    driver.check(fn(ctypes.byref(blocks), ctypes.c_void_p(launcher.func),
                    ctypes.c_int(launcher.block), ctypes.c_size_t(shared)),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    return blocks.value


def main():
    m, n = 32768, 4096
    x = torch.randn(m, n, device="cuda")
    out = torch.empty_like(x)
    ref = torch.softmax(x, dim=1)
    nk = common.newt_kernel("softmax")
    common.launch_softmax(nk, x, out)
    torch.cuda.synchronize()
    launcher = next(iter(nk.cache.values()))
    base = launcher.shared
    grid, vals = (m, 1, 1), (out.data_ptr(), x.data_ptr(), x.stride(0), out.stride(0), n)

    def padded(pad):
        def go():
            launcher.shared = base + pad
            launcher.launch(*grid, vals)
        return go

    launcher.kernel.set_dynamic_shared(base + max(PADS_KB) * 1024)
    calls = {}
    for p in PADS_KB:     # the label: the driver's residency (the arithmetic's in brackets)
        got = occupancy(launcher, base + p * 1024)
        calls[f"newt 8w +{p} KB {got}/SM ({resident(p * 1024, base)})"] = padded(p * 1024)
    k16 = common.newt_kernel("softmax")

    def newt16():
        k16[(m,)](out, x, x.stride(0), out.stride(0), n, BLOCK_SIZE=n, num_warps=16)
    calls["newt 16w"] = newt16
    if common.have_triton():
        tk = common.triton_twin(nk)
        calls["triton 8w"] = lambda: common.launch_softmax(tk, x, out)
    for name, fn in calls.items():          # correctness first, poisoned output
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6, msg=lambda s: f"{name}: {s}")
    nbytes = 2 * m * n * 4
    ms, _ = common.timed_in_rounds(calls, lambda fn: (do_bench(fn, return_mode="median"), None),
                                   rounds=int(os.environ.get("ROUNDS", "5")))
    launcher.shared = base
    print(f"\nsoftmax fp32 {m}x{n}, {torch.cuda.get_device_name()}, newt.testing.do_bench medians")
    for name, t in ms.items():
        print(f"  {name:32} {common.gbps(nbytes, t):7.0f} GB/s")


if __name__ == "__main__":
    main()
