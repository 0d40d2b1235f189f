"""x @ W.T written with `nl.trans` of the loaded W tile: newt vs Triton (the same source, `nl`
-> `tl`) vs cuBLAS (`torch.matmul(a, w.t())`), in one process.

The kernel is Triton's tutorial matmul with B read as the transpose of a row-major W [N, K]
tile: `nl.dot(a, nl.trans(w), acc)`. newt rewrites the transposed load as the load of the
transposed block (newt/passes/tc/trans_loads.py), so it runs on the same K-major ring as the
strided `B = W.T` rows of bench_matmul.py. Each config is checked first (an odd shape, 1000 x
1500 x 777, NaN-poisoned output, against fp32 torch), then every (compiler, config) and cuBLAS
is timed in three interleaved rounds (median); the best config of each compiler is reported.

    PYTHONPATH=. python benchmarks/matmul_trans.py
"""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import newt  # noqa: E402
import newt.language as nl  # noqa: E402
from newt.testing import do_bench  # noqa: E402


@newt.jit
def matmul_t_kernel(a_ptr, w_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_wn, stride_wk,
                    stride_cm, stride_cn, BLOCK_SIZE_M: nl.constexpr, BLOCK_SIZE_N: nl.constexpr,
                    BLOCK_SIZE_K: nl.constexpr, GROUP_SIZE_M: nl.constexpr):
    pid = nl.program_id(axis=0)
    num_pid_m = nl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = nl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)) % M
    offs_wn = (pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = nl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    w_ptrs = w_ptr + (offs_wn[:, None] * stride_wn + offs_k[None, :] * stride_wk)
    accumulator = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_SIZE_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        w = nl.load(w_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = nl.dot(a, nl.trans(w), accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        w_ptrs += BLOCK_SIZE_K * stride_wk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    nl.store(c_ptrs, c, mask=c_mask)


CFGS = [(128, 256, 64, 8, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 4)]


def launch(k, a, w, c, cfg):
    BM, BN, BK, nw, ns = cfg
    M, K = a.shape
    N = w.shape[0]
    g = (((M + BM - 1) // BM) * ((N + BN - 1) // BN),)
    k[g](a, w, c, M, N, K, a.stride(0), a.stride(1), w.stride(0), w.stride(1), c.stride(0),
         c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
         num_warps=nw, num_stages=ns)


def main():
    tri = common.triton_twin(matmul_t_kernel) if common.have_triton() else None
    for dt, n in [(torch.float16, 4096), (torch.bfloat16, 8192)]:
        _row(tri, dt, n)


def _check(kernels, dt):
    """Every config of every compiler on an odd shape first: every element written (the
    output is NaN-poisoned), relative error against float64 under 1e-2."""
    M, N, K = 1000, 1500, 777
    a = torch.randn(M, K, device="cuda", dtype=dt)
    w = torch.randn(N, K, device="cuda", dtype=dt)
    ref = a.double() @ w.double().t()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    for name, k in kernels.items():
        for cfg in CFGS:
            c.fill_(float("nan"))
            launch(k, a, w, c, cfg)
            torch.cuda.synchronize()
            assert torch.isfinite(c).all(), f"{name} {cfg}: elements not written"
            err = float((c.double() - ref).norm() / ref.norm())
            assert err < 1e-2, f"{name} {cfg}: relative error {err:.3g}"


def _row(tri, dt, n):
    kernels = {"newt": matmul_t_kernel, **({"triton": tri} if tri is not None else {})}
    _check(kernels, dt)
    a = torch.randn(n, n, device="cuda", dtype=dt)
    w = torch.randn(n, n, device="cuda", dtype=dt)
    c = torch.empty(n, n, device="cuda", dtype=dt)
    calls = {(p, cfg): (lambda k=k, cfg=cfg: launch(k, a, w, c, cfg))
             for p, k in kernels.items() for cfg in CFGS}
    calls[("cuBLAS", None)] = lambda: torch.matmul(a, w.t())
    res = {x: [] for x in calls}
    for r in range(3):       # interleaved rounds, the order rotated
        order = list(calls)
        for x in order[r:] + order[:r]:
            res[x].append(2.0 * n ** 3 / do_bench(calls[x], return_mode="median") / 1e9)
    best = {}
    for (p, cfg), v in res.items():
        tf = statistics.median(v)
        print(f"  {str(dt)[6:]} {n} {p:6s} {cfg}: {tf:.0f} TFLOP/s")
        if tf > best.get(p, (0.0, None))[0]:
            best[p] = (tf, cfg)
    tri_tf = best.get("triton", (float("nan"),))[0]
    print(f"{str(dt)[6:]} {n}^3, B = nl.trans(W tile): newt {best['newt'][0]:.0f} "
          f"{best['newt'][1]} | Triton {tri_tf:.0f} {best.get('triton', (0, None))[1]} | "
          f"cuBLAS {best['cuBLAS'][0]:.0f} | newt/Triton {best['newt'][0] / tri_tf:.3f}",
          flush=True)


if __name__ == "__main__":
    main()
