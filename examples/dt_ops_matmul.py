"""Matmul-like ops as deuteron kernels, in Helion's style: matmul (an epilogue callable, addmm,
autograd), split-K (atomics, and two phases), bmm, broadcast matmul, matmul + layer norm, grouped GEMM,
fp8, int4 and bf16 x int16 GEMMs, gather-GEMV, fused linear JSD, a Mamba-2 chunk scan,
attention (fp16 and fp8).
`OPS` lists them for tests/test_deuteron_ops.py and benchmarks/dt_ops.py.

    python examples/dt_ops_matmul.py     # check every op (the interpreter without a GPU)
"""
import functools
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deuteron as dt  # noqa: E402
import deuteron.language as hl  # noqa: E402
from dt_ops_common import Op  # noqa: E402

H = (2e-2, 2e-2)


def _mnk(small):
    return (37, 29, 45) if small else (4096, 4096, 4096)


@dt.kernel
def matmul(x, y, epilogue=lambda acc, tile: acc):
    m, k = x.size()
    n = y.size(1)
    out = torch.empty(m, n, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = epilogue(acc, (tm, tn)).to(out.dtype)
    return out


def _mm_make(dtype=torch.float16):
    def make(device, small):
        m, n, k = _mnk(small)
        return (torch.randn(m, k, device=device, dtype=dtype),
                torch.randn(k, n, device=device, dtype=dtype))
    return make


def _mm_ref(x, y):
    return (x.float() @ y.float()).to(x.dtype)


def _epilogue_run(x, y, bias):
    return matmul(x, y, lambda acc, tile: torch.relu(acc + bias[tile[1]]))


def _epilogue_ref(x, y, bias):
    return torch.relu(x.float() @ y.float() + bias).to(x.dtype)


def _epilogue_make(device, small):
    x, y = _mm_make()(device, small)
    return x, y, torch.randn(y.shape[1], device=device)


@dt.kernel
def addmm(bias, x, y, beta: float = 0.5, alpha: float = 2.0):
    m, k = x.size()
    n = y.size(1)
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = (acc * alpha + bias[tm, tn].float() * beta).to(out.dtype)
    return out


def _addmm_make(device, small):
    x, y = _mm_make()(device, small)
    return torch.randn(x.shape[0], y.shape[1], device=device, dtype=x.dtype), x, y


class MatMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return matmul(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return matmul(g, y.T), matmul(x.T, g)


def _autograd_run(x, y, g):
    xg, yg = x.detach().requires_grad_(), y.detach().requires_grad_()
    out = MatMul.apply(xg, yg)
    out.backward(g)
    return out.detach(), xg.grad, yg.grad


def _autograd_ref(x, y, g):
    xg, yg = x.detach().float().requires_grad_(), y.detach().float().requires_grad_()
    out = xg @ yg
    out.backward(g.float())
    return out.detach().half(), xg.grad.half(), yg.grad.half()


def _autograd_make(device, small):
    x, y = _mm_make()(device, small)
    return x, y, torch.randn(x.shape[0], y.shape[1], device=device, dtype=x.dtype)


@dt.kernel
def matmul_split_k(x, y):
    m, k = x.size()
    n = y.size(1)
    out = torch.zeros(m, n, dtype=torch.float32, device=x.device)
    split = hl.register_block_size(64, 1024)
    for tm, tn, tk_outer in hl.tile([m, n, k], block_size=[None, None, split]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(tk_outer.begin, tk_outer.end):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        hl.atomic_add(out, [tm, tn], acc)
    return out


@dt.kernel
def matmul_split_k_two_phase(x, y):
    """Split-K without atomics: each split writes its partial product to its own slice of a
    buffer, and a second loop (a second launch: the barrier between the phases) adds them."""
    m, k = x.size()
    n = y.size(1)
    split = hl.register_block_size(64, 1024)
    partial = torch.zeros(-(-k // split), m, n, dtype=torch.float32, device=x.device)
    out = torch.empty(m, n, dtype=torch.float32, device=x.device)
    for tm, tn, tk_outer in hl.tile([m, n, k], block_size=[None, None, split]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(tk_outer.begin, tk_outer.end):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        partial[tk_outer.id, tm, tn] = acc
    for tm, tn in hl.tile([m, n]):
        out[tm, tn] = partial[:, tm, tn].sum(0)
    return out


@dt.kernel
def bmm(a, b):
    nb, m, k = a.size()
    n = b.size(2)
    out = torch.empty(nb, m, n, dtype=a.dtype, device=a.device)
    for tb, tm, tn in hl.tile([nb, m, n]):
        acc = hl.zeros([tb, tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc.to(a.dtype)
    return out


def _bmm_make(device, small):
    nb, m, n, k = (3, 37, 29, 45) if small else (16, 1024, 1024, 1024)
    return (torch.randn(nb, m, k, device=device, dtype=torch.float16),
            torch.randn(nb, k, n, device=device, dtype=torch.float16))


@dt.kernel
def broadcast_matmul(a, w):
    """[B, M, K] @ [K, N]: every batch element by one weight."""
    nb, m, k = a.size()
    n = w.size(1)
    out = torch.empty(nb, m, n, dtype=a.dtype, device=a.device)
    for tb, tm, tn in hl.tile([nb, m, n], block_size=[1, None, None]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, a[tb, tm, tk], w[tk, tn])
        out[tb, tm, tn] = acc.to(a.dtype)
    return out


def _bcast_make(device, small):
    nb, m, n, k = (3, 37, 29, 45) if small else (16, 1024, 1024, 1024)
    return (torch.randn(nb, m, k, device=device, dtype=torch.float16),
            torch.randn(k, n, device=device, dtype=torch.float16))


@dt.kernel
def matmul_layernorm(x, w, gamma, beta, eps: float = 1e-5):
    """layer_norm(x @ w) over the output row: one tile of rows holds whole rows of N."""
    m, k = x.size()
    n = w.size(1)
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    for tm in hl.tile(m):
        acc = hl.zeros([tm, n], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], w[tk, :])
        mean = acc.mean(dim=-1, keepdim=True)
        c = acc - mean
        rstd = torch.rsqrt((c * c).mean(dim=-1, keepdim=True) + eps)
        out[tm, :] = (c * rstd * gamma[None, :].float() + beta[None, :].float()).to(out.dtype)
    return out


def _mmln_make(device, small):
    m, n, k = (37, 48, 45) if small else (4096, 256, 4096)
    return (torch.randn(m, k, device=device, dtype=torch.float16),
            torch.randn(k, n, device=device, dtype=torch.float16) / 8,
            torch.randn(n, device=device), torch.randn(n, device=device))


def _mmln_ref(x, w, g, b):
    return F.layer_norm(x.float() @ w.float(), (w.shape[1],), g, b, 1e-5).half()


@dt.kernel
def grouped_gemm(a, b, offsets):
    """Groups of rows of `a` (offsets[g]:offsets[g+1]) times their own weight b[g]."""
    k, n = b.shape[1], b.shape[2]
    out = torch.empty(a.shape[0], n, dtype=a.dtype, device=a.device)
    for g, tn in hl.tile([b.shape[0], n], block_size=[1, None]):
        start, end = offsets[g], offsets[g + 1]
        for tm in hl.tile(start, end):
            acc = hl.zeros([tm, tn], dtype=torch.float32)
            for tk in hl.tile(k):
                acc = torch.addmm(acc, a[tm, tk], b[g, tk, tn])
            out[tm, tn] = acc.to(out.dtype)
    return out


def _grouped_make(device, small):
    sizes = [13, 0, 40, 7] if small else [512, 1024, 768, 1536, 256, 1024, 2048, 1024]
    k, n = (45, 29) if small else (2048, 2048)
    offs = torch.tensor([0] + sizes, device=device).cumsum(0)
    return (torch.randn(sum(sizes), k, device=device, dtype=torch.float16),
            torch.randn(len(sizes), k, n, device=device, dtype=torch.float16), offs)


def _grouped_ref(a, b, offs):
    return torch.cat([a[offs[i]:offs[i + 1]].float() @ b[i].float()
                      for i in range(b.shape[0])]).half()


@dt.kernel
def fp8_gemm(x, y):
    m, k = x.size()
    n = y.size(1)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = hl.dot(x[tm, tk], y[tk, tn], acc=acc)
        out[tm, tn] = acc.to(torch.bfloat16)
    return out


def _fp8_make(device, small):
    m, n, k = _mnk(small)
    x = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
    y = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).T    # K-contiguous B
    return x, y


@dt.kernel
def int4_gemm(x, w_packed):
    """bf16 x [M, K] times int4 weights packed two per int8: the low nibble holds row r, the
    high nibble row r + K/2 (w = hi * 16 + (lo & 15))."""
    m, k = x.size()
    half = k // 2
    n = w_packed.size(1)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(half):
            w = w_packed[tk, tn].to(torch.int32)
            lo_u = w % 16
            lo = torch.where(lo_u >= 8, lo_u - 16, lo_u).to(torch.bfloat16)
            hi = (w // 16).to(torch.bfloat16)
            acc = torch.addmm(acc, x[tm, tk], lo)
            acc = torch.addmm(acc, x[tm, tk.index + half], hi)
        out[tm, tn] = acc.to(torch.bfloat16)
    return out


def _int4_make(device, small):
    m, n, k = (37, 29, 64) if small else (4096, 4096, 4096)
    q = torch.randint(-8, 8, (k, n), device=device)
    packed = (q[k // 2:] * 16 + (q[:k // 2] & 15)).to(torch.int8)
    return torch.randn(m, k, device=device, dtype=torch.bfloat16), packed, q


def _int4_ref(x, packed, q):
    return (x.float() @ q.float()).to(torch.bfloat16)


@dt.kernel
def bf16_int16_gemm(x, w):
    m, k = x.size()
    n = w.size(1)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], w[tk, tn].to(torch.bfloat16))
        out[tm, tn] = acc.to(torch.bfloat16)
    return out


def _int16_make(device, small):
    m, n, k = _mnk(small)
    return (torch.randn(m, k, device=device, dtype=torch.bfloat16),
            torch.randint(-64, 64, (k, n), device=device, dtype=torch.int16))


@dt.kernel
def gather_gemv(w, idx, x):
    """out[i] = W[idx[i], :] . x"""
    out = torch.empty(idx.shape[0], dtype=torch.float32, device=w.device)
    for tm in hl.tile(idx.shape[0]):
        rows = idx[tm]
        acc = hl.zeros([tm], dtype=torch.float32)
        for tk in hl.tile(w.shape[1]):
            acc = acc + (w[rows, tk].float() * x[tk][None, :].float()).sum(-1)
        out[tm] = acc
    return out


def _gemv_make(device, small):
    r, k, n = (50, 45, 37) if small else (16384, 4096, 8192)
    return (torch.randn(r, k, device=device, dtype=torch.float16),
            torch.randint(0, r, (n,), device=device), torch.randn(k, device=device))


@dt.kernel
def fused_linear_jsd(xs, ws, xt, wt, beta: float = 0.5):
    """JSD between the softmaxes of a student (xs @ ws) and a teacher (xt @ wt), / rows."""
    n = xs.shape[0]
    rows = torch.empty(n, dtype=torch.float32, device=xs.device)
    for tm in hl.tile(n):
        s = (xs[tm, :] @ ws[:, :]).float()
        t = (xt[tm, :] @ wt[:, :]).float()
        s = s - torch.amax(s, dim=-1, keepdim=True)
        t = t - torch.amax(t, dim=-1, keepdim=True)
        lq = s - torch.log(torch.exp(s).sum(dim=-1, keepdim=True))
        lp = t - torch.log(torch.exp(t).sum(dim=-1, keepdim=True))
        q, p = torch.exp(lq), torch.exp(lp)
        lm = torch.log(beta * p + (1 - beta) * q)
        rows[tm] = (beta * p * (lp - lm) + (1 - beta) * q * (lq - lm)).sum(-1)
    return rows.sum() / n


def _fljsd_make(device, small):
    n, h, v = (37, 32, 48) if small else (4096, 64, 128)
    return (torch.randn(n, h, device=device, dtype=torch.float16),
            torch.randn(h, v, device=device, dtype=torch.float16) / 4,
            torch.randn(n, h, device=device, dtype=torch.float16),
            torch.randn(h, v, device=device, dtype=torch.float16) / 4)


def _fljsd_ref(xs, ws, xt, wt, beta=0.5):
    lq = torch.log_softmax((xs @ ws).float(), -1)
    lp = torch.log_softmax((xt @ wt).float(), -1)
    q, p = lq.exp(), lp.exp()
    lm = torch.log(beta * p + (1 - beta) * q)
    return (beta * p * (lp - lm) + (1 - beta) * q * (lq - lm)).sum() / xs.shape[0]


@dt.kernel(static_shapes=True)
def attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v over [batch*heads, seq, d], online softmax over key tiles."""
    nb, m, d = q.size()
    n = k.size(1)
    scale = 1.0 / d ** 0.5
    out = torch.empty_like(q)
    for tb, tm in hl.tile([nb, m]):
        qt = q[tb, tm, :]
        mi = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        li = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        for tn in hl.tile(n):
            s = torch.bmm(qt, k[tb, tn, :].transpose(1, 2)).float() * scale
            m_new = torch.maximum(mi, torch.amax(s, dim=-1))
            p = torch.exp(s - m_new[:, :, None])
            alpha = torch.exp(mi - m_new)
            li = li * alpha + p.sum(-1)
            acc = acc * alpha[:, :, None] + torch.bmm(p.to(v.dtype), v[tb, tn, :]).float()
            mi = m_new
        out[tb, tm, :] = (acc / li[:, :, None]).to(out.dtype)
    return out


def _attn_make(dtype):
    def make(device, small):
        shape = (2, 37, 16) if small else (32, 2048, 64)
        return tuple(torch.randn(*shape, device=device).to(dtype) for _ in range(3))
    return make


def _attn_ref(q, k, v):
    s = (q.float() @ k.float().transpose(1, 2)) / q.shape[2] ** 0.5
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)


@dt.kernel
def mamba2_chunk_scan(cb, x, dt_, da_cs, c, prev_states, d):
    """One head of Mamba-2's chunked scan. Per chunk and row m: the carried-in state read by C,
    decayed by exp(dA_cs[m]), plus the causal intra-chunk sum over k <= m of
    cb[m, k] * exp(dA_cs[m] - dA_cs[k]) * dt[k] * x[k], plus the skip term d * x[m].
    Shapes: cb [chunks, L, L], x [chunks, L, P], dt_ / da_cs [chunks, L], c [chunks, L, N],
    prev_states [chunks, N, P]."""
    nc, ln, p = x.shape
    out = torch.empty(nc, ln, p, dtype=torch.float32, device=x.device)
    for ch, tm, tp in hl.tile([nc, ln, p], block_size=[1, None, None]):
        a_m = da_cs[ch, tm]
        acc = (c[ch, tm, :] @ prev_states[ch, :, tp]).float() * torch.exp(a_m)[:, None]
        for tk in hl.tile(ln):
            w = cb[ch, tm, tk].float() * torch.exp(a_m[:, None] - da_cs[ch, tk][None, :]) \
                * dt_[ch, tk][None, :]
            w = torch.where(tm.index[:, None] >= tk.index[None, :], w, 0.0)
            acc = torch.addmm(acc, w.to(x.dtype), x[ch, tk, tp])
        out[ch, tm, tp] = acc + d * x[ch, tm, tp].float()
    return out


def _mamba_make(device, small):
    nc, ln, p, n = (2, 37, 24, 16) if small else (256, 256, 64, 128)
    h = torch.float16
    da = torch.cumsum(-torch.rand(nc, ln, device=device) * 0.1, 1)
    return (torch.randn(nc, ln, ln, device=device, dtype=h) / 4,
            torch.randn(nc, ln, p, device=device, dtype=h),
            torch.rand(nc, ln, device=device) * 0.5, da,
            torch.randn(nc, ln, n, device=device, dtype=h) / 4,
            torch.randn(nc, n, p, device=device, dtype=h) / 4, 0.75)


def _mamba_ref(cb, x, dt_, da, c, s, d):
    ln = x.shape[1]
    causal = torch.tril(torch.ones(ln, ln, device=x.device, dtype=torch.bool))
    w = cb.float() * torch.exp(da[:, :, None] - da[:, None, :]) * dt_[:, None, :]
    w = torch.where(causal, w, 0.0).half().float()
    y = (c.float() @ s.float()) * torch.exp(da)[:, :, None] + w @ x.float()
    return y + d * x.float()


@functools.lru_cache(maxsize=None)
def _matmul_example():
    """examples/05_matmul.py, loaded once (a load per call would be timed with the kernel)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "05_matmul.py")
    spec = importlib.util.spec_from_file_location("newt_example_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mm_newt(x, y):
    """The hand-written newt kernel of the same op (examples/05_matmul.py)."""
    return _matmul_example().matmul(x, y)


def _autograd_eager(x, y, g):
    xg, yg = x.detach().requires_grad_(), y.detach().requires_grad_()
    out = xg @ yg
    out.backward(g)
    return out.detach(), xg.grad, yg.grad


F8 = (6e-2, 6e-2)
OPS = [
    Op("matmul", _mm_make(), matmul, _mm_ref, tol=H, matmul=True, eager=torch.matmul),
    Op("matmul_epilogue", _epilogue_make, _epilogue_run, _epilogue_ref, tol=H, matmul=True,
       eager=lambda x, y, bias: torch.relu(x @ y + bias.to(x.dtype))),
    Op("addmm", _addmm_make, addmm, lambda b, x, y: (0.5 * b.float() + 2.0 * (x.float() @ y.float())).half(),
       tol=H, matmul=True, eager=lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0)),
    Op("matmul_autograd", _autograd_make, _autograd_run, _autograd_ref, tol=H, matmul=True,
       eager=_autograd_eager),
    Op("matmul_split_k", lambda d, s: _mm_make(torch.float16)(d, s) if s else (
        torch.randn(256, 16384, device=d, dtype=torch.float16),
        torch.randn(16384, 256, device=d, dtype=torch.float16)),
       matmul_split_k, lambda x, y: x.float() @ y.float(), tol=H, matmul=True, eager=torch.matmul),
    Op("matmul_split_k_two_phase", lambda d, s: _mm_make(torch.float16)(d, s) if s else (
        torch.randn(256, 16384, device=d, dtype=torch.float16),
        torch.randn(16384, 256, device=d, dtype=torch.float16)),
       matmul_split_k_two_phase, lambda x, y: x.float() @ y.float(), tol=H, matmul=True,
       eager=torch.matmul),
    Op("bmm", _bmm_make, bmm, lambda a, b: torch.bmm(a.float(), b.float()).half(), tol=H, matmul=True,
       eager=torch.bmm),
    Op("broadcast_matmul", _bcast_make, broadcast_matmul,
       lambda a, w: (a.float() @ w.float()).half(), tol=H, matmul=True, eager=torch.matmul),
    Op("matmul_layernorm", _mmln_make, matmul_layernorm, _mmln_ref, tol=H, matmul=True,
       eager=lambda x, w, g, b: F.layer_norm(x @ w, (w.shape[1],), g.to(x.dtype), b.to(x.dtype))),
    Op("grouped_gemm", _grouped_make, grouped_gemm, _grouped_ref, tol=H, matmul=True,
       eager=lambda a, b, offs: torch.cat([a[offs[i]:offs[i + 1]] @ b[i] for i in range(b.shape[0])])),
    Op("fp8_gemm", _fp8_make, fp8_gemm, lambda x, y: (x.float() @ y.float()).bfloat16(), tol=F8,
       matmul=True),
    Op("int4_gemm", _int4_make, lambda x, p, q: int4_gemm(x, p), _int4_ref, tol=F8, matmul=True,
       eager=lambda x, p, q: x @ q.to(x.dtype)),
    Op("bf16_int16_gemm", _int16_make, bf16_int16_gemm,
       lambda x, w: (x.float() @ w.float()).bfloat16(), tol=F8, matmul=True,
       eager=lambda x, w: x @ w.to(x.dtype)),
    Op("gather_gemv", _gemv_make, gather_gemv, lambda w, i, x: w[i].float() @ x, tol=(1e-3, 1e-3)),
    Op("fused_linear_jsd", _fljsd_make, fused_linear_jsd, _fljsd_ref, tol=H, matmul=True),
    Op("mamba2_chunk_scan", _mamba_make, mamba2_chunk_scan, _mamba_ref, tol=H, matmul=True),
    Op("attention_fp16", _attn_make(torch.float16), attention, _attn_ref, tol=H, matmul=True,
       eager=F.scaled_dot_product_attention),
    Op("attention_fp8", _attn_make(torch.float8_e4m3fn), attention,
       lambda q, k, v: _attn_ref(q, k, v).float(), tol=(0.15, 0.15), matmul=True),
]
NEWT_BASELINE = {"matmul": _mm_newt}


def main():
    from dt_ops_common import run_all
    run_all(OPS)


if __name__ == "__main__":
    main()
