"""Tile-loop forms of Helion's example programs that deuteron takes as Helion does, on the newt
interpreter: a registered block size used as a size (`hl.zeros([tile_m, bs])` accumulating
`x[tile_m, tile_n]` over `hl.tile(n, block_size=bs)`), torch.var_mean / torch.var in a tile
loop, hl.register_reduction_dim. Outputs are NaN-poisoned arguments, inputs fresh random data
of odd sizes, results compared with torch, for several configs where the block size matters."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def _nan(*shape):
    return torch.full(shape, float("nan"))


@dt.kernel
def row_sums_blocked(x, out):
    m, n = x.size()
    bs = hl.register_block_size(n)
    for tm in hl.tile(m):
        acc = hl.zeros([tm, bs], dtype=torch.float32)
        for tn in hl.tile(n, block_size=bs):
            acc += x[tm, tn] * 2.0
        out[tm] = acc.sum(-1)
    return out


@pytest.mark.parametrize("bs", [16, 128, 1024])
def test_registered_block_size_as_an_accumulator_width(bs):
    x = torch.randn(7, 333)
    want = x.sum(-1) * 2.0
    torch.testing.assert_close(row_sums_blocked(x, _nan(7)), want, rtol=1e-5, atol=1e-4)
    got = row_sums_blocked.run((x, _nan(7)), {}, dt.Config(block_sizes=[bs, 4]))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(row_sums_blocked.ref(x, _nan(7)), want, rtol=1e-5, atol=1e-4)


@dt.kernel
def kl_rows(p, q, out):
    bt, v = p.shape
    bn = hl.register_block_size(v)
    bm = hl.register_block_size(bt)
    for tb in hl.tile(bt, block_size=bm):
        total = hl.zeros([tb, bn], dtype=torch.float32)
        for tv in hl.tile(v, block_size=bn):
            part = hl.zeros([bm, bn], dtype=torch.float32)
            pv = p[tb, tv]
            part += pv * (torch.log(torch.clamp(pv, min=1e-10)) - q[tb, tv])
            total += part
        out[tb] = total.sum(dim=-1)
    return out


def test_two_registered_block_sizes_as_sizes():
    p = torch.rand(19, 71) + 0.01
    q = torch.randn(19, 71)
    want = (p * (torch.log(p) - q)).sum(-1)
    for cfg in (None, dt.Config(block_sizes=[32, 8]), dt.Config(block_sizes=[128, 32])):
        got = kl_rows(p, q, _nan(19)) if cfg is None else kl_rows.run((p, q, _nan(19)), {}, cfg)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_mismatched_block_sizes_still_refused():
    @dt.kernel
    def wrong(x, out):
        m, n = x.size()
        bs = hl.register_block_size(n)
        other = hl.register_block_size(n)
        for tm in hl.tile(m):
            acc = hl.zeros([tm, bs], dtype=torch.float32)
            for tn in hl.tile(n, block_size=other):
                acc += x[tm, tn]
            out[tm] = acc.sum(-1)
        return out
    with pytest.raises(dt.TraceError, match="mismatched tile shapes"):
        wrong(torch.randn(3, 40), _nan(3))


@dt.kernel
def layer_norm_vm(x, w, b, out):
    m = x.size(0)
    n = hl.register_reduction_dim(x.size(1))
    for tm in hl.tile(m):
        row = x[tm, :].to(torch.float32)
        var, mean = torch.var_mean(row, dim=-1, keepdim=True, correction=0)
        out[tm, :] = ((row - mean) * torch.rsqrt(var + 1e-5) * w[:] + b[:]).to(out.dtype)
    assert isinstance(n, int)
    return out


@dt.kernel
def variances(x, out_unbiased, out_mean):
    for tm in hl.tile(x.size(0)):
        out_unbiased[tm] = torch.var(x[tm, :], dim=1)
        v, mu = torch.var_mean(x[tm, :], 1, correction=0)
        out_mean[tm] = mu + 0.0 * v
    return out_unbiased, out_mean


def test_var_mean_in_a_tile_loop():
    x, w, b = torch.randn(37, 53), torch.randn(53), torch.randn(53)
    want = torch.nn.functional.layer_norm(x, [53], w, b, eps=1e-5)
    torch.testing.assert_close(layer_norm_vm(x, w, b, _nan(37, 53)), want, rtol=1e-4, atol=1e-4)
    var, mean = variances(x, _nan(37), _nan(37))
    torch.testing.assert_close(var, x.var(1), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mean, x.mean(1), rtol=1e-4, atol=1e-5)


def test_var_with_correction_over_a_tiled_dim_is_refused():
    @dt.kernel
    def tiled_var(x, out):
        for tm, tn in hl.tile(x.size()):
            out[tm] = torch.var(x[tm, tn], dim=1)
        return out
    with pytest.raises(dt.TraceError, match="correction"):
        tiled_var(torch.randn(8, 8), _nan(8))
