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
import dataclasses
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


def _hand_written():
    """The hand-written newt matmul (examples/05_matmul.py), if present: (fn(x, y, cfg), configs)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "05_matmul.py")
    if not os.path.exists(path):
        return None, []
    spec = importlib.util.spec_from_file_location("newt_example_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    sweep = [dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, num_warps=w, num_stages=s)
             for m, n, k, w, s in [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
                                   (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (64, 128, 64, 4, 4)]]
    return mod.matmul, sweep


def _pinned(cfg, args):
    """A call of the same tile function under `cfg`: dt.kernel(config=...) pins it (no tuning),
    and the call launches through deuteron's recorded plan, as a tuned call does."""
    pinned = dt.kernel(matmul.fn, config=cfg)
    pinned(*args)           # traces, records the launches
    return lambda: pinned(*args)


def bench(sizes=(4096, 8192), device="cuda", timer=None):
    """The --bench table. `timer(fn)` -> ms: newt.testing.do_bench unless given (a test runs
    the table on the interpreter with a stand-in)."""
    from newt.testing import do_bench
    timer = timer or do_bench
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "benchmarks"))
    import common
    # cold: empty deuteron and newt caches, so the time includes every compile
    os.environ["DEUTERON_CACHE_DIR"] = tempfile.mkdtemp(prefix="dt-cache-")
    os.environ["NEWT_CACHE_DIR"] = tempfile.mkdtemp(prefix="newt-cache-")
    hand, sweep = _hand_written()
    # `dt g8`: the tuned config with the tutorial's group_size 8 (the hand-written sweep's), so
    # that a group_size the tuner preferred is checked against it in the same rounds
    print(f"{'size':>6} {'tune s':>7} {'deuteron TFLOP/s':>17} {'hand newt (best)':>17} "
          f"{'dt/hand':>8} {'torch TFLOP/s':>14} {'dt g8':>7}  config")
    dtype = torch.float16 if device == "cuda" else torch.float32
    for n in sizes:
        x = torch.randn(n, n, device=device, dtype=dtype)
        y = torch.randn(n, n, device=device, dtype=dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        t0 = time.perf_counter()
        cfg = matmul.autotune((x, y, out), effort="quick")
        tune_s = time.perf_counter() - t0
        flops = 2 * n ** 3
        calls = {"dt": lambda: matmul(x, y, out),
                 "torch": lambda: torch.matmul(x, y, out=out)}
        if cfg.group_size != 8:
            calls["dt g8"] = _pinned(dataclasses.replace(cfg, group_size=8), (x, y, out))
        for i, c in enumerate(sweep):
            calls[f"hand {i}"] = (lambda c=c: hand(x, y, config=c))
        # interleaved rounds, the order rotated (benchmarks/common.py): the first provider
        # timed after the tuning's load is not always the same one
        ms, notes = common.timed_in_rounds(calls, lambda fn: (timer(fn), None))
        for name, note in notes.items():      # a config the compiler cannot build yet
            print(f"  {name}: {note[:120]}")
        ms_hand = min((t for k, t in ms.items() if k.startswith("hand ")), default=float("inf"))
        tf = lambda ms: flops / ms * 1e-9   # noqa: E731
        g8 = f"{tf(ms['dt g8']):>7.1f}" if "dt g8" in ms else f"{'-':>7}"
        print(f"{n:>6} {tune_s:>7.1f} {tf(ms['dt']):>17.1f} {tf(ms_hand):>17.1f} "
              f"{ms_hand / ms['dt']:>8.3f} {tf(ms['torch']):>14.1f} {g8}  {cfg}")


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
