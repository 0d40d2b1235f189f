"""Compiling a Helion-style kernel whose tile shapes read its registered block sizes
(`hl.zeros([block_size_m, block_size_n])`, as Helion's KL-divergence and JSD kernels write):
`k.compile(config=...)` and the autotuner's parallel compiles build the program that config
runs, not the one traced with the default sizes (which newt rejects: "cannot broadcast").
NVRTC runs without a GPU; the results are compared with torch on the interpreter, outputs
NaN-poisoned, odd sizes."""
import pytest
import torch

import deuteron as dt
import deuteron.language as hl


@pytest.fixture(autouse=True)
def _caches(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "newt-cache"))


def _nvrtc_or_skip():
    try:
        from newt.runtime import nvrtc
        nvrtc.version()
    except Exception as e:
        pytest.skip(f"NVRTC unavailable: {e}")


@dt.kernel
def weighted_row_sums(x, w, out):
    m, n = x.shape
    bn = hl.register_block_size(n)
    bm = hl.register_block_size(m)
    for tm in hl.tile(m, block_size=bm):
        total = hl.zeros([tm, bn], dtype=torch.float32)
        for tn in hl.tile(n, block_size=bn):
            part = hl.zeros([bm, bn], dtype=torch.float32)
            part += x[tm, tn] * w[tn][None, :]
            total += part
        out[tm] = total.sum(dim=-1)
    return out


def _args():
    x, w = torch.randn(37, 301), torch.randn(301)
    return (x, w, torch.full((37,), float("nan"))), (x * w).sum(-1)


# the registered sizes in the order the kernel registers them: [bn, bm]
CONFIGS = [dt.Config(block_sizes=[64, 16]), dt.Config(block_sizes=[16, 64], num_warps=2),
           dt.Config(block_sizes=[128, 32])]


def test_each_config_runs_its_own_registered_sizes():
    args, want = _args()
    for cfg in CONFIGS:
        got = weighted_row_sums.run(tuple(a.clone() for a in args), {}, cfg)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_compile_builds_the_program_of_the_config_it_is_given():
    _nvrtc_or_skip()
    args, _ = _args()
    for cfg in CONFIGS:
        assert len(weighted_row_sums.compile(*args, config=cfg, arch="sm_90a")) == 1


def test_the_tuners_parallel_compiles_trace_each_choice_of_registered_sizes():
    _nvrtc_or_skip()
    from deuteron.autotune import bench
    args, _ = _args()
    tracer = weighted_row_sums.trace(*args)
    programs = bench.programs_by_config(weighted_row_sums, tracer, args, {})
    assert callable(programs)
    built = bench.precompile(weighted_row_sums, programs, CONFIGS, "sm_90a")
    assert all(built[c][0] == "ok" for c in CONFIGS), built
    # a kernel without registered sizes or tunables keeps the one trace
    @dt.kernel
    def plain(x, out):
        for t in hl.tile(x.shape[0]):
            out[t] = x[t] * 2.0
        return out
    x = torch.randn(29)
    tr = plain.trace(x, x)
    assert bench.programs_by_config(plain, tr, (x, x), {}) is tr.programs
