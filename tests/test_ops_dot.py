"""Op suite, dot: nl.dot on fp16/bf16/fp32/int8 tiles with and without an accumulator, the
Triton-tutorial matmul (K loop, masks, grouped ordering) on odd sizes, fp32 inputs both as
tf32 (default) and as input_precision="ieee". Runs on targets interp and cuda; the interpreter
multiplies exactly (fp64, rounded once), so tf32 tolerances apply to the GPU only."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import check, name, poison, rand


@newt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr,
               ACC: nl.constexpr, IEEE: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if ACC:
        c = nl.load(c_ptr + rm[:, None] * N + rn[None, :])
        if IEEE:
            r = nl.dot(a, b, c, input_precision="ieee")
        else:
            r = nl.dot(a, b, c)
    else:
        if IEEE:
            r = nl.dot(a, b, input_precision="ieee")
        else:
            r = nl.dot(a, b)
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], r)


@pytest.mark.parametrize("acc", [False, True])
@pytest.mark.parametrize("M,N,K", [(16, 16, 16), (32, 64, 16), (64, 32, 64)])
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32, torch.int8], ids=name)
def test_dot(target, device, dt, M, N, K, acc):
    a = rand((M, K), dt, device, -8, 8)
    b = rand((K, N), dt, device, -8, 8)
    acc_dt = torch.int32 if dt == torch.int8 else torch.float32
    c = rand((M, N), acc_dt, device, -100, 100)
    out = poison((M, N), acc_dt, device)
    ieee = dt == torch.float32 and acc  # fp32: one case each way
    dot_kernel[(1,)](a, b, c, out, M=M, N=N, K=K, ACC=acc, IEEE=ieee)
    if dt == torch.int8:
        ref = a.cpu().long() @ b.cpu().long() + (c.cpu().long() if acc else 0)
        check(out, ref.to(torch.int32))
        return
    ref = a.cpu().double() @ b.cpu().double() + (c.cpu().double() if acc else 0)
    if dt == torch.float32 and not ieee and target == "cuda":
        check(out, ref.float(), rtol=1e-2, atol=2e-2 * K ** 0.5)  # tf32 inputs
    else:
        check(out, ref.float(), rtol=1e-4, atol=1e-4)


@newt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr, GROUP_M: nl.constexpr):
    pid = nl.program_id(0)
    num_pid_m = nl.cdiv(M, BM)
    num_pid_n = nl.cdiv(N, BN)
    group = GROUP_M * num_pid_n
    gid = pid // group
    first_m = gid * GROUP_M
    gsize = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % gsize
    pid_n = (pid % group) // gsize
    rm = pid_m * BM + nl.arange(0, BM)
    rn = pid_n * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = nl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c = acc.to(c_ptr.dtype.element_ty)
    nl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (100, 90, 70), (17, 130, 33)])
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=name)
def test_tutorial_matmul(target, device, dt, M, N, K):
    a, b = rand((M, K), dt, device), rand((K, N), dt, device)
    _check_matmul(a, b, (32, 32, 16), stages=3)


def _check_matmul(a, b, blocks, stages):
    """matmul_kernel on a and b (4 warps, NaN-poisoned output) against torch."""
    (M, K), N = a.shape, b.shape[1]
    c = poison((M, N), a.dtype, a.device)
    BM, BN, BK = blocks
    grid = (newt.cdiv(M, BM) * newt.cdiv(N, BN),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, GROUP_M=2,
                        num_warps=4, num_stages=stages)
    check(c, (a.cpu().double() @ b.cpu().double()).to(a.dtype), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("M,N,K,stages", [(100, 112, 80, 3), (130, 64, 96, 2), (64, 208, 160, 4)])
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32], ids=name)
def test_tutorial_matmul_aligned_rows(target, device, dt, M, N, K, stages):
    """Row strides that are multiples of 16 elements, so on sm_90a the K loop's tiles arrive
    by TMA (passes/tc/dot_tma.py): masked M and N tails, a K tail (BK = 32), 2 to 4 stages. fp32
    (tf32) is computed swapped there, C^T = B^T A^T (codegen/tc/dot_swap.py)."""
    a, b = rand((M, K), dt, device), rand((K, N), dt, device)
    _check_matmul(a, b, (64, 64, 32), stages)


def test_tutorial_matmul_broadcast_rows(target, device):
    """B's rows all one row in memory (row stride 0, an expanded tensor): not a TMA operand
    (a zero stride is not specialized as divisible by 16), the cp.async ring reads it."""
    M, N, K = 96, 128, 64
    a = rand((M, K), torch.float16, device)
    b = rand((1, N), torch.float16, device).expand(K, N)
    assert b.stride(0) == 0
    _check_matmul(a, b, (64, 64, 32), stages=3)


@newt.jit
def int8_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                       BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = nl.zeros((BM, BN), dtype=nl.int32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0)
        b = nl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0)
        acc = nl.dot(a, b, acc, out_dtype=nl.int32)   # Triton asserts out_dtype == acc's
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    nl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("b_along_k", [False, True], ids=["b", "w_t"])
@pytest.mark.parametrize("M,N,K", [(100, 90, 200), (130, 64, 96)])
def test_int8_matmul(target, device, M, N, K, b_along_k):
    """int8 in, int32 accumulated exactly; B row-major or contiguous along K (x @ W.T: on
    sm_90a 8-bit wgmma, tiles by TMA when rows are 16-byte aligned); masked tails."""
    a = rand((M, K), torch.int8, device, -128, 128)
    b = rand((N, K), torch.int8, device, -128, 128).t() if b_along_k else \
        rand((K, N), torch.int8, device, -128, 128)
    c = poison((M, N), torch.int32, device)
    BM, BN, BK = (16, 16, 32) if target == "interp" else (64, 64, 64)
    int8_matmul_kernel[(newt.cdiv(M, BM), newt.cdiv(N, BN))](
        a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=BM, BN=BN, BK=BK)
    check(c, (a.cpu().long() @ b.cpu().long()).to(torch.int32))


@newt.jit
def matmul_wt_kernel(a_ptr, w_ptr, c_ptr, M, N, K, sam, swn, scm, BM: nl.constexpr,
                     BN: nl.constexpr, BK: nl.constexpr):
    """c = a @ w.T with w [N, K] row-major, written with nl.trans of the loaded w tile."""
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
    w_ptrs = w_ptr + rn[:, None] * swn + rk[None, :]
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        w = nl.load(w_ptrs, mask=(rn[:, None] < N) & (rk[None, :] < K - k * BK), other=0.0)
        acc = nl.dot(a, nl.trans(w), acc)
        a_ptrs += BK
        w_ptrs += BK
    nl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("M,N,K", [(100, 90, 208), (70, 45, 100)])
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=name)
def test_dot_of_transposed_load(target, device, dt, M, N, K):
    """nl.dot(a, nl.trans(w)) over tiles of a row-major w [N, K] (x @ W.T); compiled, the
    transposed load is rewritten as a load of the transposed block (passes/tc/trans_loads.py):
    16-byte aligned rows (K = 208) take TMA on sm_90a, K = 100 the cp.async ring."""
    a, w = rand((M, K), dt, device), rand((N, K), dt, device)
    c = poison((M, N), dt, device)
    BM, BN, BK = (16, 16, 16) if target == "interp" else (64, 64, 32)
    matmul_wt_kernel[(newt.cdiv(M, BM), newt.cdiv(N, BN))](a, w, c, M, N, K, a.stride(0),
                                                           w.stride(0), c.stride(0), BM=BM,
                                                           BN=BN, BK=BK)
    check(c, (a.cpu().double() @ w.cpu().double().t()).to(dt), rtol=2e-2, atol=2e-2)
