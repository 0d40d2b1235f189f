"""Jagged and segment ops as deuteron kernels, in Helion's style: a jagged tensor is `values`
[total, D] with `offsets` [B + 1] (rows offsets[b]:offsets[b+1] belong to batch element b). Each
kernel reads its offsets in the kernel and loops over `hl.tile(start, end)`: jagged dense add,
sum, mean, softmax, layer norm, jagged x dense bmm, and a segment reduction by atomics.
`OPS` lists them for tests/test_deuteron_ops.py and benchmarks/dt_ops.py.

    python examples/dt_ops_jagged.py     # check every op (the interpreter without a GPU)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deuteron as dt  # noqa: E402
import deuteron.language as hl  # noqa: E402
from dt_ops_common import Op  # noqa: E402


@dt.kernel
def jagged_dense_add(values, offsets, y):
    """y [B, L, D] + the jagged tensor padded with zeros to L rows per element."""
    nb, lmax, d = y.shape
    out = torch.empty_like(y)
    for b, tl, td in hl.tile([nb, lmax, d], block_size=[1, None, None]):
        start, end = offsets[b], offsets[b + 1]
        rows = start + tl.index
        xv = hl.load(values, [rows, td], extra_mask=(rows < end)[:, None])
        out[b, tl, td] = y[b, tl, td] + xv
    return out


@dt.kernel
def jagged_sum(values, offsets):
    nb, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty(nb, d, dtype=values.dtype, device=values.device)
    for b, td in hl.tile([nb, d], block_size=[1, None]):
        start, end = offsets[b], offsets[b + 1]
        acc = hl.zeros([td], dtype=torch.float32)
        for tk in hl.tile(start, end):
            acc = acc + values[tk, td].float().sum(0)
        out[b, td] = acc.to(out.dtype)
    return out


@dt.kernel
def jagged_mean(values, offsets):
    nb, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty(nb, d, dtype=values.dtype, device=values.device)
    for b, td in hl.tile([nb, d], block_size=[1, None]):
        start, end = offsets[b], offsets[b + 1]
        acc = hl.zeros([td], dtype=torch.float32)
        for tk in hl.tile(start, end):
            acc = acc + values[tk, td].float().sum(0)
        out[b, td] = (acc / torch.clamp((end - start).float(), min=1.0)).to(out.dtype)
    return out


@dt.kernel
def jagged_softmax(values, offsets):
    """Softmax over each element's rows, per column."""
    nb, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty_like(values)
    for b, td in hl.tile([nb, d], block_size=[1, None]):
        start, end = offsets[b], offsets[b + 1]
        mi = hl.full([td], float("-inf"), dtype=torch.float32)
        li = hl.zeros([td], dtype=torch.float32)
        for tk in hl.tile(start, end):
            v = values[tk, td].float()
            m_new = torch.maximum(mi, torch.amax(v, dim=0))
            li = li * torch.exp(mi - m_new) + torch.exp(v - m_new[None, :]).sum(0)
            mi = m_new
        for tk in hl.tile(start, end):
            e = torch.exp(values[tk, td].float() - mi[None, :]) / li[None, :]
            out[tk, td] = e.to(out.dtype)
    return out


@dt.kernel
def jagged_layer_norm(values, offsets, eps: float = 1e-5):
    """Each element's rows normalized together (mean and variance over rows x features)."""
    nb, d = offsets.shape[0] - 1, values.shape[1]
    out = torch.empty_like(values)
    for b in hl.grid(nb):
        start, end = offsets[b], offsets[b + 1]
        s1 = hl.zeros([d], dtype=torch.float32)
        s2 = hl.zeros([d], dtype=torch.float32)
        for tk in hl.tile(start, end):
            v = values[tk, :].float()
            s1 = s1 + v.sum(0)
            s2 = s2 + (v * v).sum(0)
        count = torch.clamp((end - start).float(), min=1.0) * d
        mean = s1.sum() / count
        rstd = torch.rsqrt(s2.sum() / count - mean * mean + eps)
        for tk in hl.tile(start, end):
            out[tk, :] = ((values[tk, :].float() - mean) * rstd).to(out.dtype)
    return out


@dt.kernel
def jagged_dense_bmm(values, offsets, w):
    """Each element's rows times its own dense matrix w[b] ([K, N])."""
    k, n = w.shape[1], w.shape[2]
    out = torch.empty(values.shape[0], n, dtype=values.dtype, device=values.device)
    for b in hl.grid(w.shape[0]):
        start, end = offsets[b], offsets[b + 1]
        for tm in hl.tile(start, end):
            for tn in hl.tile(n):
                acc = hl.zeros([tm, tn], dtype=torch.float32)
                for tk in hl.tile(k):
                    acc = torch.addmm(acc, values[tm, tk], w[b, tk, tn])
                out[tm, tn] = acc.to(out.dtype)
    return out


@dt.kernel
def segment_reduction(ids, x, num_segments: int):
    """out[s] = sum of the rows of x whose segment id is s (ids need not be sorted)."""
    out = torch.zeros(num_segments, x.shape[1], dtype=torch.float32, device=x.device)
    for tn, td in hl.tile([x.shape[0], x.shape[1]]):
        hl.atomic_add(out, [ids[tn], td], x[tn, td].float())
    return out


def _lengths(small):
    return [3, 0, 7, 1, 12] if small else [int(v) for v in torch.randint(0, 1024, (512,))]


def _jagged(device, small, d=None, dtype=torch.float32):
    lens = _lengths(small)
    offs = torch.tensor([0] + lens, device=device).cumsum(0)
    d = d or (19 if small else 256)
    return torch.randn(int(offs[-1]), d, device=device, dtype=dtype), offs


def _dense_add_make(device, small):
    values, offs = _jagged(device, small)
    lmax = max(_lengths(small)) if small else 1024
    return values, offs, torch.randn(offs.shape[0] - 1, lmax, values.shape[1], device=device)


def _dense_add_ref(values, offs, y):
    out = y.clone()
    for b in range(y.shape[0]):
        s, e = int(offs[b]), int(offs[b + 1])
        out[b, :e - s] += values[s:e]
    return out


def _segments(values, offs):
    return [values[int(offs[b]):int(offs[b + 1])] for b in range(offs.shape[0] - 1)]


def _sum_ref(values, offs):
    return torch.stack([s.sum(0) for s in _segments(values, offs)])


def _mean_ref(values, offs):
    return torch.stack([s.sum(0) / max(s.shape[0], 1) for s in _segments(values, offs)])


def _softmax_ref(values, offs):
    return torch.cat([torch.softmax(s, 0) for s in _segments(values, offs)])


def _ln_ref(values, offs, eps=1e-5):
    out = []
    for s in _segments(values, offs):
        if s.shape[0]:
            out.append((s - s.mean()) * torch.rsqrt(s.var(unbiased=False) + eps))
    return torch.cat(out)


def _bmm_make(device, small):
    values, offs = _jagged(device, small, d=45 if small else 512, dtype=torch.float16)
    n = 29 if small else 512
    return values, offs, torch.randn(offs.shape[0] - 1, values.shape[1], n, device=device,
                                     dtype=torch.float16) / 4


def _bmm_ref(values, offs, w):
    return torch.cat([s.float() @ w[b].float()
                      for b, s in enumerate(_segments(values, offs))]).half()


def _segment_make(device, small):
    n, d, s = (91, 13, 7) if small else (1 << 20, 64, 4096)
    return torch.randint(0, s, (n,), device=device), torch.randn(n, d, device=device), s


def _segment_ref(ids, x, s):
    return torch.zeros(s, x.shape[1], device=x.device).index_add_(0, ids, x)


OPS = [
    Op("jagged_dense_add", _dense_add_make, jagged_dense_add, _dense_add_ref),
    Op("jagged_sum", lambda d, s: _jagged(d, s), jagged_sum, _sum_ref, tol=(1e-4, 1e-4)),
    Op("jagged_mean", lambda d, s: _jagged(d, s), jagged_mean, _mean_ref, tol=(1e-4, 1e-4)),
    Op("jagged_softmax", lambda d, s: _jagged(d, s), jagged_softmax, _softmax_ref),
    Op("jagged_layer_norm", lambda d, s: _jagged(d, s), jagged_layer_norm, _ln_ref,
       tol=(1e-3, 1e-3)),
    Op("jagged_dense_bmm", _bmm_make, jagged_dense_bmm, _bmm_ref, tol=(2e-2, 2e-2), matmul=True),
    Op("segment_reduction", _segment_make, segment_reduction, _segment_ref, tol=(1e-4, 1e-4)),
]


def main():
    from dt_ops_common import run_all
    run_all(OPS)


if __name__ == "__main__":
    main()
