"""Matmul configs whose BM rows do not give every warp a 16-row strip (BM = 64 on 8 warps, 32 on
4, 16 on 2): newt splits the warps along N (AccLayout's column groups) where it used to fall back
to the FMA engine. The same source on newt and Triton (nl -> tl), beside cuBLAS, at 4096^3 and
one odd shape; each config is checked first against torch on a NaN-poisoned output.

    PYTHONPATH=. [SIZE=4096] [DTYPES=fp16,bf16] python benchmarks/lab/matmul_col_groups.py

Prints, per config, the plan newt took (from the printed IR), newt's and Triton's TFLOP/s and
their ratio. tests/test_acc_col_groups.py checks the same kernel on the CPU.
"""
from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def mm_bias(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr, BIAS: nl.constexpr = True):
    """Masks on every axis, `acc += dot`, then (BIAS) a column bias added and the cast to C's
    type: the epilogue users write (tests/test_acc_col_groups.py runs it on the emulator)."""
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        offs_k = k * BK + nl.arange(0, BK)
        a = nl.load(a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = nl.load(b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += nl.dot(a, b)
    if BIAS:
        acc = acc + nl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(nl.float32)[None, :]
    nl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# (BM, BN, BK, num_warps, num_stages)
CONFIGS = [(64, 128, 64, 8, 4), (64, 256, 64, 8, 3), (32, 128, 64, 4, 4), (32, 64, 64, 4, 4),
           (16, 64, 64, 2, 4), (128, 128, 64, 8, 4)]
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def launch(k, a, b, bias, c, cfg):
    BM, BN, BK, W, S = cfg
    M, K = a.shape
    N = b.shape[1]
    grid = (-(-M // BM), -(-N // BN))
    return k[grid](a, b, bias, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                   c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, num_warps=W, num_stages=S)


def plan_of(a, b, bias, c, cfg):
    BM, BN, BK, W, S = cfg
    sig = {p: "*" + {torch.float16: "fp16", torch.bfloat16: "bf16"}[a.dtype]
           for p in ("a_ptr", "b_ptr", "bias_ptr", "c_ptr")}
    sig.update({p: "i32" for p in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")})
    ck = newt.compile(mm_bias, sig, dict(BM=BM, BN=BN, BK=BK), arch="sm_90a",
                      num_warps=W, num_stages=S)
    m = re.search(r"dot_plan=(\w+:\S+(?: swapped)?(?: wgmma)?(?: n-split=\d)?)", ck.ir)
    return (m.group(1) if m else "?"), ck.n_spills


def check(k, dt, cfg, M=1000, N=1500, K=777):
    torch.manual_seed(0)
    a, b = torch.randn(M, K, device="cuda").to(dt), torch.randn(K, N, device="cuda").to(dt)
    bias = torch.randn(N, device="cuda").to(dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    launch(k, a, b, bias, c, cfg)
    ref = a.float() @ b.float() + bias.float()[None, :]
    assert torch.isfinite(c).all(), "unwritten outputs"
    torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=2e-2)


def tflops(fn, M, N, K):
    return 2 * M * N * K / (newt.testing.do_bench(fn, return_mode="median") * 1e-3) / 1e12


def main():
    size = int(os.environ.get("SIZE", "4096"))
    tw = common.triton_twin(mm_bias) if common.have_triton() else None
    print(f"{'dtype':5s} {'config':18s} {'newt plan':34s} {'spills':>6s} {'newt':>7s} "
          f"{'triton':>7s} {'n/t':>5s} {'cuBLAS':>7s}  TFLOP/s at {size}^3")
    for name in os.environ.get("DTYPES", "fp16,bf16").split(","):
        dt = DT[name]
        M = N = K = size
        a, b = torch.randn(M, K, device="cuda").to(dt), torch.randn(K, N, device="cuda").to(dt)
        bias = torch.randn(N, device="cuda").to(dt)
        c = torch.empty(M, N, device="cuda", dtype=dt)
        cub = tflops(lambda: torch.addmm(bias, a, b), M, N, K)
        for cfg in CONFIGS:
            check(mm_bias, dt, cfg)
            plan, spills = plan_of(a, b, bias, c, cfg)
            tn = tflops(lambda: launch(mm_bias, a, b, bias, c, cfg), M, N, K)
            tt = float("nan")
            if tw is not None:
                check(tw, dt, cfg)
                tt = tflops(lambda: launch(tw, a, b, bias, c, cfg), M, N, K)
            print(f"{name:5s} {'x'.join(map(str, cfg)):18s} {plan:34s} {spills:6d} {tn:7.1f} "
                  f"{tt:7.1f} {tn / tt:5.2f} {cub:7.1f}")


if __name__ == "__main__":
    main()
