"""hl.jagged_tile / hl.vtile on the newt interpreter: a loop over 0..lengths[row] for every row
of the enclosing tile at once. Loads past a row's length read 0, stores there write nothing,
reductions over the jagged tile skip those lanes (all-negative data catches a max that would
see the 0s), and the oracle (run a row at a time) agrees. Fresh random data, odd sizes, NaN-
poisoned outputs, several configs."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def _jagged(rows, most, cols, dtype=torch.float32):
    lengths = torch.randint(0, most + 1, (rows,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)])
    return torch.randn(int(offsets[-1]), cols, dtype=dtype), offsets


def _rows(x, offsets):
    return [x[int(offsets[i]):int(offsets[i + 1])] for i in range(offsets.numel() - 1)]


@dt.kernel
def jagged_row_max(x, offsets, widths, out):
    """out[b, :widths[b]] = max over the rows of segment b (-1 where a segment is empty);
    the feature loop is jagged too (one width per segment)."""
    n = x.size(1)
    flat = x.view(-1)
    for tb in hl.tile(offsets.size(0) - 1):
        start = offsets[tb]
        count = offsets[tb.index + 1] - start
        w = widths[tb]
        for tf in hl.jagged_tile(w):
            best = hl.full([tb, tf], float("-inf"), dtype=torch.float32)
            for tk in hl.vtile(count):
                rows = (start[:, None] + tk.index[None, :])[:, :, None]
                v = hl.load(flat, [rows * n + tf.index[None, None, :]])
                best = torch.maximum(best, (v - 10.0).amax(dim=1))
            out[tb, tf] = torch.where(count[:, None] > 0, best, -1.0)
    return out


def _row_max_want(x, offsets, widths, out):
    for b, seg in enumerate(_rows(x, offsets)):
        w = int(widths[b])
        out[b, :w] = (seg[:, :w] - 10.0).amax(0) if len(seg) else -1.0
    return out


@pytest.mark.parametrize("blocks", [None, [2, 4, 2], [8, 16, 32]])
def test_jagged_max_skips_lanes_past_each_length(blocks):
    x, offsets = _jagged(11, 9, 13)
    widths = torch.randint(1, 14, (11,), dtype=torch.int32)
    want = _row_max_want(x, offsets, widths, torch.full((11, 13), float("nan")))
    if blocks is None:
        got = jagged_row_max(x, offsets, widths, torch.full((11, 13), float("nan")))
    else:
        got = jagged_row_max.run((x, offsets, widths, torch.full((11, 13), float("nan"))), {},
                                 dt.Config(block_sizes=blocks))
    torch.testing.assert_close(got, want, equal_nan=True)     # NaN past each width: not written
    ref = jagged_row_max.ref(x, offsets, widths, torch.full((11, 13), float("nan")))
    torch.testing.assert_close(ref, want, equal_nan=True)


@dt.kernel
def jagged_softmax_sum(x, offsets):
    """Per segment, sum over its rows of softmax-like exp(x - rowmax): exp of the padded 0s
    would add 1 per missing lane."""
    out = torch.empty(offsets.size(0) - 1, x.size(1), dtype=x.dtype)
    for tb, tn in hl.tile([offsets.size(0) - 1, x.size(1)]):
        start = offsets[tb]
        count = offsets[tb.index + 1] - start
        acc = hl.zeros([tb, tn], dtype=torch.float32)
        for tk in hl.jagged_tile(count):
            v = x[start[:, None] + tk.index[None, :], tn]   # a gather on rows, a tile on columns
            acc = acc + torch.exp(v.float()).sum(dim=1)
        out[tb, tn] = acc.to(out.dtype)
    return out


def test_jagged_sum_of_exp_and_oracle():
    x, offsets = _jagged(9, 7, 21)
    want = torch.stack([torch.exp(s).sum(0) for s in _rows(x, offsets)])
    torch.testing.assert_close(jagged_softmax_sum(x, offsets), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(jagged_softmax_sum.ref(x, offsets), want, rtol=1e-5, atol=1e-5)
    got = jagged_softmax_sum.run((x, offsets), {}, dt.Config(block_sizes=[4, 8, 2]))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@dt.kernel
def jagged_mean_bad(x, offsets, out):
    for tb in hl.tile(offsets.size(0) - 1):
        start = offsets[tb]
        for tk in hl.jagged_tile(offsets[tb.index + 1] - start):
            out[tb] = x[start[:, None] + tk.index[None, :], 0].mean(dim=1)
    return out


def test_mean_over_a_jagged_tile_is_refused():
    x, offsets = _jagged(5, 4, 3)
    with pytest.raises(dt.TraceError, match="mean\\(\\) over a jagged tile"):
        jagged_mean_bad(x, offsets, torch.empty(5))


@dt.kernel
def scalar_length(x, n, out):
    for tb in hl.tile(x.size(0)):
        for tk in hl.jagged_tile(n[0]):
            out[tb, tk] = x[tb, tk] * 2.0
    return out


def test_scalar_and_host_lengths_are_plain_tiles():
    x = torch.randn(6, 17)
    out = torch.full((6, 17), float("nan"))
    got = scalar_length(x, torch.tensor([11]), out)
    torch.testing.assert_close(got[:, :11], x[:, :11] * 2.0)
    assert torch.isnan(got[:, 11:]).all()


def test_nested_jagged_loops_compile_at_the_default_config():
    """NVRTC for sm_90a, no GPU: the default config sizes a nest of loops as one ~1024-element
    tile (each loop alone at 1024 made [1, 1024, 1024] values, over the shared-memory limit)."""
    x, offsets = _jagged(6, 7, 13)
    widths = torch.randint(1, 14, (6,), dtype=torch.int32)
    for k, args in ((jagged_row_max, (x, offsets, widths, torch.empty(6, 13))),
                    (jagged_softmax_sum, (x, offsets))):
        for ck in k.compile(*args, arch="sm_90a"):
            assert ck.cubin and ck.n_spills == 0, ck.log
