"""Fused attention forward (FlashAttention-2), Triton-tutorial form: O = softmax(Q K^T * scale) V.

Each program owns BLOCK_M query rows of one (batch, head) and walks the keys BLOCK_N at a time
with the online softmax: a running row max `m_i` (in log2 units: the scale is folded with
log2(e) so that exp2 replaces exp), a running denominator `l_i` and an fp32 accumulator that is
rescaled by exp2(m_old - m_new) whenever the max grows. `nl.dot(q, k)` takes K loaded
transposed (a [HEAD_DIM, BLOCK_N] tile through pointer strides), the row max / row sum work on
the dot's result in registers, and `nl.dot(p.to(...), v, acc)` feeds the probabilities back to
the tensor cores.

Causal attention splits the key loop in two calls of the helper (STAGE 1: the key blocks fully
left of the diagonal, no mask; STAGE 2: the diagonal block, masked with nl.where), with the
loop bounds computed from the program id. Sequence lengths that are not a multiple of the
blocks are masked (EVEN_N=False adds the key-tail mask; loads and the store are masked always).

The kernel source is Triton's dialect: benchmarks/bench_attention.py compiles the very same
text with Triton (nl -> tl) for the comparison.

    python examples/06_fused_attention.py [--small]   # checks itself against torch SDPA
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def _attn_fwd_inner(acc, l_i, m_i, q, K, V, stride_kn, stride_kk, stride_vn, stride_vk, start_m,
                    qk_scale, N_CTX, BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr,
                    STAGE: nl.constexpr, EVEN_N: nl.constexpr, offs_m, offs_n, offs_d):
    # the key range of this stage: left of the diagonal, the diagonal block, or everything
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = nl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    for start_n in range(lo, hi, BLOCK_N):
        start_n = nl.multiple_of(start_n, BLOCK_N)
        # K^T as a [HEAD_DIM, BLOCK_N] tile: the transposed load is the strides swapped; the
        # pointers are rebuilt from the index each step (nothing but scalars crosses iterations)
        k_ptrs = K + offs_d[:, None] * stride_kk + (start_n + offs_n)[None, :] * stride_kn
        k = nl.load(k_ptrs, mask=(start_n + offs_n)[None, :] < N_CTX, other=0.0)
        qk = nl.dot(q, k)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + nl.where(mask, 0, -1.0e6)
            m_ij = nl.maximum(m_i, nl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            if not EVEN_N:
                qk = qk + nl.where((start_n + offs_n)[None, :] < N_CTX, 0, -1.0e6)
            m_ij = nl.maximum(m_i, nl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = nl.exp2(qk)
        l_ij = nl.sum(p, 1)
        alpha = nl.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v_ptrs = V + (start_n + offs_n)[:, None] * stride_vn + offs_d[None, :] * stride_vk
        v = nl.load(v_ptrs, mask=(start_n + offs_n)[:, None] < N_CTX, other=0.0)
        p = p.to(v.dtype)
        acc = nl.dot(p, v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@newt.jit
def _attn_fwd(Q, K, V, sm_scale, Out, stride_qz, stride_qh, stride_qm, stride_qk, stride_kz,
              stride_kh, stride_kn, stride_kk, stride_vz, stride_vh, stride_vn, stride_vk,
              stride_oz, stride_oh, stride_om, stride_ok, H, N_CTX, HEAD_DIM: nl.constexpr,
              BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, STAGE: nl.constexpr,
              EVEN_N: nl.constexpr):
    start_m = nl.program_id(0)
    off_hz = nl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_off = off_z.to(nl.int64) * stride_qz + off_h.to(nl.int64) * stride_qh
    k_off = off_z.to(nl.int64) * stride_kz + off_h.to(nl.int64) * stride_kh
    v_off = off_z.to(nl.int64) * stride_vz + off_h.to(nl.int64) * stride_vh
    o_off = off_z.to(nl.int64) * stride_oz + off_h.to(nl.int64) * stride_oh
    offs_m = start_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = nl.arange(0, BLOCK_N)
    offs_d = nl.arange(0, HEAD_DIM)
    q_ptrs = Q + q_off + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk
    m_i = nl.zeros([BLOCK_M], dtype=nl.float32) - float("inf")
    l_i = nl.zeros([BLOCK_M], dtype=nl.float32) + 1.0
    acc = nl.zeros([BLOCK_M, HEAD_DIM], dtype=nl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e))
    q = nl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    # STAGE 3: causal = off-diagonal blocks (helper stage 1) then the diagonal (stage 2);
    # STAGE 1: non-causal = every key block (helper stage 3)
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K + k_off, V + v_off, stride_kn,
                                        stride_kk, stride_vn, stride_vk, start_m, qk_scale,
                                        N_CTX, BLOCK_M, BLOCK_N, 4 - STAGE, EVEN_N, offs_m, offs_n,
                                        offs_d)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K + k_off, V + v_off, stride_kn,
                                        stride_kk, stride_vn, stride_vk, start_m, qk_scale,
                                        N_CTX, BLOCK_M, BLOCK_N, 2, EVEN_N, offs_m, offs_n,
                                        offs_d)
    acc = acc / l_i[:, None]
    o_ptrs = Out + o_off + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok
    nl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


KERNELS = (_attn_fwd_inner, _attn_fwd)  # the helper first: the Triton twin defines both

# launch parameters for the GPU (the benchmark's, for newt and Triton alike); the interpreter
# runs with small blocks. Tensor-core dots need BLOCK_M a multiple of 16 * num_warps. Chosen by
# `python benchmarks/bench_attention.py --sweep` on an H200 (2026-11-29, interleaved timing):
# 128 x 64 on two warpgroups is the fastest of the sweep for newt in every case. Non-causal
# D=128 takes 4 stages: newt then issues the next block's Q K^T before this block's softmax
# (the rotated key loop; 448 against 445 TFLOP/s with 3 stages). Causal attention splits the
# keys into two loops, the second only BLOCK_M / BLOCK_N = 2 blocks long: too short for the
# rotation to pay for its start and drain, so causal D=128 takes 3 stages (411 against 396;
# Triton 406 / 414, same call). At D=64 the rotation would cost the second CTA per SM: 3 stages.
CONFIG = {64: dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3),
          128: dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)}
CAUSAL_CONFIG = {64: CONFIG[64], 128: dict(CONFIG[128], num_stages=3)}


def config_for(D, causal):
    """The launch parameters of head size D (the nearest table entry for other sizes)."""
    table = CAUSAL_CONFIG if causal else CONFIG
    return table.get(D, table[64])


SMALL_CONFIG = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)


def launch_args(q, k, v, o, causal, sm_scale=None, config=None):
    """(grid, args, kwargs) of one launch of _attn_fwd (or its Triton twin) for [B, H, N, D]
    tensors of any strides."""
    B, H, N, D = q.shape
    assert k.shape == v.shape == o.shape == q.shape and D in (16, 32, 64, 128)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    cfg = dict(config or config_for(D, causal))
    assert cfg["BLOCK_M"] % cfg["BLOCK_N"] == 0, "the causal split needs BLOCK_N | BLOCK_M"
    grid = (newt.cdiv(N, cfg["BLOCK_M"]), B * H, 1)
    args = (q, k, v, sm_scale, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N)
    kwargs = dict(HEAD_DIM=D, STAGE=3 if causal else 1, EVEN_N=N % cfg["BLOCK_M"] == 0, **cfg)
    return grid, args, kwargs


def attention(q, k, v, causal, sm_scale=None, config=None, kernel=None, out=None):
    """q, k, v: [B, H, N, D] (any strides); returns O like q (written into `out` when given).
    `kernel` may be the Triton twin (benchmarks/bench_attention.py)."""
    o = torch.empty_like(q) if out is None else out
    grid, args, kwargs = launch_args(q, k, v, o, causal, sm_scale, config)
    (kernel or _attn_fwd)[grid](*args, **kwargs)
    return o


def reference(q, k, v, causal, sm_scale=None):
    """SDPA in fp32 (the CPU has no fp16 SDPA kernels worth trusting at tight tolerances)."""
    return torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal, scale=sm_scale)


def check(device, small=True):
    """Compare with SDPA on fresh data; raise on a mismatch."""
    if device == "cuda" and not small:
        shapes = [(2, 4, 1024, 64), (1, 3, 1000, 128), (2, 2, 777, 64)]
        dtypes, cfg = (torch.float16, torch.bfloat16), None
    else:
        shapes = [(1, 2, 45, 16), (2, 1, 64, 32)]
        dtypes = (torch.float16, torch.bfloat16)
        cfg = SMALL_CONFIG if device == "cpu" else None
    for dt in dtypes:
        for (B, H, N, D) in shapes:
            for causal in (False, True):
                q, k, v = (torch.randn(B, H, N, D, device=device).to(dt) for _ in range(3))
                o = attention(q, k, v, causal, config=cfg, out=torch.full_like(q, float("nan")))
                ref = reference(q, k, v, causal)
                err = float((o.float() - ref).abs().max())
                atol = 2e-2 if dt == torch.float16 else 4e-2
                ok = bool(torch.isfinite(o).all()) and err <= atol
                print(f"{str(dt)[6:]:9} B={B} H={H} N={N} D={D} causal={causal!s:5} "
                      f"max err {err:.2e} {'ok' if ok else 'FAIL'}")
                assert ok, f"attention disagrees with SDPA (max err {err:.3e} > {atol})"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    gpu = torch.cuda.is_available() and not newt.options.flags.interpret
    if not gpu:
        newt.options.flags.interpret = True
        print("note: no CUDA device: running on the CPU interpreter, small sizes")
    torch.manual_seed(0)
    check("cuda" if gpu else "cpu", small="--small" in argv or not gpu)
    print("06_fused_attention: matches torch SDPA")


if __name__ == "__main__":
    main()
