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
    sp = Space(wide_softmax.trace(torch.randn(64, 4096)))   # (defined below)
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


def test_matmul_search_starts_from_the_portfolio(monkeypatch):
    """The landscape seen on the H200: any 4-warp config beats the 8-warp default, and nothing
    one step away from a 4-warp config is better (128x256 at 4 warps is invalid: too many
    accumulators), but 128x256x64 at 8 warps is the best overall. A pattern search from the
    first batch's best stops at a 4-warp config; with the portfolio's tilings in the first
    batch, the search finds the best."""
    n = 4096
    x = torch.empty(n, n, dtype=torch.float16)
    sp = Space(matmul.trace(x, x, x))
    best_cfg = dt.Config([128, 256, 64], num_warps=8, num_stages=3, group_size=8)
    assert best_cfg in sp.portfolio() and all(sp.valid(c) for c in sp.portfolio())

    def evaluate(cs):
        return {c: dsearch.Result("ok", 1.0 if c == best_cfg else 2.0 if c.num_warps == 4
                                  else 3.0) for c in cs}
    best, results = dsearch.search(sp, evaluate, "quick", seed=1)
    assert best == best_cfg
    assert len(results) <= dsearch.BUDGETS["quick"][1]
    monkeypatch.setattr(sp, "portfolio", lambda: [])
    assert dsearch.search(sp, evaluate, "quick", seed=1)[0] != best_cfg, \
        "the landscape no longer needs the portfolio: the test checks nothing"


def test_portfolio_is_only_for_matmul_shaped_kernels():
    assert Space(rowsum_exp.trace(torch.randn(64, 64))).portfolio() == []
    sp = Space(matmul.trace(*(torch.randn(300, 300),) * 3))        # fp32 inputs: tf32 dot
    assert sp.fp32_dot and all(c.block_sizes[2] == 32 for c in sp.portfolio())


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
    real = dt_lower.Lowering._reduce

    def no_mask(self, v):
        v.attrs["masked"] = False
        return real(self, v)
    monkeypatch.setattr(dt_lower.Lowering, "_reduce", no_mask)
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


def test_finalists_are_timed_again(monkeypatch):
    """A config measured fast once by luck loses the final round: the best few are timed again
    and the pick follows the second measurement."""
    x = torch.randn(10, 48)
    lucky, steady, slow = (dt.Config([4, 16], num_warps=1), dt.Config([2, 16], num_warps=1),
                           dt.Config([1, 16], num_warps=1))
    rowsum_exp.configs = [lucky, steady, slow]
    state, seen = {}, []
    real_run = rowsum_exp.run

    def run(args, kwargs, config, record=None, poison=False):
        state["cfg"] = config
        return real_run(args, kwargs, config, record, poison)
    monkeypatch.setattr(rowsum_exp, "run", run)

    def timer(fn):
        seen.append(state["cfg"])
        first = seen.count(state["cfg"]) == 1
        return {lucky: 1.0 if first else 5.0, steady: 2.0, slow: 9.0}[state["cfg"]]
    try:
        cfg = rowsum_exp.autotune((x,), effort="quick", timer=timer, progress=False)
    finally:
        rowsum_exp.configs = None
    assert cfg == steady
    assert seen.count(lucky) == 2 and seen.count(steady) == 2
    assert rowsum_exp.last_results[steady].ms == 2.0


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
    assert res[0] == (True, "ok a") and res[2] == (True, "ok b") and res[4] == (True, "ok c")
    assert res[1][0] is False and "crashed" in res[1][1]
    assert res[3][0] is False and "bad config" in res[3][1]


def _nvrtc_or_skip():
    try:
        from newt.runtime import nvrtc
        nvrtc.version()
    except Exception as e:
        pytest.skip(f"NVRTC unavailable: {e}")


@pytest.fixture
def newt_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "newt-cache"))
    return tmp_path / "newt-cache"


def test_candidates_compile_in_workers_with_nvrtc(newt_cache):
    """The GPU path's parallel compile, run here for sm_90a (NVRTC works without a GPU): good
    configs compile into newt's disk cache with their ptxas report, a config newt rejects (block
    24 is not a power of two) fails alone, and the user's process then finds the workers'
    binaries under the very key its JIT computes (no compile in-process)."""
    _nvrtc_or_skip()
    from deuteron.autotune import bench
    from deuteron.kernel import bind
    from newt.runtime import specialize
    x = torch.randn(10, 48)
    progs = rowsum_exp.trace(x).programs
    good, bad = dt.Config([4, 16], num_warps=1), dt.Config([4, 24], num_warps=1)
    built = bench.precompile(rowsum_exp, progs, [good, bad], "sm_90a")
    assert built[good][0] == "ok" and built[good][1]["n_regs"] > 0, built
    assert bench.spills(built[good][1]) == 0
    assert built[bad][0] == "failed" and "power of 2" in built[bad][1].replace("two", "2"), built
    low = dt_lower.lower(progs[0])
    job = workers.job_of(bind(low, good, rowsum_exp.jit_function(low)), "sm_90a")

    def no_compile(*a, **k):
        raise AssertionError("compiled in the parent: the workers' binary was not found")
    jf, sig, cx, spec, arch, nw, ns = job
    kb = specialize.get_binary(jf, sig, cx, spec, arch=arch, num_warps=nw, num_stages=ns,
                               compile_fn=no_compile)
    assert kb.cubin


def _segv(t):
    if t == "segv":
        os.kill(os.getpid(), 11)
    if t == "hang":
        import time
        time.sleep(60)
    return t * 2


def test_worker_crashes_hangs_and_the_deadline():
    import time
    res = workers.start(["a", "segv", "b", "hang", "c"], _segv, max_workers=2,
                        job_timeout=3.0).results()
    assert res[0] == ("ok", "aa") and res[2] == ("ok", "bb") and res[4] == ("ok", "cc")
    assert res[1][0] == "crashed" and "signal 11" in res[1][1]
    assert res[3][0] == "crashed" and "more than 3 s" in res[3][1]
    late = workers.start(["x", "y", "z"], _segv, max_workers=1,
                         deadline=time.monotonic() - 1).results()
    assert late[0] == ("ok", "xx")                    # the first job always runs
    assert [r[0] for r in late[1:]] == ["skipped", "skipped"]


@dt.kernel
def wide_softmax(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        r = x[t, :]
        e = torch.exp(r - r.amax(dim=1, keepdim=True))
        out[t, :] = e / e.sum(dim=1, keepdim=True)
    return out


def test_space_leaves_out_register_hungry_configs():
    sp = Space(wide_softmax.trace(torch.empty(1000, 4096)))
    every = {(b, w) for b in sp.block_choices[0] for w in sp.warps}
    ok = {(b, w) for b, w in every if sp.valid(dt.Config([b], w))}
    # at most 32 elements per thread (16 at 16 warps): 1 row on 4+ warps, 2 rows on 8+
    assert ok == {(1, 4), (1, 8), (1, 16), (2, 8), (2, 16)}
    assert sp.default() in {dt.Config([b], w) for b, w in ok}
    huge = Space(wide_softmax.trace(torch.empty(4, 65536)))   # nothing meets the bound
    assert huge.valid(huge.default()) and huge.default().num_warps >= 8
    sp.note_spill(dt.Config([1], 8))                # ptxas said so: drop the hungrier ones
    assert not sp.valid(dt.Config([1], 4)) and not sp.valid(dt.Config([2], 8))
    assert sp.valid(dt.Config([1], 16))


def test_matmul_space_bounds_accumulators_per_thread():
    x = torch.randn(1024, 1024, dtype=torch.float16)
    sp = Space(matmul.trace(x, x, torch.empty(1024, 1024, dtype=torch.float16)))
    assert not sp.valid(dt.Config([256, 256, 32], 8, 2))       # 256 accumulators per thread
    assert sp.valid(dt.Config([256, 128, 32], 8, 3))
    assert not sp.valid(dt.Config([256, 128, 32], 4, 3))


def test_tuning_compiles_in_workers_and_skips_spilling_configs(monkeypatch, newt_cache):
    """tune() on the interpreter with arch given: every candidate is compiled in a forked worker
    first (a stand-in compile here, so no NVRTC time); a candidate whose report shows spills is
    never run, unless every candidate spills."""
    from deuteron.autotune import bench
    x = torch.randn(9, 40)
    cands = [dt.Config([2, 16], 1), dt.Config([4, 32], 1), dt.Config([1, 8], 1)]
    spilling = {cands[1]}
    compiled = []

    def fake_compile(job):
        jf, sig, cx, spec, arch, nw, ns = job
        blocks = [v for k, v in cx.items() if k.startswith("BLOCK_SIZE")]
        cfg = next(c for c in cands if list(c.block_sizes) == blocks)
        return {"n_regs": 40, "n_spills": 8 if cfg in spilling else 0,
                "local_bytes": 32 if cfg in spilling else 0, "shared_bytes": 0,
                "pid": os.getpid()}
    monkeypatch.setattr(workers, "compile_job", fake_compile)
    ran = []
    real_run = rowsum_exp.run

    def run(args, kwargs, config, record=None, poison=False):
        ran.append(config)
        return real_run(args, kwargs, config, record, poison)
    monkeypatch.setattr(rowsum_exp, "run", run)
    rowsum_exp.configs = cands
    try:
        times = {cands[0]: 2.0, cands[2]: 1.0}
        cfg, summary = bench.tune(rowsum_exp, (x,), {}, "quick", progress=False, arch="sm_90a",
                                  timer=lambda fn: times[ran[-1]])
        assert cfg == cands[2] and cands[1] not in ran
        assert rowsum_exp.last_results[cands[1]].status == "spills"
        assert "1 not run (register spills)" in summary and "s compiling" in summary
        spilling.update(cands)                     # all spill: they run after all
        cfg2, summary2 = bench.tune(rowsum_exp, (x,), {}, "quick", progress=False,
                                    arch="sm_90a", timer=lambda fn: 1.0)
        assert cfg2 in cands and set(ran) >= set(cands)
    finally:
        rowsum_exp.configs = None


def test_candidates_run_on_clones_with_the_users_strides():
    from deuteron.autotune.bench import _clone
    x = torch.randn(10, 21)[:, ::2]                # a view with gaps: clone() would compact it
    c = _clone(x)
    assert c.stride() == x.stride() and torch.equal(c, x) and c.data_ptr() != x.data_ptr()
    e = torch.randn(3, 1).expand(3, 5)             # overlapping: a plain copy
    assert torch.equal(_clone(e), e)


def test_fp64_rows_count_two_registers_per_element():
    sp32 = Space(wide_softmax.trace(torch.empty(100, 2048)))
    sp64 = Space(wide_softmax.trace(torch.empty(100, 2048, dtype=torch.float64)))
    assert sp32.valid(dt.Config([1], 2)) and not sp64.valid(dt.Config([1], 2))   # 32 per thread
    assert sp64.valid(dt.Config([1], 4))


def test_first_batch_compiles_while_the_oracle_runs(monkeypatch, newt_cache):
    from deuteron.autotune import bench
    order = []
    real_start = workers.start
    monkeypatch.setattr(workers, "start", lambda *a, **k: (order.append("compiles started"),
                                                           real_start(*a, **k))[1])
    monkeypatch.setattr(workers, "compile_job", lambda job: {"n_regs": 32, "n_spills": 0,
                                                             "local_bytes": 0})
    k = dt.kernel(configs=[dt.Config([16], 1), dt.Config([64], 2)])(wide_softmax.fn)
    real_ref = k.ref
    monkeypatch.setattr(k, "ref", lambda *a, **kw: (order.append("oracle"), real_ref(*a, **kw))[1])
    x = torch.randn(5, 33)
    cfg, _ = bench.tune(k, (x,), {}, "quick", progress=False, arch="sm_80", timer=lambda fn: 1.0)
    assert order[:2] == ["compiles started", "oracle"] and cfg in k.configs


@dt.kernel
def shape_dependent(x):
    """Host code picks a different tiling inside one shape bucket (40 and 60 both bucket to 64)."""
    out = torch.empty_like(x)
    if x.shape[1] > 50:
        for tm, tn in dt.tile([x.shape[0], x.shape[1]]):
            out[tm, tn] = x[tm, tn] + 1.0
    else:
        for tm in dt.tile(x.shape[0]):
            out[tm, :] = x[tm, :] + 1.0
    return out


def test_host_code_paths_in_one_shape_bucket_have_their_own_configs():
    a, b = torch.randn(9, 60), torch.randn(9, 40)
    ka, kb = shape_dependent.cache_key((a,)), shape_dependent.cache_key((b,))
    assert ka["args"] == kb["args"] and ka != kb and (ka["tunable"], kb["tunable"]) == (2, 1)
    for first, second in ((a, b), (b, a)):
        shape_dependent._chosen.clear()
        shape_dependent._plans.clear()
        torch.testing.assert_close(shape_dependent(first), first + 1)
        torch.testing.assert_close(shape_dependent(second), second + 1)
