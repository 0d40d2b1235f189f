"""The autotuner on the CPU: search logic with a fake evaluator, real candidates checked against
the oracle on the newt interpreter (a planted mask-breaking config is rejected), timing with a
fake timer, the disk cache (hit in a second process, corrupt entries rebuilt) and crash-proof
compile workers."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import deuteron as dt
from deuteron import lower as dt_lower
from deuteron.autotune import cache as dcache
from deuteron.autotune import search as dsearch
from deuteron.autotune import workers
from deuteron.autotune.space import Space

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))
    return tmp_path / "dt-cache"


@dt.kernel
def rowsum_exp(x):
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    for tile_m in dt.tile(x.shape[0]):
        acc = dt.zeros([tile_m], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc += torch.exp(x[tile_m, tile_k]).sum(dim=1)
        out[tile_m] = acc
    return out


@dt.kernel
def matmul(x, y, out):
    for tile_m, tile_n in dt.tile([x.shape[0], y.shape[1]]):
        acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
        out[tile_m, tile_n] = acc


def fake_timer_by(score):
    """A timer that reports score(config) for the config being timed."""
    state = {}

    def timer(fn):
        return score(state["cfg"])
    return timer, state


# ----------------------------------------------------------------------------- space and search

def test_space_from_trace_matmul():
    x, y = torch.randn(300, 200, dtype=torch.float16), torch.randn(200, 500, dtype=torch.float16)
    sp = Space(matmul.trace(x, y, torch.empty(300, 500, dtype=torch.float16)))
    assert sp.has_dot and sp.grouped and sp.has_loops
    assert sp.block_choices == [[64, 128, 256], [64, 128, 256], [32, 64, 128]]
    assert sp.default() == dt.Config([128, 128, 64], num_warps=8, num_stages=3, group_size=8)
    assert all(sp.valid(c) for c in sp.neighbors(sp.default()))


def test_space_softmax_is_one_row_per_program():
    @dt.kernel
    def softmax(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.shape[0]):
            r = x[t, :]
            e = torch.exp(r - r.amax(dim=1, keepdim=True))
            out[t, :] = e / e.sum(dim=1, keepdim=True)
        return out
    sp = Space(softmax.trace(torch.randn(64, 4096)))
    assert sp.default() == dt.Config([1], num_warps=8, num_stages=3, group_size=8)
    assert not sp.has_loops and sp.stages == [3]


def test_search_finds_the_minimum_within_budget():
    x = torch.randn(300, 200, dtype=torch.float16)
    sp = Space(matmul.trace(x, x.T.contiguous(), torch.empty(300, 300, dtype=torch.float16)))
    target = dt.Config([64, 256, 32], 8, 4, 4)
    calls = []

    def evaluate(cfgs):
        calls.append(len(cfgs))
        return {c: dsearch.Result("ok", 1.0 + sum(abs(a - b) for a, b in zip(
            c.block_sizes, target.block_sizes)) / 64 + abs(c.num_stages - 4) + abs(
            c.num_warps - 8) + abs(c.group_size - 4) / 4) for c in cfgs}

    best, results = dsearch.search(sp, evaluate, "full")
    assert best == target
    assert len(results) <= dsearch.BUDGETS["full"][1]
    best_q, results_q = dsearch.search(sp, evaluate, "quick")
    assert len(results_q) <= dsearch.BUDGETS["quick"][1]
    assert results_q[best_q].ms == min(r.ms for r in results_q.values())


def test_search_skips_rejected_and_failed():
    x = torch.randn(64, 64)
    sp = Space(rowsum_exp.trace(x))
    cands = [dt.Config([1, 16]), dt.Config([2, 32]), dt.Config([4, 64])]
    status = {cands[0]: "failed", cands[1]: "rejected", cands[2]: "ok"}
    best, res = dsearch.search(sp, lambda cs: {c: dsearch.Result(
        status[c], 0.1 if status[c] != "ok" else 5.0) for c in cs}, "quick", candidates=cands)
    assert best == cands[2]


# ----------------------------------------------------------------------------- the oracle check

def test_planted_mask_breaking_config_is_rejected(monkeypatch):
    """Break the lowering so reductions forget their mask: exp(0) = 1 then leaks from padded
    lanes whenever the k block does not divide K = 48. The fastest configs (by the fake timer)
    are exactly the broken ones; the tuner must reject them and pick the correct one."""
    real = dt_lower._Lowering._reduce

    def no_mask(self, v):
        v.attrs["masked"] = False
        return real(self, v)
    monkeypatch.setattr(dt_lower._Lowering, "_reduce", no_mask)
    x = torch.randn(10, 48)
    good = dt.Config([4, 16], num_warps=1)
    bad = [dt.Config([4, 32], num_warps=1), dt.Config([8, 64], num_warps=1)]
    rowsum_exp.configs = [bad[0], good, bad[1]]
    try:
        state = {}
        real_run = rowsum_exp.run

        def run(args, kwargs, config, record=None, poison=False):
            state["cfg"] = config
            return real_run(args, kwargs, config, record, poison)
        monkeypatch.setattr(rowsum_exp, "run", run)
        timer = lambda fn: {good: 9.0}.get(state["cfg"], 1.0)   # noqa: E731
        cfg = rowsum_exp.autotune((x,), effort="quick", timer=timer, progress=False)
    finally:
        rowsum_exp.configs = None
    assert cfg == good
    res = rowsum_exp.last_results
    assert [res[c].status for c in bad] == ["rejected", "rejected"]
    assert "differ" in res[bad[0]].detail
    assert "3 configs tried, 2 rejected (wrong result), 0 failed" in rowsum_exp.last_summary


def test_quick_autotune_end_to_end_on_interpreter(capsys):
    x, y = torch.randn(33, 40), torch.randn(40, 17)
    out = torch.full((33, 17), float("nan"))
    seen = []

    def timer(fn):
        seen.append(1)
        return 1.0 / len(seen)          # later configs look faster: the search keeps moving
    cfg = matmul.autotune((x, y, out), effort="quick", timer=timer)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("[deuteron] matmul: ") and "configs tried" in line and "dt.Config(" in line
    assert isinstance(cfg, dt.Config) and len(cfg.block_sizes) == 3
    assert torch.isnan(out).all()                   # tuning ran on clones
    matmul(x, y, out)
    torch.testing.assert_close(out, x @ y, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- disk cache

def test_cache_key_buckets_shapes():
    a = dcache.make_key(matmul, (torch.randn(37, 29), torch.randn(29, 45), torch.empty(37, 45)), {})
    b = dcache.make_key(matmul, (torch.randn(60, 20), torch.randn(20, 33), torch.empty(60, 33)), {})
    c = dcache.make_key(matmul, (torch.randn(70, 29), torch.randn(29, 45), torch.empty(70, 45)), {})
    assert a == b and a != c
    assert a["args"][0] == ["tensor", [64, 32], "float32"]
    h = dcache.make_key(matmul, (torch.randn(37, 29).half(),) * 2 + (torch.empty(1),), {})
    assert h != a


def test_corrupt_cache_entry_is_ignored_and_rebuilt(_cache):
    key = dcache.make_key(rowsum_exp, (torch.randn(10, 48),), {})
    cfg = dt.Config([2, 16], 2, 3, 8)
    assert dcache.store(key, cfg)
    assert dcache.load(key) == cfg
    path = dcache.path_of(key)
    with open(path, "w") as f:
        f.write('{"key": {"kernel": "trunc')
    assert dcache.load(key) is None
    other = dict(key, source="something else")
    with open(path, "w") as f:
        json.dump({"key": other, "config": cfg.to_dict()}, f)
    assert dcache.load(key) is None                   # an entry for another key
    assert dcache.store(key, cfg) and dcache.load(key) == cfg
    assert not [p for p in os.listdir(os.path.dirname(path)) if p.startswith(".tmp-")]


_MODULE = '''
import torch
import deuteron as dt

@dt.kernel(autotune_effort="quick", configs=[dt.Config([8, 32], 1), dt.Config([16, 64], 2)])
def scaled(x):
    out = torch.empty_like(x)
    for tile_m, tile_n in dt.tile([x.shape[0], x.shape[1]]):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 3.0 + 1.0
    return out
'''

_SECOND = '''
import sys, torch
sys.path.insert(0, sys.argv[1])
import deuteron.autotune.bench as bench
def no_tuning(*a, **k):
    raise SystemExit("tuned in the second process")
bench.tune = no_tuning
import dtk_mod
x = torch.randn(21, 50)
y = dtk_mod.scaled(x)
torch.testing.assert_close(y, x * 3 + 1)
print("CONFIG", dtk_mod.scaled.config_for((x,)))
'''


def test_second_process_launches_from_disk_cache(tmp_path, _cache):
    (tmp_path / "dtk_mod.py").write_text(_MODULE)
    sys.path.insert(0, str(tmp_path))
    try:
        import dtk_mod
        x = torch.randn(21, 50)
        cfg = dtk_mod.scaled.autotune((x,), effort="quick", timer=lambda fn: 1.0, progress=False)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("dtk_mod", None)
    env = dict(os.environ, DEUTERON_CACHE_DIR=str(_cache),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _SECOND, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"CONFIG {cfg}" in r.stdout


# ----------------------------------------------------------------------------- compile workers

def _task(t):
    if t == "crash":
        os._exit(7)            # what a segfaulting compiler looks like from outside
    if t == "error":
        raise ValueError("bad config")
    return True, f"ok {t}"


def test_a_crashing_compile_fails_only_its_own_config():
    tasks = ["a", "crash", "b", "error", "c"]
    res = workers.compile_all(tasks, _task, max_workers=2)
    workers.shutdown()
    assert res[0] == (True, "ok a") and res[2] == (True, "ok b") and res[4] == (True, "ok c")
    assert res[1][0] is False and "crashed" in res[1][1]
    assert res[3][0] is False and "bad config" in res[3][1]


def test_candidates_compile_in_workers_with_nvrtc():
    """The GPU path's parallel compile, run here with newt.compile (NVRTC works without a GPU):
    good configs compile, a config newt rejects (block 24 is not a power of two) fails alone."""
    try:
        from newt.runtime import nvrtc
        nvrtc.version()
    except Exception as e:
        pytest.skip(f"NVRTC unavailable: {e}")
    from deuteron.autotune import bench
    x = torch.randn(10, 48)
    progs = rowsum_exp.trace(x).programs
    good, bad = dt.Config([4, 16], num_warps=1), dt.Config([4, 24], num_warps=1)
    failed = bench.precompile(rowsum_exp, progs, [good, bad], task_fn=workers.aot_kernel)
    workers.shutdown()
    assert list(failed) == [bad], failed
