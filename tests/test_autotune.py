"""@autotune and @heuristics: Triton semantics, timed with a fake bench on a stand-in GPU, and on
the interpreter (first config, untimed)."""
import pytest
import torch

import newt
import newt.language as nl

from runtime_fakes import fake_state
from test_runtime_launch import fake_lib_path, gpu  # noqa: F401  (fixtures)


def bench_by_threads(cu, times, log):
    """A do_bench stand-in: runs the call once, 'measures' by the block size it launched."""
    def bench(fn, warmup=25, rep=100):
        fn()
        threads = fake_state(cu).block[0]
        log.append(threads)
        return times[threads]
    return bench


def make(configs, key, cu, times, log, **kw):
    @newt.autotune(configs, key=key, do_bench=bench_by_threads(cu, times, log), **kw)
    @newt.jit
    def k(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
        pass
    return k


CONFIGS = [newt.Config({"BLOCK": 128}, num_warps=4), newt.Config({"BLOCK": 256}, num_warps=8),
           newt.Config({"BLOCK": 64}, num_warps=2)]


def test_picks_fastest_and_caches_per_key(gpu):
    cu, fc = gpu
    log = []
    k = make(CONFIGS, ["n"], cu, {128: 3.0, 256: 1.0, 64: 2.0}, log)
    x = torch.randn(100)
    k[lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)](x, x, 100)
    assert sorted(log) == [64, 128, 256]
    assert k.best_config.kwargs == {"BLOCK": 256} and k.best_config.num_warps == 8
    st = fake_state(cu)
    assert st.block == (256, 1, 1) and st.grid == (1, 1, 1)     # the real launch uses the winner
    k[lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)](x, x, 100)
    assert len(log) == 3                                          # cached: no new timing
    k[(1,)](x, x, 5000)                                           # new key value
    assert len(log) == 6
    k[(1,)](x.double(), x.double(), 5000)                         # dtypes are part of the key
    assert len(log) == 9
    assert set(k.cache) == {(100, "torch.float32", "torch.float32"),
                            (5000, "torch.float32", "torch.float32"),
                            (5000, "torch.float64", "torch.float64")}


def test_failing_config_is_skipped(gpu, monkeypatch):
    cu, fc = gpu
    big = newt.Config({"BLOCK": 32}, num_warps=1)
    log = []
    k = make(CONFIGS + [big], ["n"], cu, {128: 3.0, 256: 2.0, 64: 4.0, 32: 0.1}, log)
    real_compile = fc.__call__

    def compile_with_smem(fn, sig, cx=None, **kw):
        fc.shared_bytes = 10**6 if cx["BLOCK"] == 32 else 0      # more than any GPU has
        return real_compile(fn, sig, cx, **kw)
    import sys
    monkeypatch.setattr(sys.modules["newt.compiler"], "compile", compile_with_smem)
    x = torch.randn(8)
    k[(1,)](x, x, 8)
    assert k.best_config.kwargs == {"BLOCK": 256}


def test_reset_to_zero_and_restore_value(gpu):
    cu, fc = gpu
    log = []
    bump = lambda a: a["x_ptr"].add_(1)   # noqa: E731  stands in for a kernel updating x in place
    configs = [newt.Config({"BLOCK": 128}, num_warps=4, pre_hook=bump),
               newt.Config({"BLOCK": 256}, num_warps=8, pre_hook=bump)]
    k = make(configs, ["n"], cu, {128: 2.0, 256: 1.0}, log, reset_to_zero=["out_ptr"],
             restore_value=["x_ptr"])
    x, out = torch.randn(64), torch.randn(64)
    x0 = x.clone()
    k[(1,)](x, out, 64)
    assert len(log) == 2
    assert torch.equal(out, torch.zeros(64))        # zeroed before the real launch
    assert torch.equal(x, x0 + 1)                   # timing runs undone; the real run's hook kept


def test_prune_configs(gpu):
    cu, fc = gpu
    log = []
    early = lambda configs, named: [c for c in configs if c.kwargs["BLOCK"] <= named["n"]]  # noqa
    k = make(CONFIGS, ["n"], cu, {128: 3.0, 256: 1.0, 64: 2.0}, log,
             prune_configs_by={"early_config_prune": early})
    x = torch.randn(8)
    k[(1,)](x, x, 128)
    assert sorted(log) == [64, 128] and k.best_config.kwargs == {"BLOCK": 64}
    log.clear()
    model = lambda **kw: -kw["BLOCK"]                                    # noqa: E731
    k2 = make(CONFIGS, ["n"], cu, {128: 3.0, 256: 1.0, 64: 2.0}, log,
              prune_configs_by={"perf_model": model, "top_k": 2})
    k2[(1,)](x, x, 128)
    assert sorted(log) == [128, 256]


def test_conflicting_meta_parameter(gpu):
    cu, fc = gpu
    k = make(CONFIGS, ["n"], cu, {128: 3.0, 256: 1.0, 64: 2.0}, [])
    x = torch.randn(8)
    with pytest.raises(newt.LaunchError, match="BLOCK"):
        k[(1,)](x, x, 8, BLOCK=32)


def test_key_names_and_reset_names(gpu):
    """A key name that is not a parameter is skipped, as Triton skips it (the key is made of
    the others); a tensor to reset or restore must be a parameter."""
    cu, fc = gpu
    k = make(CONFIGS, ["n", "m_misspelled"], cu, {128: 3.0, 256: 1.0, 64: 2.0}, [])
    x, out = torch.randn(100), torch.full((100,), float("nan"))
    k[(1,)](x, out, 100)
    assert k.keys == ["n", "m_misspelled"] and len(k.cache) == 1
    with pytest.raises(ValueError, match="'m' is not a parameter"):
        @newt.autotune(CONFIGS, key=["n"], reset_to_zero=["m"])
        @newt.jit
        def k2(x_ptr, n, BLOCK: nl.constexpr):
            pass


def test_heuristics_under_autotune(gpu):
    cu, fc = gpu
    log = []

    @newt.autotune([newt.Config({"BLOCK": 64}, num_warps=2), newt.Config({"BLOCK": 128})],
                   key=["n"], do_bench=bench_by_threads(cu, {64: 1.0, 128: 2.0}, log),
                   compile_workers=0)
    @newt.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
    @newt.jit
    def k(x_ptr, n, BLOCK: nl.constexpr, EVEN: nl.constexpr):
        pass
    x = torch.randn(8)
    k[(1,)](x, 192)
    assert [c["constexprs"] for c in fc.calls] == [{"BLOCK": 64, "EVEN": True},
                                                  {"BLOCK": 128, "EVEN": False}]


def test_configs_compile_in_worker_processes(gpu, monkeypatch):
    """Each config compiles in a forked child into the disk cache; a child that crashes costs
    its config only."""
    from newt.runtime import precompile
    if not precompile.available():
        pytest.skip("no fork on this platform")
    import os
    import sys
    cu, fc = gpu
    real = fc.__call__

    def crashy(fn, sig, cx=None, **kw):
        if cx["BLOCK"] == 256:
            os._exit(11)                      # stands in for a compiler segfault
        return real(fn, sig, cx, **kw)
    monkeypatch.setattr(sys.modules["newt.compiler"], "compile", crashy)
    log = []
    k = make(CONFIGS, ["n"], cu, {128: 3.0, 256: 1.0, 64: 2.0}, log)
    x = torch.randn(8)
    k[(1,)](x, x, 8)
    assert fc.calls == []                     # nothing compiled in this process
    assert k.best_config.kwargs == {"BLOCK": 64}
    assert sorted(log) == [64, 128]           # the crashed config was never launched
    d = newt.runtime.cache.disk_cache()
    entries = [d.load(f[:-len(d.SUFFIX)]) for _, _, fs in os.walk(d.root) for f in fs]
    # the two compiled configs; the launch function's code (cache.python_code) and the kernels'
    # source / PTX (read by a handle's `.asm`) are not kernels
    assert len([kb for kb in entries if "python" not in kb.meta and "ptx" not in kb.meta]) == 2


@newt.jit
def _desc_double(xd, yd, BM: nl.constexpr, BN: nl.constexpr):
    r, c = nl.program_id(0) * BM, nl.program_id(1) * BN
    yd.store([r, c], xd.load([r, c]) * 2)


def test_precompile_sees_the_block_shapes_a_pre_hook_sets(gpu, monkeypatch):
    """Descriptors made with a placeholder block shape, set per config by the config's
    pre_hook (as Triton's TMA kernels do): each config compiles ahead for the shapes its
    hook sets, not for the placeholder."""
    from newt.runtime import precompile
    from newt.tools.tensor_descriptor import TensorDescriptor

    def hook(nargs):
        nargs["xd"].block_shape = [nargs["BM"], nargs["BN"]]
        nargs["yd"].block_shape = [nargs["BM"], nargs["BN"]]
    jobs = []

    class Stop(Exception):
        pass

    def capture(js, workers=None):
        jobs.extend(js)
        raise Stop
    monkeypatch.setattr(precompile, "available", lambda: True)
    monkeypatch.setattr(precompile, "compile_in_workers", capture)
    k = newt.autotune([newt.Config({"BM": 16, "BN": 32}, pre_hook=hook),
                       newt.Config({"BM": 8, "BN": 64}, num_warps=2, pre_hook=hook)],
                      key=[])(_desc_double)
    x = torch.randn(40, 70)
    xd, yd = TensorDescriptor.from_tensor(x, [1, 1]), TensorDescriptor.from_tensor(x, [1, 1])
    with pytest.raises(Stop):
        k[lambda m: (newt.cdiv(40, m["BM"]), newt.cdiv(70, m["BN"]))](xd, yd)
    assert [(j[1]["xd"], j[1]["yd"], j[5]) for j in jobs] == [
        ("tensordesc<fp32[16,32]>", "tensordesc<fp32[16,32]>", 4),
        ("tensordesc<fp32[8,64]>", "tensordesc<fp32[8,64]>", 2)]


@newt.jit
def _scale(x_ptr, out_ptr, n, BLOCK: nl.constexpr, FACTOR: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


def test_interpreter_uses_first_config(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)

    def no_bench(*a, **k):
        raise AssertionError("no timing under the interpreter")
    tuned = newt.autotune([newt.Config({"BLOCK": 32}), newt.Config({"BLOCK": 64})], key=["n"],
                          do_bench=no_bench)(newt.heuristics({"FACTOR": lambda a: 3.0})(_scale))
    x = torch.randn(77)
    out = torch.full((77,), float("nan"))
    tuned[lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)](x, out, 77)
    torch.testing.assert_close(out, x * 3.0)
    assert tuned.best_config.kwargs == {"BLOCK": 32}


def test_early_prune_sees_the_call_keywords(monkeypatch):
    """`early_config_prune(configs, named_args, **kwargs)` gets the launch's keyword arguments
    by name (as Triton calls it): a prune that reads one decides the config that runs."""
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    seen = []

    def prune(configs, named_args, **kwargs):
        seen.append((sorted(named_args), dict(kwargs)))
        big = kwargs["FACTOR"] > 2
        return [c for c in configs if (c.kwargs["BLOCK"] >= 64) == big]
    tuned = newt.autotune([newt.Config({"BLOCK": 32}), newt.Config({"BLOCK": 64})],
                          key=["n", "FACTOR"], prune_configs_by={"early_config_prune": prune})(_scale)
    x = torch.randn(91)
    for scale, block in ((3.0, 64), (0.5, 32)):
        out = torch.full((91,), float("nan"))
        tuned[lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)](x, out, n=91, FACTOR=scale)
        torch.testing.assert_close(out, x * scale)
        assert tuned.best_config.kwargs == {"BLOCK": block}
        names, kw = seen[-1]
        assert kw == {"n": 91, "FACTOR": scale} and {"x_ptr", "out_ptr", "n"} <= set(names)


def test_config_str():
    c = newt.Config({"BLOCK_M": 64}, num_warps=8, num_stages=2)
    assert str(c) == "BLOCK_M: 64, num_warps: 8, num_stages: 2"
    assert c.all_kwargs() == {"BLOCK_M": 64, "num_warps": 8, "num_stages": 2}


def test_winner_cached_on_disk(gpu):
    cu, fc = gpu
    log = []
    times = {128: 3.0, 256: 1.0, 64: 2.0}
    k = make(CONFIGS, ["n"], cu, times, log, cache_results=True)
    x = torch.randn(8)
    k[(1,)](x, x, 8)
    assert len(log) == 3 and k.best_config.kwargs == {"BLOCK": 256}
    k2 = make(CONFIGS, ["n"], cu, times, log, cache_results=True)   # "a later process"
    k2[(1,)](x, x, 8)
    assert len(log) == 3 and k2.best_config.kwargs == {"BLOCK": 256}


def test_disk_winner_is_keyed_by_compiler_and_version(gpu, monkeypatch):
    """A winner timed with other kernels (another compiler, another newt) is not reused."""
    from newt.runtime import cache
    cu, fc = gpu
    log = []
    times = {128: 3.0, 256: 1.0, 64: 2.0}
    x = torch.randn(8)
    monkeypatch.setattr(cache, "_compiler_id", "compiler-a")
    make(CONFIGS, ["n"], cu, times, log, cache_results=True)[(1,)](x, x, 8)
    make(CONFIGS, ["n"], cu, times, log, cache_results=True)[(1,)](x, x, 8)
    assert len(log) == 3                       # the second one read the disk
    monkeypatch.setattr(cache, "_compiler_id", "compiler-b")
    make(CONFIGS, ["n"], cu, times, log, cache_results=True)[(1,)](x, x, 8)
    assert len(log) == 6                       # benchmarked again
    monkeypatch.setattr(newt, "__version__", "0.0.0-other")
    make(CONFIGS, ["n"], cu, times, log, cache_results=True)[(1,)](x, x, 8)
    assert len(log) == 9
