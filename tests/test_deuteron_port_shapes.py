"""Reshapes that split or merge whole dims of a tile value, and hl.split / hl.join, on the newt
interpreter: a rotate-half (RoPE's form: `[tb, tt, 2, half]`, permute, split, join, merge back),
a merge of two whole dims into one, the oracle alike, and the reshapes refused (a tile dim split,
a padded whole dim regrouped). Fresh random data, odd sizes, NaN-poisoned outputs."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def rotate(x, cos, sin, out):
    rows, heads, d = x.shape
    half = d // 2
    for tr in hl.tile(rows):
        c1, c2 = hl.split(cos[tr, :].reshape([tr, 2, half]).permute(0, 2, 1))
        s1, s2 = hl.split(sin[tr, :].reshape(tr, 2, half).permute(0, 2, 1))
        x1, x2 = hl.split(x[tr, :, :].float().reshape([tr, heads, 2, -1]).permute(0, 1, 3, 2))
        y1 = x1 * c1[:, None, :] - x2 * s1[:, None, :]
        y2 = x2 * c2[:, None, :] + x1 * s2[:, None, :]
        out[tr, :, :] = hl.join(y1, y2).permute(0, 1, 3, 2).reshape([tr, heads, d]).to(out.dtype)
    return out


def _rotate_want(x, cos, sin):
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos[:, None, :] + turned * sin[:, None, :]


@pytest.mark.parametrize("blocks", [None, [1], [8]])
def test_rotate_half_by_split_and_join(blocks):
    x, ang = torch.randn(13, 3, 16), torch.randn(13, 16)
    cos, sin = ang.cos(), ang.sin()
    want = _rotate_want(x, cos, sin)
    args = (x, cos, sin, torch.full((13, 3, 16), float("nan")))
    got = rotate(*args) if blocks is None else rotate.run(args, {}, dt.Config(block_sizes=blocks))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rotate.ref(x, cos, sin, torch.full((13, 3, 16), float("nan"))),
                               want, rtol=1e-5, atol=1e-5)


@dt.kernel
def merge_then_split(x, out, out3):
    m, a, b = x.shape
    for tm in hl.tile(m):
        flat = x[tm, :, :].reshape(tm, a * b)
        out[tm, :] = flat * 2.0
        out3[tm, :, :] = (flat + 1.0).view([tm, a, b])
    return out, out3


def test_merge_whole_dims_and_split_them_back():
    x = torch.randn(7, 4, 8)
    o, o3 = merge_then_split(x, torch.full((7, 32), float("nan")),
                             torch.full((7, 4, 8), float("nan")))
    torch.testing.assert_close(o, x.reshape(7, 32) * 2.0)
    torch.testing.assert_close(o3, x + 1.0)


@dt.kernel
def split_padded(x, out):
    for tm in hl.tile(x.size(0)):
        out[tm, :] = x[tm, :].reshape(tm, 2, 3).sum(1)
    return out


@dt.kernel
def split_a_tile(x, out):
    for tm in hl.tile(x.size(0)):
        out[tm, :] = x[tm, :].reshape(2, -1)
    return out


def test_reshapes_the_kernel_cannot_match_are_refused():
    with pytest.raises(dt.TraceError, match="power-of-two"):
        split_padded(torch.randn(5, 6), torch.empty(5, 3))
    with pytest.raises(dt.TraceError, match="tile dims must stay"):
        split_a_tile(torch.randn(4, 8), torch.empty(4, 8))
    with pytest.raises(dt.TraceError, match="last dim is a whole dim of 2"):
        split_four(torch.randn(5, 4), torch.empty(5))


@dt.kernel
def split_four(x, out):
    for tm in hl.tile(x.size(0)):
        a, b = hl.split(x[tm, :])
        out[tm] = a + b
    return out


def test_split_join_compile_for_sm90():
    x, ang = torch.randn(13, 3, 16), torch.randn(13, 16)
    for ck in rotate.compile(x, ang.cos(), ang.sin(), torch.empty(13, 3, 16), arch="sm_90a"):
        assert ck.cubin and ck.n_spills == 0, ck.log
