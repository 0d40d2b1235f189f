"""The untuned default config on the CPU interpreter: a launch of more than 256 programs gets
larger grid tiles (the interpreter runs programs one after another), smaller launches keep the
heuristic default, and the result is the same as torch's either way. Fresh random data, odd
sizes, NaN-poisoned outputs."""
import math

import pytest
import torch

import deuteron as dt
import deuteron.language as hl
from deuteron.autotune.space import Space


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def scaled_rows(x, w, out):
    m, n = x.shape
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            acc = acc + (x[tm, tn] * w[tn][None, :]).sum(-1)
        out[tm] = acc
    return out


def _programs(kernel, cfg, *args):
    space = Space(kernel.trace(*args))
    grid = [i for i, t in enumerate(space.tiles) if t.kind == "grid"]
    return math.prod(-(-space.tiles[i].extent // cfg.block_sizes[i]) for i in grid), space


def test_a_big_launch_gets_fewer_larger_programs():
    x, w = torch.randn(5001, 201), torch.randn(201)
    out = torch.full((5001,), float("nan"))
    got = scaled_rows(x, w, out)
    torch.testing.assert_close(got, x @ w, rtol=1e-4, atol=1e-4)
    cfg = list(scaled_rows._chosen.values())[-1]
    n, space = _programs(scaled_rows, cfg, x, w, out)
    assert n <= 256
    # the heuristic default (what a GPU would run untuned) launches far more programs
    assert _programs(scaled_rows, space.default(), x, w, out)[0] > 256


def test_a_small_launch_keeps_the_heuristic_default():
    x, w = torch.randn(37, 45), torch.randn(45)
    out = torch.full((37,), float("nan"))
    torch.testing.assert_close(scaled_rows(x, w, out), x @ w, rtol=1e-4, atol=1e-4)
    cfg = list(scaled_rows._chosen.values())[-1]
    space = Space(scaled_rows.trace(x, w, out))
    assert cfg == space.few_programs(space.default()) == space.default()
