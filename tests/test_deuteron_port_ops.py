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


@dt.kernel
def rms_backward(grad_out, x, w, rstd, grad_x, grad_w_parts):
    """Helion's RMSNorm backward form: per-program partial weight grads in a tile of
    `w.new_zeros(n)`, an inner loop over the program's own rows (`hl.tile(t.begin, t.end)`),
    `rstd[mb, :]` of an [m, 1] tensor broadcast against [mb, n], `w[None, :]`, `r ** 3`."""
    mb_size = hl.register_block_size(x.size(0))
    n = hl.specialize(w.size(0))
    for cta in hl.tile(x.size(0), block_size=mb_size):
        gw = w.new_zeros(n, dtype=torch.float32)
        for mb in hl.tile(cta.begin, cta.end):
            xm, dm, rm = x[mb, :], grad_out[mb, :], rstd[mb, :]
            gw += (xm * dm * rm).sum(0)
            wm = w[None, :]
            grad_x[mb, :] = wm * dm * rm - xm * rm ** 3 * (wm * dm * xm).mean(-1)[:, None]
        grad_w_parts[cta.id, :] = gw
    return grad_x, grad_w_parts


def test_rms_norm_backward_form():
    m, n = 45, 24
    x, w, g = torch.randn(m, n), torch.randn(n), torch.randn(m, n)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-5) * wr).backward(g)
    for bs in (16, 64):
        parts = -(-m // bs)
        gx, gw = rms_backward.run((g, x, w, rstd, _nan(m, n), _nan(parts, n)), {},
                                  dt.Config(block_sizes=[bs, 8]))
        torch.testing.assert_close(gx, xr.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(gw.sum(0), wr.grad, rtol=1e-4, atol=1e-4)


@dt.kernel
def scores_fp32(q, k, out):
    for tb, tm in hl.tile([q.size(0), q.size(1)]):
        acc = hl.zeros([tb, tm, k.size(1)], dtype=torch.float32)
        acc = acc + torch.bmm(q[tb, tm, :], k[tb, :, :].transpose(1, 2), torch.float32)
        out[tb, tm, :] = acc
    return out


def test_bmm_with_an_out_dtype():
    q, k = torch.randn(3, 17, 16).half(), torch.randn(3, 21, 16).half()
    want = q.float() @ k.float().transpose(1, 2)
    torch.testing.assert_close(scores_fp32(q, k, _nan(3, 17, 21)), want, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(scores_fp32.ref(q, k, _nan(3, 17, 21)), want, rtol=1e-3,
                               atol=1e-3)


@dt.kernel
def tail_copy(lengths, y, out):
    """A loop that begins at a value the kernel loaded and ends at a host size."""
    for tr in hl.tile(y.size(0), block_size=16):      # one program: one start for all rows
        start = lengths[tr].amax()
        for tc in hl.tile(start, y.size(1)):
            out[tr, tc] = y[tr, tc] * 3.0
    return out


def test_loop_from_a_loaded_begin_to_a_host_end():
    y = torch.randn(9, 37)
    lengths = torch.randint(0, 30, (9,))
    got = tail_copy(lengths, y, _nan(9, 37))
    cut = int(lengths.max())
    torch.testing.assert_close(got[:, cut:], y[:, cut:] * 3.0)
    assert torch.isnan(got[:, :cut]).all()


@dt.kernel
def softmax_two_loops(x, out):
    """One name for the tile of two loops over n (Helion's two-pass softmax)."""
    m, n = x.size()
    for tm in hl.tile(m):
        mi = hl.full([tm], float("-inf"), dtype=torch.float32)
        di = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            values = x[tm, tn]
            mi_next = torch.maximum(mi, torch.amax(values, dim=1))
            di = di * torch.exp(mi - mi_next) + torch.exp(values - mi_next[:, None]).sum(dim=1)
            mi = mi_next
        for tn in hl.tile(n):
            values = x[tm, tn]
            out[tm, tn] = torch.exp(values - mi[:, None]) / di[:, None]
    return out


def test_a_name_reused_by_a_later_loop_is_a_new_value():
    x = torch.randn(21, 150)
    for cfg in (None, dt.Config(block_sizes=[4, 32, 64])):
        got = softmax_two_loops(x, _nan(21, 150)) if cfg is None else softmax_two_loops.run(
            (x, _nan(21, 150)), {}, cfg)
        torch.testing.assert_close(got, torch.softmax(x, 1), rtol=1e-5, atol=1e-6)


@dt.kernel
def concat_cols(x, y, out):
    """Helion's concatenation: tiles over out's width read x and y under extra_mask."""
    for t0, t1 in hl.tile(out.size()):
        cols = hl.tile_index(t1)
        left = hl.load(x, [t0, t1], extra_mask=(cols < x.size(1))[None, :])
        right = hl.load(y, [t0, cols - x.size(1)], extra_mask=(cols >= x.size(1))[None, :])
        out[t0, t1] = torch.where((cols < x.size(1))[None, :], left, right)
    return out


def test_masked_loads_may_reach_past_the_tensor():
    x, y = torch.randn(13, 40), torch.randn(13, 61)
    want = torch.cat([x, y], 1)
    torch.testing.assert_close(concat_cols(x, y, _nan(13, 101)), want)
    torch.testing.assert_close(concat_cols.ref(x, y, _nan(13, 101)), want)
    torch.testing.assert_close(concat_cols.run((x, y, _nan(13, 101)), {},
                                               dt.Config(block_sizes=[8, 16])), want)


@dt.kernel
def row_max_registered(x, out):
    """A registered block size for the rows, used in hl.full([tile_m]): the default config
    must not make the row tile an index (block size 1)."""
    m, n = x.size()
    bm = hl.register_block_size(m)
    bn = hl.register_block_size(n)
    for tm in hl.tile(m, block_size=bm):
        best = hl.full([tm], float("-inf"), dtype=torch.float32)
        for tn in hl.tile(n, block_size=bn):
            best = torch.maximum(best, torch.amax(x[tm, tn], dim=1))
        out[tm] = best
    return out


def test_registered_block_sizes_are_not_one_by_default():
    x = torch.randn(29, 1100)
    cfg = row_max_registered.config_for((x, _nan(29)))
    assert min(cfg.block_sizes) > 1, cfg
    torch.testing.assert_close(row_max_registered(x, _nan(29)), x.amax(1))
