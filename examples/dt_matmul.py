"""dt_matmul: the deuteron matmul from the founding write-up; it prints the newt kernel it
generates.

The tile function has no program ids, offsets, masks or block sizes. deuteron traces it: the
outer `dt.tile` loop becomes the launch grid, the inner one a device loop, the indexing pointer
arithmetic with boundary masks, and `@` a tensor-core `nl.dot` fused into the accumulator.
The first call autotunes (every candidate checked against `matmul.ref`, the same function run
as eager PyTorch) and caches the winner on disk; later calls launch directly.

    python examples/dt_matmul.py [--small] [--bench]

On a GPU: the write-up's 512x512 fp16 example, odd shapes checked against torch, and with
--bench the fp16 4096/8192 workloads: cold autotune time (empty caches) and TFLOP/s against
torch (cuBLAS). Without a GPU: small odd shapes on the newt interpreter.
"""
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import deuteron as dt  # noqa: E402
import newt  # noqa: E402


@dt.kernel
def matmul(x, y, out):
    for tile_m, tile_n in dt.tile([x.shape[0], y.shape[1]]):
        acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
        out[tile_m, tile_n] = acc


def setup_device() -> str:
    if torch.cuda.is_available() and not newt.options.flags.interpret:
        return "cuda"
    newt.options.flags.interpret = True
    print("note: no CUDA device: running on the CPU interpreter (NEWT_INTERPRET=1), small sizes")
    return "cpu"


def check(device, small=True):
    dtype = torch.float16 if device == "cuda" else torch.float32
    shapes = [(37, 29, 45), (64, 48, 80)]
    if device == "cuda" and not small:
        shapes += [(1000, 777, 1333), (512, 512, 512)]
    for m, k, n in shapes:
        x = torch.randn(m, k, device=device, dtype=dtype)
        y = torch.randn(k, n, device=device, dtype=dtype)
        out = torch.full((m, n), float("nan"), device=device, dtype=dtype)
        matmul(x, y, out)
        torch.testing.assert_close(out.float(), x.float() @ y.float(), rtol=2e-2, atol=5e-2,
                                   msg=lambda s: f"dt matmul {m}x{k}x{n}: {s}")


def bench():
    from newt.testing import do_bench
    # cold: empty deuteron and newt caches, so the time includes every compile
    os.environ["DEUTERON_CACHE_DIR"] = tempfile.mkdtemp(prefix="dt-cache-")
    os.environ["NEWT_CACHE_DIR"] = tempfile.mkdtemp(prefix="newt-cache-")
    print(f"{'size':>6} {'tune s':>7} {'deuteron TFLOP/s':>17} {'torch TFLOP/s':>14}  config")
    for n in (4096, 8192):
        x = torch.randn(n, n, device="cuda", dtype=torch.float16)
        y = torch.randn(n, n, device="cuda", dtype=torch.float16)
        out = torch.empty(n, n, device="cuda", dtype=torch.float16)
        t0 = time.perf_counter()
        cfg = matmul.autotune((x, y, out), effort="quick")
        tune_s = time.perf_counter() - t0
        flops = 2 * n ** 3
        ms_dt = do_bench(lambda: matmul(x, y, out))
        ms_torch = do_bench(lambda: torch.matmul(x, y, out=out))
        print(f"{n:>6} {tune_s:>7.1f} {flops / ms_dt * 1e-9:>17.1f} {flops / ms_torch * 1e-9:>14.1f}  {cfg}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    device = setup_device()
    n, dtype = (512, torch.float16) if device == "cuda" else (48, torch.float32)
    x = torch.randn(n, n, device=device, dtype=dtype)
    y = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    matmul(x, y, out)                          # traces, autotunes, caches, launches
    print(matmul.to_newt_source(x, y, out))    # the generated newt kernel
    print("config:", matmul.config_for((x, y, out)))
    check(device, small="--small" in argv)
    print("deuteron matmul matches torch")
    if "--bench" in argv and device == "cuda":
        bench()


if __name__ == "__main__":
    main()
