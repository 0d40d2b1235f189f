"""Time the first launch of each named kernel in this (fresh) process; print one JSON line.

    python benchmarks/first_call.py PROVIDER KERNELS     # PROVIDER: newt | triton
                                                         # KERNELS: e.g. add,softmax,layernorm

bench_launch.py runs it in subprocesses with NEWT_CACHE_DIR / TRITON_CACHE_DIR pointing at an
empty folder (cold compile) and then at the same, now warm, folder (first call from the disk
cache). torch's CUDA context and the inputs are set up before the clock starts, as are the
imports: what is timed is the kernel's first `kernel[grid](...)` until the GPU is done.
"""
import json
import sys
import time

import torch


def main():
    provider, names = sys.argv[1], sys.argv[2].split(",")
    torch.cuda.init()
    dev = "cuda"
    x = torch.randn(1 << 16, device=dev)
    y = torch.randn(1 << 16, device=dev)
    o = torch.empty_like(x)
    s = torch.randn(64, 4096, device=dev)
    so = torch.empty_like(s)
    h = torch.randn(64, 4096, device=dev).half()
    w, b, ho = torch.randn(4096, device=dev).half(), torch.randn(4096, device=dev).half(), \
        torch.empty_like(h)
    mean, rstd = torch.empty(64, device=dev), torch.empty(64, device=dev)
    torch.cuda.synchronize()

    import common  # imports newt; kernels are only parsed on first launch
    ks = common.kernels(provider) if provider != "triton" else {
        k: common.triton_twin(common.newt_kernel(k)) for k in names}
    launches = {
        "add": lambda k: common.launch_add(k, x, y, o),
        "softmax": lambda k: common.launch_softmax(k, s, so),
        "layernorm": lambda k: common.launch_layernorm(k, h, w, b, ho, mean, rstd),
    }
    result = {}
    for name in names:
        t0 = time.perf_counter()
        launches[name](ks[name])
        torch.cuda.synchronize()
        result[name] = (time.perf_counter() - t0) * 1e3
    if "add" in names:  # the timed launch computed something real
        torch.testing.assert_close(o, x + y)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
