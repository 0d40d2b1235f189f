"""dt_layernorm: layer normalization (forward) as a deuteron tile function.

Rows of 1,500 (not a power of two) come out right with no mask anywhere in the user code: the
mean sums loaded lanes (padded with 0), but `centered * centered` is not 0 on padded lanes, so
deuteron masks that sum itself. Statistics in fp32, output in the input's dtype.

    python examples/dt_layernorm.py [--small] [--bench]

--bench (GPU): the TARGETS.md workload, fp16 32768x4096: cold autotune time and GB/s against
the hand-written newt kernel (examples/03_layernorm.py, which also writes mean and rstd) and torch.
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
def layernorm(x, weight, bias, eps: float = 1e-5):
    out = torch.empty_like(x)
    for tile_m in dt.tile(x.shape[0]):
        row = x[tile_m, :].to(torch.float32)
        mean = row.mean(dim=-1, keepdim=True)
        centered = row - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        normed = centered * torch.rsqrt(var + eps)
        out[tile_m, :] = (normed * weight[:].float() + bias[:].float()).to(x.dtype)
    return out


def setup_device() -> str:
    if torch.cuda.is_available() and not newt.options.flags.interpret:
        return "cuda"
    newt.options.flags.interpret = True
    print("note: no CUDA device: running on the CPU interpreter (NEWT_INTERPRET=1), small sizes")
    return "cpu"


def check(device, small=True):
    cases = [(5, 1500, torch.float16), (3, 1500, torch.float32), (7, 64, torch.float16)]
    if device == "cuda" and not small:
        cases += [(4096, 1500, torch.float16), (32768, 4096, torch.float16)]
    for m, n, dtype in cases:
        x = (torch.randn(m, n, device=device) * 3 + 2).to(dtype)   # a large mean tests the mask
        w = torch.randn(n, device=device, dtype=dtype)
        b = torch.randn(n, device=device, dtype=dtype)
        want = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
        got = layernorm(x, w, b)
        tol = 1e-2 if dtype == torch.float16 else 1e-4
        torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol,
                                   msg=lambda s: f"dt layernorm {m}x{n} {dtype}: {s}")


def bench():
    from newt.testing import do_bench
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import common
    hand = common.example("layernorm").layernorm
    os.environ["DEUTERON_CACHE_DIR"] = tempfile.mkdtemp(prefix="dt-cache-")
    m, n = 32768, 4096
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    w = torch.randn(n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, device="cuda", dtype=torch.float16)
    t0 = time.perf_counter()
    cfg = layernorm.autotune((x, w, b), effort="quick")
    tune_s = time.perf_counter() - t0
    gbs = lambda ms: (2 * m * n + 2 * n) * 2 / ms * 1e-6   # noqa: E731
    ms_dt = do_bench(lambda: layernorm(x, w, b), return_mode="median")
    ms_hand = do_bench(lambda: hand(x, w, b), return_mode="median")
    ms_torch = do_bench(lambda: torch.nn.functional.layer_norm(x, (n,), w, b),
                        return_mode="median")
    print(f"layernorm fp16 {m}x{n}: tune {tune_s:.1f} s, deuteron {gbs(ms_dt):.0f} GB/s, "
          f"hand-written newt {gbs(ms_hand):.0f} GB/s ({ms_hand / ms_dt:.3f}x), "
          f"torch {gbs(ms_torch):.0f} GB/s; {cfg}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    device = setup_device()
    x = torch.randn(5, 1500, device=device, dtype=torch.float16)
    w = torch.randn(1500, device=device, dtype=torch.float16)
    print(layernorm.to_newt_source(x, w, w))
    check(device, small="--small" in argv)
    print("deuteron layernorm matches torch (rows of 1,500, no mask in user code)")
    if "--bench" in argv and device == "cuda":
        bench()


if __name__ == "__main__":
    main()
