# Lab script, measured on commit 60057ea: it patches the library's internals of that commit
# (check it out to rerun it); not run by the test suite.
"""Experiments on the H200: the fused attention kernel with a pass switched off, timed against
itself, Triton and SDPA in one process (each variant checked first against SDPA on odd shapes
with NaN-poisoned outputs). A place to try a codegen idea before building it into the
passes; matmul_variants.py is the same for the matmul.

    PYTHONPATH=. [VARIANTS=base,cpasync] [ROUNDS=5] python benchmarks/attention_variants.py

Variants:
  base     the generated code (sm_90a: K and V tiles by TMA, passes/ring_tma.py)
  cpasync  the ring-TMA pass off: K and V copied by every thread with cp.async

Measured 2026-12-01 20:35 UTC (device clock), before passes/ring_tma.py existed, with the
generated code hand-transformed to TMA (the transform this pass now makes: one thread arms the
stage's mbarrier and issues one 4-D box per 128-byte panel of K and V, map dims head dim, key
index, head, batch; every thread waits on the mbarrier instead of cp.async.wait_group, the
proxy fence and, at D=64, a block barrier), non-causal, 5 rounds, TFLOP/s:
  D=64   cp.async 404, TMA 428, Triton 408, SDPA 443
  D=128  cp.async 434, TMA 469, Triton 435, SDPA 573
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torch  # noqa: E402

from newt.passes import ring_tma  # noqa: E402

VARIANTS = os.environ.get("VARIANTS", "base,cpasync").split(",")
CURRENT = ["base"]


def _ring_tma(fn, options, _orig=ring_tma.plan_ring_tma):
    if CURRENT[0] != "cpasync":
        _orig(fn, options)


def install():
    """Route the ring-TMA decision through the current variant (this process only)."""
    ring_tma.plan_ring_tma = _ring_tma


CASES = [(64, False), (128, False), (64, True), (128, True)]
CHECK = [(2, 3, 1000, 64), (1, 2, 777, 128), (2, 2, 1024, 64), (1, 3, 1024, 128)]


def _check(m, name, shape, causal, qkv=None):
    """One variant against SDPA on fresh data (or qkv) of `shape`, NaN-poisoned output."""
    q, k, v = qkv or [torch.randn(*shape, device="cuda", dtype=torch.float16) for _ in range(3)]
    o = torch.full_like(q, float("nan"))
    m.attention(q, k, v, causal, out=o)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    err = float((o.float() - ref.float()).abs().max())
    print(f"check {name} D={shape[3]} causal={causal} {'x'.join(map(str, shape[:3]))}: "
          f"err {err:.2e}" + ("" if err <= 2e-2 else "  FAIL"), flush=True)


def main():
    from bench_attention import triton_kernel
    install()
    root, mods = common.variant_examples("06_fused_attention", VARIANTS, CURRENT)
    ex = mods[VARIANTS[0]]
    tk = triton_kernel()
    res = {}
    for D, causal in CASES:
        B, H, N = 4, 32, 4096
        q, k, v_ = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        out = torch.empty_like(q)
        calls = {}
        for name, m in mods.items():
            common.use_variant(root, CURRENT, name)
            for shape in [c for c in CHECK if c[3] == D] + [(B, H, N, D)]:
                _check(m, name, shape, causal, (q, k, v_) if shape[2] == N else None)
            calls[name] = (lambda m=m: m.attention(q, k, v_, causal, out=out))
        calls["triton"] = lambda: ex.attention(q, k, v_, causal, kernel=tk, out=out)
        calls["sdpa"] = lambda: torch.nn.functional.scaled_dot_product_attention(
            q, k, v_, is_causal=causal)
        import triton.testing
        ms, _ = common.timed_in_rounds(
            calls, lambda fn: (triton.testing.do_bench(fn, warmup=25, rep=100,
                                                       return_mode="median"), None),
            rounds=int(os.environ.get("ROUNDS", 5)))
        flop = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
        for key, t in ms.items():
            res[(D, causal, key)] = flop / t / 1e9
        del q, k, v_, out
    names = list(VARIANTS) + ["triton", "sdpa"]
    print(f"\n== attention_variants {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
          f"{torch.cuda.get_device_name()}, TFLOP/s, B=4 H=32 N=4096 fp16")
    print(f"{'case':12} " + " ".join(f"{x:>7}" for x in names))
    for D, causal in CASES:
        row = [res.get((D, causal, x), float("nan")) for x in names]
        print(f"D={D}{' causal' if causal else '':8} " + " ".join(f"{x:7.0f}" for x in row)
              + "   vs triton: " + " ".join(f"{x / row[-2]:.3f}" for x in row[:-2]), flush=True)



if __name__ == "__main__":
    main()
