"""Split reductions (deuteron/split.py): a device loop that only sums, spread over SPLIT
programs per tile by the config's `reduction_split`, against torch on the interpreter (and on a
GPU when there is one); the source it generates; the search space's SPLIT candidates."""
import os
import sys

import pytest
import torch

import deuteron as dt
from deuteron.autotune.space import Space
from deuteron.lower import lower
from deuteron.split import KNOB, bind_program, split_loop

sys.path.insert(0, os.path.dirname(__file__))
from test_deuteron_api import add_1d  # noqa: E402  (same folder)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def row_sum(x, out, scale):
    for tm in dt.tile(x.shape[0]):
        acc = dt.zeros([tm], dtype=dt.float32)
        for tn in dt.tile(x.shape[1]):
            acc = acc + x[tm, tn].float().sum(-1)
        out[tm] = (acc * scale).to(out.dtype)


def row_var(x, out):
    """Two accumulators (sum and sum of squares), an epilogue combining them."""
    n = x.shape[1]
    for tm in dt.tile(x.shape[0]):
        s = dt.zeros([tm], dtype=dt.float32)
        q = dt.zeros([tm], dtype=dt.float32)
        for tn in dt.tile(n):
            v = x[tm, tn].float()
            s += v.sum(-1)
            q += (v * v).sum(-1)
        mean = s / n
        out[tm] = (q / n - mean * mean).to(out.dtype)


def mid_sum(x, out):
    """A 2-D accumulator over a grid tile and a full slice (padded to a power of two)."""
    for tb in dt.tile(x.shape[0]):
        acc = dt.zeros([tb, x.shape[2]], dtype=dt.float32)
        for tk in dt.tile(x.shape[1]):
            acc += x[tb, tk, :].float().sum(1)
        out[tb, :] = acc.to(out.dtype)


def decayed_sum(x, out):
    """`acc = acc * 0.5 + e` is not a sum: never split."""
    for tm in dt.tile(x.shape[0]):
        acc = dt.zeros([tm], dtype=dt.float32)
        for tn in dt.tile(x.shape[1]):
            acc = acc * 0.5 + x[tm, tn].float().sum(-1)
        out[tm] = acc


def _cfg(blocks, split):
    return dt.Config(block_sizes=blocks, num_warps=4, **{KNOB: split})


def _nan(shape, dtype, device):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-3) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("m,n,dtype,split", [
    (5, 3001, torch.float32, 1), (5, 3001, torch.float32, 3), (5, 3001, torch.float16, 4),
    (1, 3001, torch.float16, 2), (3, 100, torch.float32, 4)])      # n under one block
def test_row_sum(device, m, n, dtype, split):
    cfg = _cfg([2, 256], split)
    k = dt.kernel(row_sum, config=cfg)
    x, out, rec = torch.randn(m, n, device=device).to(dtype), _nan((m,), dtype, device), []
    k.run((x, out, 0.5), {}, cfg, record=rec)
    assert ("pid_split" in rec[0].source) == (split > 1)
    torch.testing.assert_close(out.float(), x.float().sum(-1) * 0.5, **_tol(dtype))
    for _ in range(2):          # the second call replays the launch plan (workspace reused)
        x = torch.randn(m, n, device=device).to(dtype)
        out = _nan((m,), dtype, device)
        k(x, out, 0.5)
        torch.testing.assert_close(out.float(), x.float().sum(-1) * 0.5, **_tol(dtype))


@pytest.mark.parametrize("split", [1, 4])
def test_two_accumulators(device, split):
    x = torch.randn(6, 2049, device=device) + 1.0
    out = _nan((6,), torch.float32, device)
    dt.kernel(row_var, config=_cfg([4, 128], split))(x, out)
    torch.testing.assert_close(out, x.var(-1, unbiased=False), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("split", [1, 3])
def test_accumulator_with_full_slice(device, split):
    x = torch.randn(3, 523, 17, device=device, dtype=torch.float16)
    out = _nan((3, 17), torch.float16, device)
    dt.kernel(mid_sum, config=_cfg([2, 64], split))(x, out)
    torch.testing.assert_close(out.float(), x.float().sum(1), rtol=2e-2, atol=2e-2)


def test_not_a_sum_keeps_one_kernel(device):
    x = torch.randn(5, 701, device=device)
    out = _nan((5,), torch.float32, device)
    k = dt.kernel(decayed_sum, config=_cfg([1, 64], 4))
    k(x, out)
    want = torch.zeros(5, device=device)
    for j in range(0, 701, 64):
        want = want * 0.5 + x[:, j:j + 64].sum(-1)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    prog = k.trace(x, out).programs[0]
    assert split_loop(prog) is None
    assert bind_program(k, prog, _cfg([1, 64], 4))[0].source == lower(prog).source


def test_source_has_split_axis_only_when_split():
    k = dt.kernel(row_sum)
    x, out = torch.randn(5, 3001), torch.empty(5)
    prog = k.trace(x, out, 0.5).programs[0]
    one = bind_program(k, prog, _cfg([2, 256], 1))[0].source
    assert one == lower(prog).source and "program_id(1)" not in one and "SPLIT" not in one
    four = bind_program(k, prog, _cfg([2, 256], 4))[0].source
    assert "def row_sum_partial_kernel(" in four and "def row_sum_combine_kernel(" in four
    assert four.count("pid_split = nl.program_id(1)") == 1
    assert "for split in range(0, SPLIT):" in four


def test_space_offers_split_for_a_long_loop():
    x = torch.empty(16, 1).expand(16, 1 << 20)       # no 64 MB allocation to build the space
    sp = Space(dt.kernel(row_sum).trace(x, torch.empty(16), 1.0))     # long_sum's shape
    choices, _ = sp.knobs[KNOB]
    assert choices[0] == 1 and choices[1] == 2 and choices[-1] >= 64
    assert sp.default().tunable(KNOB, 1) > 1        # 16 programs: split to fill the SMs
    assert any(dict(c.tunables)[KNOB] != sp.default().tunable(KNOB, 1)
               for c in sp.neighbors(sp.default()))


def test_space_has_no_split_without_such_a_loop():
    x = torch.empty(1 << 20)
    assert KNOB not in Space(add_1d.trace(x, x)).knobs     # elementwise: no device loop
    assert KNOB not in Space(dt.kernel(decayed_sum).trace(torch.empty(4, 1 << 16),
                                                          torch.empty(4))).knobs
    assert KNOB not in Space(dt.kernel(row_sum).trace(torch.empty(4, 1000), torch.empty(4),
                                                      1.0)).knobs        # too short to split


def test_autotune_checks_split_configs():
    x = torch.randn(4, 3001)
    k = dt.kernel(row_sum, configs=[_cfg([2, 256], 1), _cfg([2, 256], 2)])
    times = {1: 2.0, 2: 1.0}
    state = {}

    def timer(fn):
        return times[state["split"]]
    real = k.run

    def run(args, kwargs, config, **kw):
        state["split"] = config.tunable(KNOB, 1)
        return real(args, kwargs, config, **kw)
    k.run = run
    cfg = k.autotune((x, torch.empty(4), 0.5), effort="quick", timer=timer, progress=False)
    assert cfg.tunable(KNOB, 1) == 2


def test_long_sum_gpu_default(target):
    if target != "cuda":
        pytest.skip("the full-size heuristic default runs on a GPU")
    x = torch.randn(16, 1 << 20, device="cuda")
    out = _nan((16,), torch.float32, "cuda")
    k = dt.kernel(row_sum, autotune_effort="none")
    k(x, out, 1.0)
    assert k.config_for((x, out, 1.0)).tunable(KNOB, 1) > 1
    torch.testing.assert_close(out, x.sum(-1), rtol=1e-3, atol=1e-2)


def test_autotune_rejects_a_wrong_split(monkeypatch):
    """A split config whose result is wrong (here: the combine kernel never runs, the output
    keeps its NaN poison) is rejected by the oracle check like any config."""
    from deuteron.kernel import Launch
    from deuteron.split import SplitLaunch

    def partial_only(self):
        Launch(self.jitfn[0], self.grid, self.args, self.kwargs)()
    monkeypatch.setattr(SplitLaunch, "__call__", partial_only)
    x = torch.randn(4, 3001)
    k = dt.kernel(row_sum, configs=[_cfg([2, 256], 1), _cfg([2, 256], 2)])
    cfg = k.autotune((x, torch.empty(4), 0.5), effort="quick", timer=lambda fn: 1.0,
                     progress=False)
    assert cfg.tunable(KNOB, 1) == 1 and "1 rejected" in k.last_summary


def test_split_kernels_compile_for_sm_90a():
    """Both kernels of a split go through NVRTC (no GPU needed)."""
    args = (torch.randn(6, 2049), torch.empty(6))
    cks = dt.kernel(row_var).compile(*args, config=_cfg([4, 128], 4), arch="sm_90a")
    assert len(cks) == 2
    for ck in cks:
        assert ck.cubin and ck.n_spills == 0, ck.log
