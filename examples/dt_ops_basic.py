"""Elementwise, row and loss ops as deuteron kernels, in Helion's style (`import
deuteron.language as hl`): add, exp (fwd+bwd), softmax (simple, two-pass, decomposed, fwd+bwd),
layer norm and RMSNorm (fwd+bwd), sum, long sum, Welford, GEGLU, SwiGLU, batch softmax,
low-memory dropout, RoPE, concatenate, KL-div, JSD, cross-entropy, embedding, GRPO loss,
squeeze-and-excitation. `OPS` lists them for tests/test_deuteron_ops.py and benchmarks/dt_ops.py.

    python examples/dt_ops_basic.py      # check every op (the interpreter without a GPU)
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deuteron as dt  # noqa: E402
import deuteron.language as hl  # noqa: E402
from dt_ops_common import Op  # noqa: E402


def _rows(small):
    return (37, 45) if small else (4096, 2048)


# ----------------------------------------------------------------------------- elementwise

@dt.kernel
def add(x, y):
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@dt.kernel
def exp_fwd(x):
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.exp(x[tile])
    return out


@dt.kernel
def exp_bwd(dy, y):
    dx = torch.empty_like(y)
    for tile in hl.tile(y.size()):
        dx[tile] = dy[tile] * y[tile]
    return dx


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = exp_fwd(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return exp_bwd(dy.contiguous(), y)


def _exp_run(x, dy):
    xg = x.detach().requires_grad_()
    y = Exp.apply(xg)
    y.backward(dy)
    return y.detach(), xg.grad


def _exp_ref(x, dy):
    xg = x.detach().requires_grad_()
    y = torch.exp(xg)
    y.backward(dy)
    return y.detach(), xg.grad


@dt.kernel
def geglu(a, b):
    out = torch.empty_like(a)
    for tile in hl.tile(a.size()):
        out[tile] = (F.gelu(a[tile].float(), approximate="tanh") * b[tile].float()).to(a.dtype)
    return out


@dt.kernel
def swiglu(a, b):
    out = torch.empty_like(a)
    for tile in hl.tile(a.size()):
        out[tile] = (F.silu(a[tile].float()) * b[tile].float()).to(a.dtype)
    return out


@dt.kernel
def low_mem_dropout(x, p: float, seed: int):
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        keep = hl.rand([tile], seed=seed) > p
        out[tile] = torch.where(keep, x[tile] / (1 - p), 0.0)
    return out


def _dropout_compare(got, args):
    x, p, _ = args
    kept = got != 0
    torch.testing.assert_close(got[kept], x[kept] / (1 - p))
    frac = kept.float().mean().item()
    assert abs(frac - (1 - p)) < 0.08, f"kept {frac:.3f}, expected about {1 - p}"
    assert low_mem_dropout(*args).equal(got), "not reproducible for one seed"


@dt.kernel
def rope(x, cos, sin):
    """Rotary embedding of x [S, D] by halves: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    half = x.shape[1] // 2
    out = torch.empty_like(x)
    for ts in hl.tile(x.shape[0]):
        x1, x2 = x[ts, :half].float(), x[ts, half:].float()
        c, s = cos[ts, :].float(), sin[ts, :].float()
        out[ts, :half] = (x1 * c - x2 * s).to(x.dtype)
        out[ts, half:] = (x2 * c + x1 * s).to(x.dtype)
    return out


def _rope_ref(x, cos, sin):
    h = x.shape[1] // 2
    x1, x2 = x[:, :h].float(), x[:, h:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], 1).to(x.dtype)


@dt.kernel
def concatenate(a, b):
    out = torch.empty(a.shape[0], a.shape[1] + b.shape[1], dtype=a.dtype, device=a.device)
    for tm, tn in hl.tile([a.shape[0], a.shape[1]]):
        out[tm, tn] = a[tm, tn]
    for tm, tn in hl.tile([b.shape[0], b.shape[1]]):
        out[tm, tn.index + a.shape[1]] = b[tm, tn]
    return out


# ----------------------------------------------------------------------------- rows

@dt.kernel
def softmax(x):
    out = torch.empty_like(x)
    for tm in hl.tile(x.shape[0]):
        out[tm, :] = F.softmax(x[tm, :], dim=1)
    return out


@dt.kernel
def softmax_decomposed(x):
    out = torch.empty_like(x)
    for tm in hl.tile(x.shape[0]):
        v = x[tm, :]
        e = torch.exp(v - torch.amax(v, dim=1, keepdim=True))
        out[tm, :] = e / torch.sum(e, dim=1, keepdim=True)
    return out


@dt.kernel
def softmax_two_pass(x):
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        mi = hl.full([tm], float("-inf"), dtype=torch.float32)
        di = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            v = x[tm, tn].float()
            m_new = torch.maximum(mi, torch.amax(v, dim=1))
            di = di * torch.exp(mi - m_new) + torch.exp(v - m_new[:, None]).sum(dim=1)
            mi = m_new
        for tn in hl.tile(n):
            out[tm, tn] = (torch.exp(x[tm, tn].float() - mi[:, None]) / di[:, None]).to(x.dtype)
    return out


@dt.kernel
def softmax_bwd(dy, y):
    dx = torch.empty_like(y)
    for tm in hl.tile(y.shape[0]):
        g, p = dy[tm, :].float(), y[tm, :].float()
        dx[tm, :] = (p * (g - (g * p).sum(dim=1, keepdim=True))).to(y.dtype)
    return dx


def _softmax_bwd_ref(dy, y):
    return y * (dy - (dy * y).sum(1, keepdim=True))


def _softmax_bwd_make(device, small):
    y = torch.softmax(torch.randn(*_rows(small), device=device), 1)
    return torch.randn_like(y), y


@dt.kernel
def batch_softmax(x):
    out = torch.empty_like(x)
    for tb, tm in hl.tile([x.shape[0], x.shape[1]]):
        out[tb, tm, :] = torch.softmax(x[tb, tm, :], dim=-1)
    return out


@dt.kernel
def row_sum(x):
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    for tm in hl.tile(x.shape[0]):
        out[tm] = x[tm, :].sum(-1)
    return out


@dt.kernel
def long_sum(x):
    m, n = x.size()
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            acc = acc + x[tm, tn].float().sum(-1)
        out[tm] = acc.to(x.dtype)
    return out


@dt.kernel
def layer_norm_fwd(x, w, b, eps: float = 1e-5):
    out = torch.empty_like(x)
    mean_out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    rstd_out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    for tm in hl.tile(x.shape[0]):
        v = x[tm, :].float()
        mean = v.mean(dim=-1, keepdim=True)
        c = v - mean
        rstd = torch.rsqrt((c * c).mean(dim=-1, keepdim=True) + eps)
        out[tm, :] = (c * rstd * w[None, :].float() + b[None, :].float()).to(x.dtype)
        mean_out[tm] = mean[:, 0]
        rstd_out[tm] = rstd[:, 0]
    return out, mean_out, rstd_out


@dt.kernel
def layer_norm_bwd(dy, x, w, mean, rstd):
    dx = torch.empty_like(x)
    dw = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
    db = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
    for tm in hl.tile(x.shape[0]):
        g = dy[tm, :].float()
        xhat = (x[tm, :].float() - mean[tm][:, None]) * rstd[tm][:, None]
        gw = g * w[None, :].float()
        c1 = (xhat * gw).mean(dim=-1, keepdim=True)
        c2 = gw.mean(dim=-1, keepdim=True)
        dx[tm, :] = ((gw - (xhat * c1 + c2)) * rstd[tm][:, None]).to(x.dtype)
        hl.atomic_add(dw, [slice(None)], (g * xhat).sum(0))
        hl.atomic_add(db, [slice(None)], g.sum(0))
    return dx, dw, db


def _ln_run(x, w, b, dy):
    y, mean, rstd = layer_norm_fwd(x, w, b)
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd)
    return y, dx, dw, db


def _ln_ref(x, w, b, dy):
    xg, wg, bg = (t.detach().requires_grad_() for t in (x, w, b))
    y = F.layer_norm(xg, (x.shape[1],), wg, bg, 1e-5)
    y.backward(dy)
    return y.detach(), xg.grad, wg.grad, bg.grad


def _norm_make(device, small):
    m, n = _rows(small)
    return (torch.randn(m, n, device=device), torch.randn(n, device=device),
            torch.randn(n, device=device), torch.randn(m, n, device=device))


@dt.kernel
def rms_norm_fwd(x, w, eps: float = 1e-6):
    out = torch.empty_like(x)
    rstd_out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    for tm in hl.tile(x.shape[0]):
        v = x[tm, :].float()
        rstd = torch.rsqrt((v * v).mean(dim=-1, keepdim=True) + eps)
        out[tm, :] = (v * rstd * w[None, :].float()).to(x.dtype)
        rstd_out[tm] = rstd[:, 0]
    return out, rstd_out


@dt.kernel
def rms_norm_bwd(dy, x, w, rstd):
    dx = torch.empty_like(x)
    dw = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
    for tm in hl.tile(x.shape[0]):
        g, v = dy[tm, :].float(), x[tm, :].float()
        r = rstd[tm][:, None]
        gw = g * w[None, :].float()
        c = (gw * v).mean(dim=-1, keepdim=True)
        dx[tm, :] = (r * (gw - v * r * r * c)).to(x.dtype)
        hl.atomic_add(dw, [slice(None)], (g * v * r).sum(0))
    return dx, dw


def _rms_run(x, w, b, dy):
    y, rstd = rms_norm_fwd(x, w)
    dx, dw = rms_norm_bwd(dy, x, w, rstd)
    return y, dx, dw


def _rms_ref(x, w, b, dy):
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    y = xg * torch.rsqrt(xg.pow(2).mean(-1, keepdim=True) + 1e-6) * wg
    y.backward(dy)
    return y.detach(), xg.grad, wg.grad


@dt.kernel
def welford_layer_norm(x, w, b, eps: float = 1e-5):
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        cnt = hl.zeros([tm], dtype=torch.float32)
        mean = hl.zeros([tm], dtype=torch.float32)
        m2 = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            chunk = x[tm, tn].float()
            k = (tn.end - tn.begin) * 1.0
            cmean = chunk.sum(dim=-1) / k
            d = chunk - cmean[:, None]
            cm2 = (d * d).sum(dim=-1)
            delta = cmean - mean
            total = cnt + k
            mean = mean + delta * (k / total)
            m2 = m2 + cm2 + delta * delta * (cnt * k / total)
            cnt = total
        rstd = torch.rsqrt(m2 / n + eps)
        for tn in hl.tile(n):
            v = (x[tm, tn].float() - mean[:, None]) * rstd[:, None]
            out[tm, tn] = (v * w[tn][None, :].float() + b[tn][None, :].float()).to(x.dtype)
    return out


# ----------------------------------------------------------------------------- losses

@dt.kernel
def cross_entropy(logits, labels):
    n, v = logits.shape
    flat = logits.view(-1)
    losses = torch.empty(n, dtype=torch.float32, device=logits.device)
    for tn in hl.tile(n):
        row = logits[tn, :].float()
        mx = torch.amax(row, dim=-1, keepdim=True)
        lse = mx[:, 0] + torch.log(torch.exp(row - mx).sum(dim=-1))
        picked = flat[tn.index * v + labels[tn]].float()
        losses[tn] = lse - picked
    return losses.mean()


@dt.kernel
def kl_div(log_q, p):
    """KL(p || q) with q given as log-probabilities, reduction='batchmean' (F.kl_div's)."""
    n = log_q.shape[0]
    rows = torch.empty(n, dtype=torch.float32, device=log_q.device)
    for tn in hl.tile(n):
        t = p[tn, :].float()
        rows[tn] = torch.where(t > 0, t * (torch.log(t) - log_q[tn, :].float()), 0.0).sum(-1)
    return rows.sum() / n


@dt.kernel
def jsd(log_q, log_p, beta: float = 0.5):
    """Generalized Jensen-Shannon divergence of two log-probability rows, summed, / rows."""
    n = log_q.shape[0]
    rows = torch.empty(n, dtype=torch.float32, device=log_q.device)
    for tn in hl.tile(n):
        lq, lp = log_q[tn, :].float(), log_p[tn, :].float()
        q, p = torch.exp(lq), torch.exp(lp)
        lm = torch.log(beta * p + (1 - beta) * q)
        rows[tn] = (beta * p * (lp - lm) + (1 - beta) * q * (lq - lm)).sum(-1)
    return rows.sum() / n


def _jsd_ref(log_q, log_p, beta=0.5):
    q, p = log_q.exp(), log_p.exp()
    lm = torch.log(beta * p + (1 - beta) * q)
    return (beta * p * (log_p - lm) + (1 - beta) * q * (log_q - lm)).sum() / log_q.shape[0]


def _two_logprob(device, small):
    m, n = _rows(small)
    return (torch.log_softmax(torch.randn(m, n, device=device), -1),
            torch.log_softmax(torch.randn(m, n, device=device), -1))


@dt.kernel
def grpo_loss(logits, tokens, old_logp, adv, eps: float = 0.2):
    """Per-token clipped policy loss: logp of each sampled token, ratio to the old policy."""
    n, v = logits.shape
    flat = logits.view(-1)
    loss = torch.empty(n, dtype=torch.float32, device=logits.device)
    for tn in hl.tile(n):
        row = logits[tn, :].float()
        mx = torch.amax(row, dim=-1, keepdim=True)
        lse = mx[:, 0] + torch.log(torch.exp(row - mx).sum(dim=-1))
        logp = flat[tn.index * v + tokens[tn]].float() - lse
        ratio = torch.exp(logp - old_logp[tn])
        a = adv[tn]
        loss[tn] = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - eps, 1 + eps) * a)
    return loss


def _grpo_ref(logits, tokens, old_logp, adv, eps=0.2):
    logp = torch.log_softmax(logits.float(), -1).gather(1, tokens[:, None])[:, 0]
    ratio = torch.exp(logp - old_logp)
    return -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv)


def _grpo_make(device, small):
    n, v = (29, 50) if small else (4096, 4096)
    logits = torch.randn(n, v, device=device)
    tokens = torch.randint(0, v, (n,), device=device)
    old = torch.log_softmax(torch.randn(n, v, device=device), -1).gather(1, tokens[:, None])[:, 0]
    return logits, tokens, old, torch.randn(n, device=device)


@dt.kernel
def embedding(ids, table):
    out = torch.empty(ids.shape[0], table.shape[1], dtype=table.dtype, device=table.device)
    for tm, td in hl.tile([ids.shape[0], table.shape[1]]):
        out[tm, td] = table[ids[tm], td]
    return out


@dt.kernel
def squeeze_excitation(x, a, b):
    """out = x * sigmoid(relu(x @ a) @ b), one tile of rows per program."""
    out = torch.empty_like(x)
    for tm in hl.tile(x.shape[0]):
        xt = x[tm, :]
        h = torch.relu(xt @ a[:, :]).to(x.dtype)
        s = torch.sigmoid((h @ b[:, :]).float())
        out[tm, :] = (xt.float() * s).to(x.dtype)
    return out


def _se_ref(x, a, b):
    h = torch.relu(x.float() @ a.float()).to(x.dtype).float()
    return (x.float() * torch.sigmoid(h @ b.float())).to(x.dtype)


def _se_make(device, small):
    m, n, k = (37, 32, 16) if small else (8192, 128, 32)
    return (torch.randn(m, n, device=device, dtype=torch.float16),
            torch.randn(n, k, device=device, dtype=torch.float16) / 4,
            torch.randn(k, n, device=device, dtype=torch.float16) / 4)


def _pair(dtype=torch.float32):
    def make(device, small):
        m, n = _rows(small)
        return (torch.randn(m, n, device=device, dtype=dtype),
                torch.randn(m, n, device=device, dtype=dtype))
    return make


def _one(shape_small, shape_big, dtype=torch.float32):
    def make(device, small):
        return (torch.randn(*(shape_small if small else shape_big), device=device, dtype=dtype),)
    return make


H = (2e-2, 2e-2)
OPS = [
    Op("add", lambda d, s: (torch.randn(*_rows(s), device=d), torch.randn(_rows(s)[1], device=d)),
       add, torch.add),
    Op("exp_fwd_bwd", lambda d, s: (torch.randn(*_rows(s), device=d), torch.randn(*_rows(s), device=d)),
       _exp_run, _exp_ref),
    Op("softmax", _one((37, 45), (4096, 2048)), softmax, lambda x: torch.softmax(x, 1)),
    Op("softmax_two_pass", _one((37, 45), (4096, 8192)), softmax_two_pass,
       lambda x: torch.softmax(x, 1)),
    Op("softmax_decomposed", _one((37, 45), (4096, 2048)), softmax_decomposed,
       lambda x: torch.softmax(x, 1)),
    Op("softmax_bwd", _softmax_bwd_make, softmax_bwd, _softmax_bwd_ref),
    Op("batch_softmax", _one((3, 7, 45), (16, 512, 1024)), batch_softmax,
       lambda x: torch.softmax(x, -1)),
    Op("layer_norm_fwd_bwd", _norm_make, _ln_run, _ln_ref, tol=(1e-3, 1e-3)),
    Op("rms_norm_fwd_bwd", _norm_make, _rms_run, _rms_ref, tol=(1e-3, 1e-3)),
    Op("sum", _one((37, 45), (4096, 2048)), row_sum, lambda x: x.sum(-1), tol=(1e-4, 1e-4)),
    Op("long_sum", _one((5, 301), (16, 1 << 20)), long_sum, lambda x: x.sum(-1), tol=(1e-3, 1e-3)),
    Op("welford", _norm_make, lambda x, w, b, dy: welford_layer_norm(x, w, b),
       lambda x, w, b, dy: F.layer_norm(x, (x.shape[1],), w, b, 1e-5), tol=(1e-3, 1e-3)),
    Op("geglu", _pair(torch.float16), geglu,
       lambda a, b: (F.gelu(a.float(), approximate="tanh") * b.float()).half(), tol=H),
    Op("swiglu", _pair(torch.float16), swiglu, lambda a, b: (F.silu(a.float()) * b.float()).half(),
       tol=H),
    Op("low_mem_dropout", lambda d, s: (torch.randn(1000 if s else 1 << 24, device=d), 0.25, 1234),
       low_mem_dropout, None, compare=_dropout_compare),
    Op("rope", lambda d, s: (torch.randn(37, 64, device=d) if s else torch.randn(8192, 128, device=d),
                             *[torch.randn(37 if s else 8192, 32 if s else 64, device=d)] * 2),
       rope, _rope_ref),
    Op("concatenate", lambda d, s: (torch.randn(37, 20, device=d) if s else torch.randn(4096, 1000, device=d),
                                    torch.randn(37, 13, device=d) if s else torch.randn(4096, 777, device=d)),
       concatenate, lambda a, b: torch.cat([a, b], 1)),
    Op("cross_entropy", lambda d, s: (torch.randn(29, 50, device=d) if s else torch.randn(4096, 8192, device=d),
                                      torch.randint(0, 50 if s else 8192, (29 if s else 4096,), device=d)),
       cross_entropy, F.cross_entropy, tol=(1e-4, 1e-4)),
    Op("kl_div", lambda d, s: (torch.log_softmax(torch.randn(*_rows(s), device=d), -1),
                               torch.softmax(torch.randn(*_rows(s), device=d), -1)),
       kl_div, lambda lq, p: F.kl_div(lq, p, reduction="batchmean"), tol=(1e-4, 1e-4)),
    Op("jsd", _two_logprob, jsd, _jsd_ref, tol=(1e-4, 1e-4)),
    Op("grpo_loss", _grpo_make, grpo_loss, _grpo_ref, tol=(1e-4, 1e-4)),
    Op("embedding", lambda d, s: (torch.randint(0, 50 if s else 32000, (37 if s else 8192,), device=d),
                                  torch.randn(50 if s else 32000, 23 if s else 1024, device=d)),
       embedding, lambda i, t: F.embedding(i, t)),
    Op("squeeze_excitation", _se_make, squeeze_excitation, _se_ref, tol=H),
]


def main():
    from dt_ops_common import run_all
    run_all(OPS)


if __name__ == "__main__":
    main()
