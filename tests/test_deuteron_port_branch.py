"""`if` on values computed in the kernel (a loaded scalar, a tile's `.begin`), traced into a newt
`if` / `else`, on the newt interpreter: names assigned on either side hold the chosen side's
value after the `if`, the else side sees the values from before the `if`, ifs nest and hold
inner loops, the oracle agrees, and host `if`s keep their meaning. Fresh random data, odd sizes,
NaN-poisoned outputs."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def by_flag(x, flags, out, scale: float):
    for tm in hl.tile(x.size(0), block_size=1):
        f = flags[tm.begin]
        acc = x[tm.begin, :] * scale
        if f > 0:
            acc = acc * 2.0
        elif f == 0:
            acc = acc - 1.0
        else:
            acc = -acc
        if scale > 1.0:                       # a host if: plain Python
            acc = acc + 100.0
        out[tm.begin, :] = acc
    return out


def _by_flag_want(x, flags, scale):
    acc = x * scale
    acc = torch.where(flags[:, None] > 0, acc * 2.0, torch.where(flags[:, None] == 0, acc - 1.0,
                                                                 -acc))
    return acc + 100.0 if scale > 1.0 else acc


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_if_elif_else_on_a_loaded_scalar(scale):
    x, flags = torch.randn(9, 13), torch.randint(-1, 2, (9,))
    want = _by_flag_want(x, flags, scale)
    got = by_flag(x, flags, torch.full((9, 13), float("nan")), scale)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(by_flag.ref(x, flags, torch.full((9, 13), float("nan")), scale),
                               want)


@dt.kernel
def split_k_bias(x, y, bias, out):
    m, k = x.shape
    for tm, tn, tk in hl.tile([m, y.size(1), k], block_size=[None, None, 16]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for ik in hl.tile(tk.begin, tk.end):
            acc = torch.addmm(acc, x[tm, ik], y[ik, tn])
        if tk.begin == 0:                     # the bias once, by the first split only
            acc = acc + bias[tn][None, :]
        hl.atomic_add(out, [tm, tn], acc)
    return out


@pytest.mark.parametrize("blocks", [None, [16, 32, 16]])
def test_split_k_adds_the_bias_once(blocks):
    x, y, bias = torch.randn(19, 53), torch.randn(53, 21), torch.randn(21)
    want = x @ y + bias
    if blocks is None:
        got = split_k_bias(x, y, bias, torch.zeros(19, 21))
    else:
        got = split_k_bias.run((x, y, bias, torch.zeros(19, 21)), {}, dt.Config(block_sizes=blocks))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(split_k_bias.ref(x, y, bias, torch.zeros(19, 21)), want,
                               rtol=1e-4, atol=1e-4)


@dt.kernel
def groups(offsets, x, out):
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        count = offsets[g + 1] - start
        if count != 0:
            for t in hl.tile(start, start + count):
                out[t] = x[t] * 2.0 + g
    return out


def test_an_inner_loop_under_an_if():
    lengths = torch.tensor([3, 0, 5, 1, 0, 7])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    x = torch.randn(int(offsets[-1]))
    want = x * 2.0 + torch.repeat_interleave(torch.arange(6.0), lengths)
    torch.testing.assert_close(groups(offsets, x, torch.full_like(x, float("nan"))), want)


@dt.kernel
def vector_if(x, out):
    for tm in hl.tile(x.size(0)):
        v = x[tm]
        if v > 0:
            v = v * 2.0
        out[tm] = v
    return out


def test_an_if_on_a_tile_is_refused():
    with pytest.raises(dt.TraceError, match="needs a scalar"):
        vector_if(torch.randn(5), torch.empty(5))


@dt.kernel
def scaled_groups(offsets, x, scale, out):
    """Per group, in row blocks of a registered size: rows past the group's end are masked off
    by hand (two gather indices: rows and columns each take their own axis)."""
    bm = hl.register_block_size(4, 16)
    n = x.size(1)
    for g in hl.grid(offsets.size(0) - 1):
        start, end = offsets[g], offsets[g + 1]
        if end > start:
            for b in hl.grid((end - start + bm - 1) // bm):
                rows = start + b * bm + hl.arange(bm)
                cols = hl.arange(n)
                keep = rows < end
                acc = hl.zeros([bm, n], dtype=torch.float32)
                acc = acc + hl.load(x, [rows, cols], extra_mask=keep[:, None]) * scale[g]
                hl.store(out, [rows, cols], acc, extra_mask=keep[:, None])
    return out


@pytest.mark.parametrize("bm", [4, 16])
def test_registered_block_rows_under_an_if(bm):
    lengths = torch.tensor([5, 0, 9, 1, 17])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    x, scale = torch.randn(int(offsets[-1]), 8), torch.randn(5)
    want = x * torch.repeat_interleave(scale, lengths)[:, None]
    got = scaled_groups.run((offsets, x, scale, torch.full_like(x, float("nan"))), {},
                            dt.Config(block_sizes=[bm]))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(scaled_groups.ref(offsets, x, scale, torch.full_like(x, float("nan"))),
                               want)


def test_branches_compile_for_sm90():
    x, y, bias = torch.randn(19, 53), torch.randn(53, 21), torch.randn(21)
    for k, args in ((split_k_bias, (x, y, bias, torch.zeros(19, 21))),
                    (by_flag, (torch.randn(9, 13), torch.randint(-1, 2, (9,)),
                               torch.empty(9, 13), 3.0))):
        for ck in k.compile(*args, arch="sm_90a"):
            assert ck.cubin and ck.n_spills == 0, ck.log


@dt.kernel
def skip_blocks(x, flags, out):
    m, n = x.shape
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n, block_size=4):
            if flags[tn.id] != 0:              # one flag per pinned block of 4 columns
                acc = acc + x[tm, tn].sum(1)
        out[tm] = acc
    return out


def test_an_if_in_a_loop_of_pinned_blocks_and_its_oracle():
    """The oracle runs a loop of pinned block_size in tiles of that size, so an `if` on the
    tile (`tn.id`, `tn.begin`) sees each tile as the kernel does."""
    x, flags = torch.randn(7, 22), torch.randint(0, 2, (6,))
    want = (x * flags.repeat_interleave(4)[:22]).sum(1)
    torch.testing.assert_close(skip_blocks(x, flags, torch.full((7,), float("nan"))), want)
    torch.testing.assert_close(skip_blocks.ref(x, flags, torch.full((7,), float("nan"))), want)


def test_a_kernel_closing_over_names_keeps_them_when_rewritten():
    scale = 3.0

    @dt.kernel
    def scaled_where_flagged(x, flags, out):
        for tm in hl.tile(x.size(0), block_size=1):
            v = x[tm.begin, :]
            if flags[tm.begin] > 0:
                v = v * scale
            out[tm.begin, :] = v
        return out

    x, flags = torch.randn(5, 11), torch.randint(0, 2, (5,))
    got = scaled_where_flagged(x, flags, torch.full((5, 11), float("nan")))
    torch.testing.assert_close(got, torch.where(flags[:, None] > 0, x * scale, x))


@dt.kernel
def zero_ignored_rows(x, labels, out, ignore: int, use_labels: bool):
    for tm in hl.tile(x.size(0), block_size=1):
        if use_labels:                                      # a host if around a traced one
            if labels[tm.begin] == ignore:
                for tn in hl.tile(x.size(1)):
                    out[tm.begin, tn] = 0.0
                continue                                    # the rest of the body: an else
        for tn in hl.tile(x.size(1)):
            out[tm.begin, tn] = x[tm.begin, tn] * 2.0
    return out


@pytest.mark.parametrize("use_labels", [True, False])
def test_continue_under_an_if_on_a_kernel_value(use_labels):
    x, labels = torch.randn(7, 19), torch.tensor([1, -100, 2, -100, -100, 3, 4])
    want = torch.where((labels[:, None] == -100) & use_labels, 0.0, x * 2.0)
    args = (x, labels, torch.full((7, 19), float("nan")), -100, use_labels)
    torch.testing.assert_close(zero_ignored_rows(*args), want)
    args = (x, labels, torch.full((7, 19), float("nan")), -100, use_labels)
    torch.testing.assert_close(zero_ignored_rows.ref(*args), want)
