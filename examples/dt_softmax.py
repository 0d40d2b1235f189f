"""dt_softmax: row softmax as a deuteron tile function.

One tile of rows per program (the tuner's default is one row, the block the next power of two
of the row length). No masks in the code: the padded lanes of `x[tile_m, :]` are replaced by
-inf before the max and by 0 before the sum, because masks propagate through the traced
expressions.

    python examples/dt_softmax.py [--small] [--bench]

--bench (GPU): the TARGETS.md workload, fp32 32768x4096: cold autotune time and GB/s against
the hand-written newt kernel (examples/02_fused_softmax.py) and torch.
"""
import os
import sys
import tempfile
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import deuteron as dt  # noqa: E402
import newt  # noqa: E402


@dt.kernel
def softmax(x):
    out = torch.empty_like(x)
    for tile_m in dt.tile(x.shape[0]):
        row = x[tile_m, :]
        num = torch.exp(row - row.amax(dim=1, keepdim=True))
        out[tile_m, :] = num / num.sum(dim=1, keepdim=True)
    return out


def setup_device() -> str:
    if torch.cuda.is_available() and not newt.options.flags.interpret:
        return "cuda"
    newt.options.flags.interpret = True
    print("note: no CUDA device: running on the CPU interpreter (NEWT_INTERPRET=1), small sizes")
    return "cpu"


def check(device, small=True):
    shapes = [(1, 1), (37, 781), (5, 1024)]
    if device == "cuda" and not small:
        shapes += [(1823, 4097), (32768, 4096)]
    for m, n in shapes:
        x = torch.randn(m, n, device=device) * 4 - 3
        torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1),
                                   msg=lambda s: f"dt softmax {m}x{n}: {s}")


def bench():
    from newt.testing import do_bench
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import common
    hand = common.example("softmax").softmax
    os.environ["DEUTERON_CACHE_DIR"] = tempfile.mkdtemp(prefix="dt-cache-")
    m, n = 32768, 4096
    x = torch.randn(m, n, device="cuda")
    out = torch.empty_like(x)
    t0 = time.perf_counter()
    cfg = softmax.autotune((x,), effort="quick")
    tune_s = time.perf_counter() - t0
    gbs = lambda ms: 2 * m * n * 4 / ms * 1e-6   # noqa: E731
    ms_dt = do_bench(lambda: softmax(x), return_mode="median")
    ms_hand = do_bench(lambda: hand(x, out), return_mode="median")
    ms_torch = do_bench(lambda: torch.softmax(x, dim=1), return_mode="median")
    print(f"softmax fp32 {m}x{n}: tune {tune_s:.1f} s, deuteron {gbs(ms_dt):.0f} GB/s, "
          f"hand-written newt {gbs(ms_hand):.0f} GB/s ({ms_hand / ms_dt:.3f}x), "
          f"torch {gbs(ms_torch):.0f} GB/s; {cfg}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    device = setup_device()
    x = torch.randn(37, 781, device=device)
    print(softmax.to_newt_source(x))
    check(device, small="--small" in argv)
    print("deuteron softmax matches torch")
    if "--bench" in argv and device == "cuda":
        bench()


if __name__ == "__main__":
    main()
