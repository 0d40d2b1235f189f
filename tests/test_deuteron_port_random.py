"""torch's random tensors in a tile loop, as Helion's dropout kernels write them:
`torch.rand_like(v)`, `torch.randn_like(v)`, `torch.rand([tile_m, tile_n])` (deuteron/rng.py).
The kernel and the oracle draw the same Philox numbers under the same `torch.manual_seed`, every
call draws new ones, any tiling draws the same ones, and loops where every program would repeat
one draw are refused. Inputs are fresh random data of odd sizes; outputs NaN-poisoned
arguments where the kernel takes them; the results are compared with torch."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def dropout_into(p: float, x, out):
    for t in hl.tile(x.numel()):
        v = x[t]
        keep = torch.rand_like(v) > p
        out[t] = torch.where(keep, v / (1 - p), torch.zeros_like(v))
    return out


def _seeded(fn, seed, *args):
    torch.manual_seed(seed)
    return fn(*args)


def test_dropout_with_rand_like_matches_torch_and_the_oracle(device):
    p, x = 0.3, torch.randn(3001, device=device)
    nan = lambda: torch.full_like(x, float("nan"))
    got = _seeded(dropout_into, 11, p, x, nan())
    kept = got != 0
    assert not got.isnan().any()
    torch.testing.assert_close(got[kept], x[kept] / (1 - p))       # torch's dropout scaling
    assert abs(kept.float().mean().item() - (1 - p)) < 0.05
    torch.testing.assert_close(_seeded(dropout_into.ref, 11, p, x, nan()), got, rtol=0, atol=0)
    again = _seeded(dropout_into, 11, p, x, nan())        # the replayed launch: same seed
    torch.testing.assert_close(again, got, rtol=0, atol=0)
    other = dropout_into(p, x, nan())                     # the next draw: a new mask
    assert (other != 0).ne(kept).any()


@dt.kernel(config=dt.Config(block_sizes=[16, 8]))
def noisy(x, out):
    for tm, tn in hl.tile(x.shape):
        v = x[tm, tn]
        out[tm, tn] = v + torch.randn_like(v) * 0.5 + torch.rand([tm, tn], device=x.device)
    return out


def test_randn_like_and_rand_over_tiles_in_fp16(device):
    x = torch.randn(37, 45, dtype=torch.float16, device=device)
    out = torch.full_like(x, float("nan"))
    got = _seeded(noisy, 5, x, out)
    want = _seeded(noisy.ref, 5, x, torch.full_like(x, float("nan")))
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    noise = (got - x).float()
    assert abs(noise.mean().item() - 0.5) < 0.1            # N(0, 0.25) + U(0, 1)
    assert 0.45 < noise.std().item() < 0.7                 # sqrt(0.25 + 1/12) = 0.577
    # every element of the 16x8 tiles has its own number: no tile repeats another's
    u = _seeded(noisy, 5, torch.zeros_like(x), torch.full_like(x, float("nan")))
    assert not torch.equal(u[:16, :8], u[16:32, :8])
    assert not torch.equal(u[:16, :8], u[:16, 8:16])


@dt.kernel
def uniform(x, out):
    m, n = x.shape
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            out[tm, tn] = torch.rand_like(x[tm, tn].float())
    return out


def test_any_tiling_draws_the_same_numbers_and_the_oracle_agrees(device):
    x = torch.randn(19, 70, device=device)
    runs = [_seeded(uniform.run, 3, (x, torch.full_like(x, float("nan"))), {},
                    dt.Config(block_sizes=list(b))) for b in ((4, 16), (32, 128), (1, 1))]
    for r in runs[1:]:
        torch.testing.assert_close(r, runs[0], rtol=0, atol=0)
    torch.testing.assert_close(_seeded(uniform.ref, 3, x, torch.full_like(x, float("nan"))),
                               runs[0], rtol=0, atol=0)
    assert 0.0 <= runs[0].min() and runs[0].max() < 1.0
    assert abs(runs[0].mean().item() - 0.5) < 0.05


def test_the_seed_is_an_argument_so_every_call_reuses_one_kernel():
    x = torch.randn(129)
    src = dropout_into.to_newt_source(0.5, x, torch.empty_like(x))
    assert "do_not_specialize=['seed']" in src and "nl.rand(seed, " in src
    assert len(dropout_into.compile(0.5, x, torch.empty_like(x), arch="sm_90a")) == 1


def test_tuning_leaves_the_draws_of_the_call_to_the_oracle():
    @dt.kernel(configs=[dt.Config(block_sizes=[32]), dt.Config(block_sizes=[256])])
    def tuned_dropout(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.numel()):
            v = x[t]
            out[t] = torch.where(torch.rand_like(v) < 0.5, v * 2.0, 0.0)
        return out

    x = torch.randn(777)
    got = _seeded(tuned_dropout, 9, x)             # tunes (both configs agree with the oracle)
    assert tuned_dropout.last_summary and "0 rejected" in tuned_dropout.last_summary
    torch.testing.assert_close(_seeded(tuned_dropout.ref, 9, x), got, rtol=0, atol=0)


def test_loops_where_every_program_would_repeat_a_draw_are_refused():
    @dt.kernel
    def per_row(x, out):
        for i in hl.grid(x.shape[0]):
            for tn in hl.tile(x.shape[1]):
                out[i, tn] = torch.rand_like(x[i, tn])
        return out

    @dt.kernel
    def row_draw_in_a_2d_grid(x, out):
        for tm, tn in hl.tile(x.shape):
            out[tm, tn] = x[tm, tn] + torch.rand_like(x[tm, 0])[:, None]
        return out

    x = torch.randn(5, 33)
    with pytest.raises(dt.TraceError, match="index"):
        per_row(x, torch.empty_like(x))
    with pytest.raises(dt.TraceError, match="lacks the dim"):
        row_draw_in_a_2d_grid(x, torch.empty_like(x))


@dt.kernel
def seeded_dropout(x, seed: int):
    out = torch.empty_like(x)
    for t in hl.tile(x.numel()):
        v = x[t]
        out[t] = torch.where(hl.rand([t], seed=seed) > 0.4, v / 0.6, 0.0)
    return out


def test_hl_rand_seed_is_an_argument_not_part_of_the_source(device):
    x = torch.randn(1234, device=device)
    a, b = seeded_dropout(x, 17), seeded_dropout(x, 18)
    assert seeded_dropout.to_newt_source(x, 17) == seeded_dropout.to_newt_source(x, 18)
    assert len(seeded_dropout._jit) == 1              # one kernel serves both seeds
    torch.testing.assert_close(seeded_dropout(x, 17), a, rtol=0, atol=0)
    assert (a != 0).ne(b != 0).any()
    for got, seed in ((a, 17), (b, 18)):
        torch.testing.assert_close(seeded_dropout.ref(x, seed), got, rtol=0, atol=0)
        kept = got != 0
        torch.testing.assert_close(got[kept], x[kept] / 0.6)
        assert abs(kept.float().mean().item() - 0.6) < 0.06


@dt.kernel
def two_loops(x, y):
    a, b = torch.empty_like(x), torch.empty_like(y)
    for t in hl.tile(x.shape[0]):
        a[t] = x[t] * torch.rand_like(x[t])
    for tm, tn in hl.tile(y.shape):
        v = y[tm, tn]
        b[tm, tn] = v + torch.randn_like(v)
    return a, b


def test_each_tile_loop_draws_its_own_numbers_in_the_kernel_and_the_oracle(device):
    x, y = torch.rand(301, device=device) + 1, torch.randn(7, 301, device=device)
    for _ in range(2):                                   # traced, then replayed
        got = _seeded(two_loops, 21, x, y)
        want = _seeded(two_loops.ref, 21, x, y)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    u = got[0] / x
    assert 0 <= u.min() and u.max() <= 1 and abs(u.mean().item() - 0.5) < 0.06
    assert abs((got[1] - y).std().item() - 1.0) < 0.1
    # the second loop's first stream is not the first loop's uniforms
    assert not torch.allclose(u[:7], (got[1] - y)[:, 0].to(u.dtype))
