"""Fused attention for training: the forward of examples/06_fused_attention.py that also saves
the row logsumexp, and the FlashAttention-2 backward, Triton-tutorial form, in a
torch.autograd.Function.

Forward (`_attn_fwd_train`): 06's kernel body and its key-loop helper `_attn_fwd_inner`
unchanged, plus one store: M = m_i + log2(l_i), the logsumexp of each query row's scaled scores
in log2 units (the units the forward's running max already uses), so that the backward gets
P = exp2(S * log2(e) * scale - M) back without a second softmax pass.

Backward, two kernels:
  * `_attn_bwd_preprocess`: delta_i = rowsum(O_i * dO_i) (dS = P * (dP - delta)).
  * `_attn_bwd`: program (j, batch*head) owns key block j and, with BLOCK_N1 == BLOCK_M2,
    query block j. First it walks the query blocks that see key block j, accumulating
      dV_j += P^T dO,   dK_j += dS^T Q   (P^T and dS^T computed as K Q^T-shaped tiles),
    then it walks the key blocks that query block j sees, accumulating dQ_j += dS K.
    The tiles P^T / dS^T / dS live in the accumulator layout of the dot that made them and
    go back to the tensor cores as A operands after a cast to the input type; Q^T, K^T and
    V^T are loaded transposed through swapped pointer strides, dO^T and Q (for dK) come from
    nl.trans of a loaded tile (the compiler then loads the transposed block beside the tile:
    passes/tc/trans_loads.py). The logsumexp and delta vectors are loaded straight into the
    fragment layout of the dot they offset (passes/tc/dot_rows.py).
  Causal attention splits each walk like the forward does: the blocks that cross the diagonal
  are masked with nl.where, the rest run unmasked.

Why dQ is computed per query block in the same kernel and not with atomics: atomically adding
fp32 dQ partials from every key block needs an fp32 dQ buffer, its zeroing, a conversion
kernel, and makes the result depend on the order of the adds; the second walk recomputes
Q K^T and dO V^T (2 of the 5 backward matmuls again, FLOP-wise ~40% more work) but keeps
every output written once, by one program, deterministically, and every dot a plain
register-accumulated one, which the compiler keeps spill-free at these tile sizes.

Each walk copies its tiles through a ring (passes/tc/walk_ring.py): the block a walk reads
in both orders (Q and Q^T, dO and dO^T; K and K^T) is copied once, one or more iterations
ahead (TMA boxes on sm_90a), with one barrier per iteration; on sm_90a the walk's first two
dots (Q K^T and dO V^T) are issued back to back with one wait, and the logsumexp and delta rows
are loaded before them (passes/tc/walk_loads.py). On sm_80 a walk whose accumulators take 64+
registers per thread copies its tiles where they are read (the ring's addresses spilled).

Masks: a query row past N loads M = +inf, so its P column is exp2(-inf) = 0; a key row past N
loads K = V = 0, so it adds nothing to dQ; the stores are masked.

    python examples/08_attention_training.py [--small]   # gradcheck + a few training steps
"""
import importlib.util
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


def _load_forward_example():
    name = "newt_example_06_fused_attention"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "06_fused_attention.py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


fwd_example = _load_forward_example()
_attn_fwd_inner = fwd_example._attn_fwd_inner


@newt.jit
def _attn_fwd_train(Q, K, V, sm_scale, M, Out, stride_qz, stride_qh, stride_qm, stride_qk,
                    stride_kz, stride_kh, stride_kn, stride_kk, stride_vz, stride_vh, stride_vn,
                    stride_vk, stride_oz, stride_oh, stride_om, stride_ok, H, N_CTX,
                    HEAD_DIM: nl.constexpr, BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr,
                    STAGE: nl.constexpr, EVEN_N: nl.constexpr):
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
    # fp32 statistics and accumulator (fp64 for fp64 inputs: gradcheck)
    acc_ty = nl.float64 if Q.dtype.element_ty == nl.float64 else nl.float32
    m_i = nl.zeros([BLOCK_M], dtype=acc_ty) - float("inf")
    l_i = nl.zeros([BLOCK_M], dtype=acc_ty) + 1.0
    acc = nl.zeros([BLOCK_M, HEAD_DIM], dtype=acc_ty)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e))
    q = nl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
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
    # the logsumexp the backward rebuilds P from (log2 units, scale folded in)
    nl.store(M + off_hz.to(nl.int64) * N_CTX + offs_m, m_i + nl.log2(l_i), mask=offs_m < N_CTX)
    acc = acc / l_i[:, None]
    o_ptrs = Out + o_off + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok
    nl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


@newt.jit
def _attn_bwd_preprocess(O, DO, Delta, stride_z, stride_h, stride_tok, stride_d, H, N_CTX,
                         HEAD_DIM: nl.constexpr, BLOCK_M: nl.constexpr):
    start_m = nl.program_id(0)
    off_hz = nl.program_id(1)
    off = (off_hz // H).to(nl.int64) * stride_z + (off_hz % H).to(nl.int64) * stride_h
    offs_m = start_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_d = nl.arange(0, HEAD_DIM)
    tile = off + offs_m[:, None] * stride_tok + offs_d[None, :] * stride_d
    rows = offs_m[:, None] < N_CTX
    acc_ty = nl.float64 if O.dtype.element_ty == nl.float64 else nl.float32
    o = nl.load(O + tile, mask=rows, other=0.0).to(acc_ty)
    do = nl.load(DO + tile, mask=rows, other=0.0).to(acc_ty)
    delta = nl.sum(o * do, 1)
    nl.store(Delta + off_hz.to(nl.int64) * N_CTX + offs_m, delta, mask=offs_m < N_CTX)


@newt.jit
def _attn_bwd_dkdv(dk, dv, k, v, Q, DO, M, Delta, stride_tok, stride_d, N_CTX, qk_scale, lo, hi,
                   BLOCK_M1: nl.constexpr, MASK: nl.constexpr, offs_n, offs_d):
    # one key block against the query blocks [lo, hi): P^T and dS^T are [BLOCK_N1, BLOCK_M1]
    for start_m in range(lo, hi, BLOCK_M1):
        start_m = nl.multiple_of(start_m, BLOCK_M1)
        offs_m = start_m + nl.arange(0, BLOCK_M1)
        q_t = nl.load(Q + offs_d[:, None] * stride_d + offs_m[None, :] * stride_tok,
                      mask=offs_m[None, :] < N_CTX, other=0.0)
        m = nl.load(M + offs_m, mask=offs_m < N_CTX, other=float("inf"))
        p_t = nl.exp2(nl.dot(k, q_t) * qk_scale - m[None, :])
        if MASK:
            p_t = nl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        do = nl.load(DO + offs_m[:, None] * stride_tok + offs_d[None, :] * stride_d,
                     mask=offs_m[:, None] < N_CTX, other=0.0)
        dv = nl.dot(p_t.to(do.dtype), do, dv)
        delta = nl.load(Delta + offs_m, mask=offs_m < N_CTX, other=0.0)
        dp_t = nl.dot(v, nl.trans(do))
        ds_t = p_t * (dp_t - delta[None, :])
        dk = nl.dot(ds_t.to(q_t.dtype), nl.trans(q_t), dk)
    return dk, dv


@newt.jit
def _attn_bwd_dq(dq, q, do, m, delta, K, V, stride_tok, stride_d, qk_scale, N_CTX, lo, hi,
                 BLOCK_N2: nl.constexpr, MASK: nl.constexpr, offs_m, offs_d):
    # one query block against the key blocks [lo, hi): P and dS are [BLOCK_M2, BLOCK_N2]
    for start_n in range(lo, hi, BLOCK_N2):
        start_n = nl.multiple_of(start_n, BLOCK_N2)
        offs_n = start_n + nl.arange(0, BLOCK_N2)
        kv_t = offs_d[:, None] * stride_d + offs_n[None, :] * stride_tok
        k_t = nl.load(K + kv_t, mask=offs_n[None, :] < N_CTX, other=0.0)
        v_t = nl.load(V + kv_t, mask=offs_n[None, :] < N_CTX, other=0.0)
        p = nl.exp2(nl.dot(q, k_t) * qk_scale - m[:, None])
        if MASK:
            p = nl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = nl.dot(do, v_t)
        ds = p * (dp - delta[:, None])
        dq = nl.dot(ds.to(k_t.dtype), nl.trans(k_t), dq)
    return dq


@newt.jit
def _attn_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, Delta, stride_z, stride_h, stride_tok,
              stride_d, H, N_CTX, HEAD_DIM: nl.constexpr, BLOCK_M1: nl.constexpr,
              BLOCK_N1: nl.constexpr, BLOCK_M2: nl.constexpr, BLOCK_N2: nl.constexpr,
              CAUSAL: nl.constexpr):
    pid = nl.program_id(0)
    off_hz = nl.program_id(1)
    off = (off_hz // H).to(nl.int64) * stride_z + (off_hz % H).to(nl.int64) * stride_h
    row = off_hz.to(nl.int64) * N_CTX
    Q_h = Q + off
    K_h = K + off
    V_h = V + off
    DO_h = DO + off
    M_h = M + row
    Delta_h = Delta + row
    offs_d = nl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * 1.44269504
    acc_ty = nl.float64 if Q.dtype.element_ty == nl.float64 else nl.float32

    # dK and dV of key block pid
    start_n = pid * BLOCK_N1
    offs_n = start_n + nl.arange(0, BLOCK_N1)
    kv = offs_n[:, None] * stride_tok + offs_d[None, :] * stride_d
    k = nl.load(K_h + kv, mask=offs_n[:, None] < N_CTX, other=0.0)
    v = nl.load(V_h + kv, mask=offs_n[:, None] < N_CTX, other=0.0)
    dk = nl.zeros([BLOCK_N1, HEAD_DIM], dtype=acc_ty)
    dv = nl.zeros([BLOCK_N1, HEAD_DIM], dtype=acc_ty)
    if CAUSAL:
        # the query blocks that cross the diagonal of this key block, then those below it
        dk, dv = _attn_bwd_dkdv(dk, dv, k, v, Q_h, DO_h, M_h, Delta_h, stride_tok, stride_d,
                                N_CTX, qk_scale, start_n, start_n + BLOCK_N1, BLOCK_M1, True,
                                offs_n, offs_d)
        dk, dv = _attn_bwd_dkdv(dk, dv, k, v, Q_h, DO_h, M_h, Delta_h, stride_tok, stride_d,
                                N_CTX, qk_scale, start_n + BLOCK_N1, N_CTX, BLOCK_M1, False,
                                offs_n, offs_d)
    else:
        dk, dv = _attn_bwd_dkdv(dk, dv, k, v, Q_h, DO_h, M_h, Delta_h, stride_tok, stride_d,
                                N_CTX, qk_scale, 0, N_CTX, BLOCK_M1, False, offs_n, offs_d)
    nl.store(DV + off + kv, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < N_CTX)
    dk = dk * sm_scale
    nl.store(DK + off + kv, dk.to(DK.dtype.element_ty), mask=offs_n[:, None] < N_CTX)

    # dQ of query block pid
    start_m = pid * BLOCK_M2
    offs_m = start_m + nl.arange(0, BLOCK_M2)
    qd = offs_m[:, None] * stride_tok + offs_d[None, :] * stride_d
    q = nl.load(Q_h + qd, mask=offs_m[:, None] < N_CTX, other=0.0)
    do = nl.load(DO_h + qd, mask=offs_m[:, None] < N_CTX, other=0.0)
    m = nl.load(M_h + offs_m, mask=offs_m < N_CTX, other=0.0)
    delta = nl.load(Delta_h + offs_m, mask=offs_m < N_CTX, other=0.0)
    dq = nl.zeros([BLOCK_M2, HEAD_DIM], dtype=acc_ty)
    if CAUSAL:
        # the key blocks that cross the diagonal of this query block, then those left of it
        dq = _attn_bwd_dq(dq, q, do, m, delta, K_h, V_h, stride_tok, stride_d, qk_scale, N_CTX,
                          start_m, start_m + BLOCK_M2, BLOCK_N2, True, offs_m, offs_d)
        dq = _attn_bwd_dq(dq, q, do, m, delta, K_h, V_h, stride_tok, stride_d, qk_scale, N_CTX,
                          0, start_m, BLOCK_N2, False, offs_m, offs_d)
    else:
        dq = _attn_bwd_dq(dq, q, do, m, delta, K_h, V_h, stride_tok, stride_d, qk_scale, N_CTX,
                          0, N_CTX, BLOCK_N2, False, offs_m, offs_d)
    dq = dq * sm_scale
    nl.store(DQ + off + qd, dq.to(DQ.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


# helpers first: the Triton twin defines them before the kernels that call them
KERNELS = (_attn_fwd_inner, _attn_fwd_train, _attn_bwd_preprocess, _attn_bwd_dkdv, _attn_bwd_dq,
           _attn_bwd)

# launch parameters on the GPU (sm_80 and sm_90a alike); the interpreter runs small blocks.
# One program owns BLOCK_N1 keys and BLOCK_M2 = BLOCK_N1 queries; a tensor-core dot needs its
# rows a multiple of 16 * num_warps, so dK and dV take D / 2 registers per thread each whatever
# the tile: at D = 128 everything else must fit in the other ~127. The walked blocks (BLOCK_M1
# queries, BLOCK_N2 keys) are small for that reason: P^T, dS^T and their operands stay small.
# These are spill-free (tests/test_attention_training.py checks the ptxas report).
_W8 = dict(BLOCK_N1=128, BLOCK_M2=128, num_warps=8, num_stages=2)
BWD_CONFIG = {64: dict(_W8, BLOCK_M1=32, BLOCK_N2=32), 128: dict(_W8, BLOCK_M1=16, BLOCK_N2=16)}
PRE_ELEMENTS = 4096   # the preprocess tile: O and dO in fp32 take 32 registers each per thread
SMALL_FWD_CONFIG = fwd_example.SMALL_CONFIG
SMALL_BWD_CONFIG = dict(BLOCK_M1=16, BLOCK_N1=32, BLOCK_M2=32, BLOCK_N2=16, num_warps=4,
                        num_stages=1)


def bwd_config_for(D):
    """The backward's launch parameters (the D = 64 entry for other head sizes)."""
    return dict(BWD_CONFIG.get(D, BWD_CONFIG[64]))


def forward(q, k, v, causal, sm_scale, config=None, kernel=None):
    """(o, M) for contiguous [B, H, N, D] q, k, v; M is [B, H, N] fp32 (log2 units)."""
    B, H, N, D = q.shape
    cfg = dict(config or fwd_example.config_for(D, causal))
    o = torch.empty_like(q)
    stat = torch.float64 if q.dtype == torch.float64 else torch.float32
    lse = torch.empty(B, H, N, device=q.device, dtype=stat)
    grid = (newt.cdiv(N, cfg["BLOCK_M"]), B * H, 1)
    (kernel or _attn_fwd_train)[grid](
        q, k, v, sm_scale, lse, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N,
        HEAD_DIM=D, STAGE=3 if causal else 1, EVEN_N=N % cfg["BLOCK_M"] == 0, **cfg)
    return o, lse


def backward(q, k, v, o, lse, do, causal, sm_scale, config=None, kernels=None, out=None):
    """(dq, dk, dv) for contiguous [B, H, N, D] tensors of one layout. `kernels` may be the
    Triton twins (preprocess, bwd); `out` three tensors to write into."""
    B, H, N, D = q.shape
    assert q.stride() == k.stride() == v.stride() == o.stride() == do.stride()
    cfg = dict(config or bwd_config_for(D))
    assert cfg["BLOCK_N1"] == cfg["BLOCK_M2"], "one program owns key block j and query block j"
    assert cfg["BLOCK_N1"] % cfg["BLOCK_M1"] == 0 and cfg["BLOCK_M2"] % cfg["BLOCK_N2"] == 0
    pre, bwd = kernels or (_attn_bwd_preprocess, _attn_bwd)
    dq, dk, dv = out if out is not None else (torch.empty_like(q) for _ in range(3))
    assert dq.stride() == q.stride()
    delta = torch.empty_like(lse)
    pre_block = PRE_ELEMENTS // D
    pre[(newt.cdiv(N, pre_block), B * H, 1)](o, do, delta, *o.stride(), H, N, HEAD_DIM=D,
                                             BLOCK_M=pre_block, num_warps=4)
    bwd[(newt.cdiv(N, cfg["BLOCK_N1"]), B * H, 1)](
        q, k, v, sm_scale, do, dq, dk, dv, lse, delta, *q.stride(), H, N, HEAD_DIM=D,
        CAUSAL=causal, **cfg)
    return dq, dk, dv


def _signature(names, dt="fp16", stats="fp32"):
    ptrs = {"M": f"*{stats}", "Delta": f"*{stats}"}
    return {n: ptrs.get(n, "fp32" if n == "sm_scale" else "i32" if n.startswith("stride")
                        or n in ("H", "N_CTX") else f"*{dt}") for n in names}


_FWD_ARGS = ["Q", "K", "V", "sm_scale", "M", "Out"] + [
    f"stride_{t}{s}" for t in "qkvo" for s in ("z", "h", "m" if t in "qo" else "n", "k")] + [
    "H", "N_CTX"]
_BWD_ARGS = ["Q", "K", "V", "sm_scale", "DO", "DQ", "DK", "DV", "M", "Delta", "stride_z",
             "stride_h", "stride_tok", "stride_d", "H", "N_CTX"]


def aot_backward(D, causal, dt="fp16"):
    """The compile-only description of _attn_bwd at its launch configuration."""
    cfg = bwd_config_for(D)
    nw, ns = cfg.pop("num_warps"), cfg.pop("num_stages")
    sig = _signature(_BWD_ARGS, dt)
    # what the JIT sees for contiguous tensors: stride_d is 1, the rest divisible by 16
    spec = {p: dict(divisible_by_16=p not in ("sm_scale", "H", "N_CTX"),
                    equal_to_1=p == "stride_d", large=False) for p in sig}
    return dict(fn=_attn_bwd, signature=sig, constexprs=dict(HEAD_DIM=D, CAUSAL=causal, **cfg),
                num_warps=nw, num_stages=ns, specialization=spec)


# Compile-only descriptions of the kernels above (tests compile them for sm_80 and sm_90a)
AOT = [dict(fn=_attn_fwd_train, signature=_signature(_FWD_ARGS),
            constexprs=dict(HEAD_DIM=64, STAGE=3, EVEN_N=True, BLOCK_M=128, BLOCK_N=64),
            num_warps=8, num_stages=3),
       dict(fn=_attn_bwd_preprocess,
            signature=_signature(["O", "DO", "Delta", "stride_z", "stride_h", "stride_tok",
                                  "stride_d", "H", "N_CTX"]),
            constexprs=dict(HEAD_DIM=128, BLOCK_M=PRE_ELEMENTS // 128), num_warps=4),
       aot_backward(64, True)]


class Attention(torch.autograd.Function):
    """softmax(Q K^T * scale) V with newt's forward and backward kernels."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, sm_scale=None, fwd_config=None, bwd_config=None):
        q, k, v = (t.contiguous() for t in (q, k, v))
        sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
        o, lse = forward(q, k, v, causal, sm_scale, fwd_config)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.bwd_config = causal, sm_scale, bwd_config
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward(q, k, v, o, lse, do.contiguous(), ctx.causal, ctx.sm_scale,
                              ctx.bwd_config)
        return dq, dk, dv, None, None, None, None


def attention(q, k, v, causal=False, sm_scale=None, fwd_config=None, bwd_config=None):
    return Attention.apply(q, k, v, causal, sm_scale, fwd_config, bwd_config)


# ----------------------------------------------------------------------------- checks

def reference(q, k, v, causal, sm_scale=None):
    """SDPA in fp64 on the CPU: the gradients every check compares with."""
    return torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=causal, scale=sm_scale)


def check_gradients(device, shapes, dtypes, fwd_config=None, bwd_config=None):
    """newt's O, dQ, dK, dV against torch autograd in fp64, fresh data, NaN-poisoned outputs."""
    for dt in dtypes:
        for (B, H, N, D) in shapes:
            for causal in (False, True):
                q, k, v, do = (torch.randn(B, H, N, D, device=device).to(dt) for _ in range(4))
                sm_scale = 1.0 / math.sqrt(D)
                o, lse = forward(q, k, v, causal, sm_scale, fwd_config)
                poisoned = [torch.full_like(q, float("nan")) for _ in range(3)]
                grads = backward(q, k, v, o, lse, do, causal, sm_scale, bwd_config, out=poisoned)
                leaves = [t.detach().cpu().double().requires_grad_() for t in (q, k, v)]
                ref = reference(*leaves, causal, sm_scale)
                ref.backward(do.cpu().double())
                atol = 2e-2 if dt == torch.float16 else 4e-2 if dt == torch.bfloat16 else 1e-4
                errs = [float((got.cpu().double() - want).abs().max())
                        for got, want in zip([o] + list(grads), [ref.detach()] + [t.grad for t in leaves])]
                ok = all(e <= atol for e in errs)   # NaN fails too
                print(f"{str(dt)[6:]:9} B={B} H={H} N={N} D={D} causal={causal!s:5} max err "
                      f"o {errs[0]:.1e} dq {errs[1]:.1e} dk {errs[2]:.1e} dv {errs[3]:.1e} "
                      f"{'ok' if ok else 'FAIL'}")
                assert ok, f"attention gradients disagree with torch autograd ({errs} > {atol})"


def gradcheck(device, fwd_config, bwd_config):
    """torch.autograd.gradcheck of Attention in fp64 (causal and not, N not a block multiple)."""
    for causal in (False, True):
        q, k, v = (torch.randn(1, 2, 6, 16, device=device, dtype=torch.float64,
                               requires_grad=True) for _ in range(3))
        fn = lambda q, k, v: attention(q, k, v, causal, None, fwd_config, bwd_config)  # noqa
        assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-6, atol=1e-5, rtol=1e-3,
                                        fast_mode=True)
        print(f"gradcheck fp64 causal={causal}: ok")


class TinyBlock(torch.nn.Module):
    """One self-attention layer: x -> qkv projection -> causal attention -> projection."""

    def __init__(self, dim, heads, attn):
        super().__init__()
        self.heads, self.attn = heads, attn
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attn(q, k, v)
        return x + self.out(o.transpose(1, 2).reshape(B, N, C).to(x.dtype))


def train_losses(attn, device, dtype, steps, seed=0, B=2, N=50, dim=64, heads=2,
                 fwd_config=None, bwd_config=None):
    """Losses of `steps` SGD steps of TinyBlock with attention `attn` ("newt" or "sdpa")."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, N, dim, generator=gen).to(device)
    target = torch.randn(B, N, dim, generator=gen).to(device)

    def run(q, k, v):
        q, k, v = (t.to(dtype) for t in (q, k, v))
        if attn == "sdpa":
            return torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), is_causal=True)
        return attention(q, k, v, True, None, fwd_config, bwd_config)
    torch.manual_seed(seed)
    model = TinyBlock(dim, heads, run).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def check_training(device, steps=5, fwd_config=None, bwd_config=None):
    """A few training steps: newt's losses follow SDPA's."""
    dtype = torch.float16 if device == "cuda" else torch.float32
    ours = train_losses("newt", device, dtype, steps, fwd_config=fwd_config,
                        bwd_config=bwd_config)
    ref = train_losses("sdpa", device, dtype, steps)
    print("training losses newt:", " ".join(f"{x:.5f}" for x in ours))
    print("training losses sdpa:", " ".join(f"{x:.5f}" for x in ref))
    rtol = 1e-2 if dtype == torch.float16 else 1e-4
    assert ours[-1] < ours[0], "the loss does not go down"
    for a, b in zip(ours, ref):
        assert abs(a - b) <= rtol * abs(b), f"training loss {a} differs from SDPA's {b}"


def check(device, small=True):
    """Gradients against torch autograd, gradcheck, a few training steps; raises on a mismatch."""
    if device == "cuda":
        shapes = [(1, 2, 45, 64), (2, 1, 130, 128)] if small else \
            [(2, 4, 1024, 64), (1, 3, 1000, 128), (2, 2, 777, 64)]
        check_gradients(device, shapes, (torch.float16, torch.bfloat16))
        gradcheck(device, SMALL_FWD_CONFIG, SMALL_BWD_CONFIG)
        check_training(device)
    else:
        shapes = [(1, 2, 37, 16), (1, 1, 70, 32)]
        check_gradients(device, shapes[:1] if small else shapes, (torch.float16,),
                        SMALL_FWD_CONFIG, SMALL_BWD_CONFIG)
        gradcheck(device, SMALL_FWD_CONFIG, SMALL_BWD_CONFIG)
        check_training(device, steps=3, fwd_config=SMALL_FWD_CONFIG,
                       bwd_config=SMALL_BWD_CONFIG)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    gpu = torch.cuda.is_available() and not newt.options.flags.interpret
    if not gpu:
        newt.options.flags.interpret = True
        print("note: no CUDA device: running on the CPU interpreter, small sizes")
    torch.manual_seed(0)
    check("cuda" if gpu else "cpu", small="--small" in argv or not gpu)
    print("08_attention_training: matches torch autograd")


if __name__ == "__main__":
    main()
