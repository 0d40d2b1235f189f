"""hl.associative_scan with user combine functions on the newt interpreter: one operand and a
tuple of two (a linear recurrence), forward and reverse, along a full slice and along the launch
grid's tile (each program scans its tile; Helion's segmented reduction adds the partial sums with
hl.atomic_add), and the oracle. `expand_as` / `expand` broadcast a value to a tile shape. Fresh
random data, odd sizes, NaN-poisoned outputs, several configs."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def larger(a, b):
    return torch.maximum(a, b)


def affine(a_left, b_left, a_right, b_right):
    """h -> a*h + b, composed: the left map first."""
    return a_left * a_right, b_left * a_right + b_right


@dt.kernel
def running_max(x, out, reverse: bool):
    for tm in hl.tile(x.size(0)):
        out[tm, :] = hl.associative_scan(larger, x[tm, :], dim=1, reverse=reverse)
    return out


@pytest.mark.parametrize("n,reverse", [(13, False), (16, True)])
def test_running_max_forward_and_reverse(n, reverse):
    x = torch.randn(7, n)
    flip = (lambda t: t.flip(1)) if reverse else (lambda t: t)
    want = flip(torch.cummax(flip(x), 1).values)
    out = torch.full((7, n), float("nan"))
    torch.testing.assert_close(running_max(x, out, reverse), want, rtol=0, atol=0)
    got = running_max.run((x, torch.full((7, n), float("nan")), reverse), {},
                          dt.Config(block_sizes=[2]))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(running_max.ref(x, torch.full((7, n), float("nan")), reverse),
                               want, rtol=0, atol=0)


@dt.kernel
def recurrence(a, b, out):
    for tm in hl.tile(a.size(0)):
        _, h = hl.associative_scan(affine, (a[tm, :], b[tm, :]), dim=1)
        out[tm, :] = h
    return out


def test_a_two_operand_scan_is_a_linear_recurrence():
    a, b = torch.rand(5, 29) * 0.5 + 0.5, torch.randn(5, 29)
    want, h = torch.empty(5, 29), torch.zeros(5)
    for i in range(29):
        h = a[:, i] * h + b[:, i]
        want[:, i] = h
    got = recurrence(a, b, torch.full((5, 29), float("nan")))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(recurrence.ref(a, b, torch.full((5, 29), float("nan"))), want,
                               rtol=1e-5, atol=1e-5)


def same_segment_sum(v_left, i_left, v_right, i_right):
    return torch.where(i_left == i_right, v_left + v_right, v_right), i_right


@dt.kernel
def segment_sums(ids, x, out):
    n, f = x.shape
    for te, tf in hl.tile([n, f]):
        seg = ids[te]
        nxt = hl.load(ids, [te.index + 1], extra_mask=te.index < n - 1)
        sums, _ = hl.associative_scan(same_segment_sum, (x[te, tf], seg.unsqueeze(1).expand_as(
            x[te, tf])), dim=0)
        last = (seg != nxt) | (te.index % te.block_size == te.block_size - 1) | (te.index == n - 1)
        hl.atomic_add(out, [seg, tf], torch.where(last[:, None], sums, 0.0))
    return out


@pytest.mark.parametrize("blocks", [None, [4, 8], [16, 2]])
def test_segmented_sum_over_the_grid_tile(blocks):
    ids = torch.randint(0, 11, (53,)).sort().values
    x = torch.randn(53, 7)
    want = torch.zeros(11, 7).index_add_(0, ids, x)
    if blocks is None:
        got = segment_sums(ids, x, torch.zeros(11, 7))
    else:
        got = segment_sums.run((ids, x, torch.zeros(11, 7)), {}, dt.Config(block_sizes=blocks))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(segment_sums.ref(ids, x, torch.zeros(11, 7)), want,
                               rtol=1e-5, atol=1e-5)


@dt.kernel
def scan_stored(x, out):
    for tm in hl.tile(x.size(0)):
        out[tm] = hl.associative_scan(larger, x[tm], dim=0)
    return out


@dt.kernel
def scan_in_loop(x, out):
    for tm in hl.tile(x.size(0)):
        for tn in hl.tile(x.size(1)):
            out[tm, tn] = hl.associative_scan(larger, x[tm, tn], dim=1)
    return out


@dt.kernel
def scan_reverse_padded(x, out):
    for tm in hl.tile(x.size(0)):
        out[tm, :] = hl.associative_scan(larger, x[tm, :], dim=1, reverse=True)
    return out


def test_scans_the_kernel_cannot_match_are_refused():
    x = torch.randn(9, 5)
    with pytest.raises(dt.TraceError, match="a dim of the launch grid"):
        scan_stored(x[:, 0].contiguous(), torch.empty(9))
    with pytest.raises(dt.TraceError, match="inner loop"):
        scan_in_loop(x, torch.empty(9, 5))
    with pytest.raises(dt.TraceError, match="padded lanes"):
        scan_reverse_padded(x, torch.empty(9, 5))


@dt.kernel
def broadcast_rows(w, x, out):
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = w[tm].unsqueeze(1).expand_as(x[tm, tn]) + w[tm][:, None].expand(-1, tn) * 0.5
    return out


def test_expand_as_and_expand():
    w, x = torch.randn(11), torch.randn(11, 6)
    got = broadcast_rows(w, x, torch.full((11, 6), float("nan")))
    torch.testing.assert_close(got, (w * 1.5)[:, None].expand(11, 6))


def test_scans_compile_for_sm90():
    """NVRTC for sm_90a, no GPU: a two-operand scan whose operand is broadcast from a row
    vector (newt's row-broadcast pass read the scan's results as one)."""
    ids = torch.randint(0, 11, (53,)).sort().values
    for k, args in ((segment_sums, (ids, torch.randn(53, 7), torch.zeros(11, 7))),
                    (recurrence, (torch.rand(5, 29), torch.randn(5, 29), torch.empty(5, 29)))):
        for ck in k.compile(*args, arch="sm_90a"):
            assert ck.cubin, ck.log
