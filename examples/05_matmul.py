"""Matrix multiplication, Triton-tutorial form: C = activation(A @ B).

Each program computes one BLOCK_SIZE_M x BLOCK_SIZE_N tile of C, walking K in BLOCK_SIZE_K
steps; programs are ordered in groups of GROUP_SIZE_M rows of tiles so that neighbours reuse
the same A and B tiles from L2. `nl.dot` runs on the tensor cores (wgmma on sm_90a, mma.sync on
sm_80/sm_89); the loads feeding it become an asynchronous shared-memory ring num_stages deep,
and the activation runs on the accumulator's registers before the cast and the masked store.
On sm_90a, where the ring fills most of an SM's shared memory, the kernel runs persistent: one
CTA per SM loops over the programs, copying the next tile's first k-steps during this one's
epilogue (newt/passes/tc/persistent.py); `nl.program_id(0)` still numbers the programs.

    python examples/05_matmul.py        # checks itself against torch (GPU, or the CPU interpreter)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: nl.constexpr, BLOCK_SIZE_N: nl.constexpr,
                  BLOCK_SIZE_K: nl.constexpr, GROUP_SIZE_M: nl.constexpr,
                  ACTIVATION: nl.constexpr):
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
    offs_bn = (pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = nl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_SIZE_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = nl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = nl.where(accumulator >= 0, accumulator, 0.01 * accumulator)
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    nl.store(c_ptrs, c, mask=c_mask)


CONFIG = dict(BLOCK_SIZE_M=256, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
              num_warps=8, num_stages=4)   # the fastest shape measured for the wgmma path


def matmul(a, b, activation="", config=None):
    assert a.shape[1] == b.shape[0], "incompatible dimensions"
    M, K = a.shape
    N = b.shape[1]
    cfg = dict(CONFIG, **(config or {}))
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (newt.cdiv(M, cfg["BLOCK_SIZE_M"]) * newt.cdiv(N, cfg["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), ACTIVATION=activation, **cfg)
    return c


def reference(a, b, activation=""):
    r = a.double() @ b.double()
    if activation == "leaky_relu":
        r = torch.where(r >= 0, r, 0.01 * r)
    return r


def main():
    gpu = torch.cuda.is_available()
    if not gpu:
        newt.options.flags.interpret = True
    dev = "cuda" if gpu else "cpu"
    torch.manual_seed(0)
    shapes = [(512, 512, 512), (1000, 1500, 777)] if gpu else [(100, 90, 70)]
    cfg = None if gpu else dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32)
    for dt in (torch.float16, torch.bfloat16):
        for (M, N, K) in shapes:
            for act in ("", "leaky_relu"):
                a = torch.randn(M, K, device=dev).to(dt)
                b = torch.randn(K, N, device=dev).to(dt)
                c = matmul(a, b, act, cfg)
                ref = reference(a, b, act)
                err = float((c.double() - ref).norm() / ref.norm())
                ok = torch.isfinite(c).all() and err < 1e-2
                print(f"{str(dt)[6:]:9} {M}x{N}x{K} {act or 'none':10} rel err {err:.2e} "
                      f"{'ok' if ok else 'FAIL'}")
                assert ok, "matmul disagrees with torch"
    print("05_matmul: all checks passed")


if __name__ == "__main__":
    main()
