"""The deuteron examples check themselves against torch (on the interpreter without a GPU)."""
import importlib.util
import os

import pytest
import torch

import newt.options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"dt_example_{name}",
                                                  os.path.join(ROOT, "examples", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["dt_matmul", "dt_softmax", "dt_layernorm", "dt_attention"])
def test_example_main(name, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(newt.options.flags, "interpret", not torch.cuda.is_available())
    _load(name).main(["--small"])
    out = capsys.readouterr().out
    assert "matches torch" in out and "@newt.jit" in out and "nl.constexpr" in out
    if not torch.cuda.is_available():
        assert out.startswith("note: no CUDA device: running on the CPU interpreter")


def test_example_check_catches_a_wrong_kernel(monkeypatch, tmp_path):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(newt.options.flags, "interpret", not torch.cuda.is_available())
    mod = _load("dt_softmax")
    monkeypatch.setattr(mod, "softmax", lambda x: torch.softmax(x, dim=0))
    with pytest.raises(AssertionError):
        mod.check("cuda" if torch.cuda.is_available() else "cpu", small=True)


def test_dt_matmul_pinned_to_another_group_size(monkeypatch, tmp_path):
    """dt_matmul's bench times the tuned config with group_size 8 by pinning it
    (dt.kernel(config=...)): that call computes the product, odd shape, poisoned output."""
    import dataclasses
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    mod = _load("dt_matmul")
    x, y = torch.randn(37, 45), torch.randn(45, 29)
    out = torch.full((37, 29), float("nan"))
    cfg = mod.matmul.config_for((x, y, out))
    go = mod._pinned(dataclasses.replace(cfg, group_size=2), (x, y, out))
    out.fill_(float("nan"))
    go()
    torch.testing.assert_close(out, x @ y, rtol=1e-4, atol=1e-4)


def test_dt_matmul_bench_table_on_the_interpreter(monkeypatch, capsys, tmp_path):
    """dt_matmul's --bench table, run small on the interpreter with a stand-in timer that
    runs each call: every provider (deuteron, its pinned group_size-8 twin, torch, the hand-written
    sweep) is called in the interleaved rounds and the row prints its columns."""
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "newt"))
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    mod = _load("dt_matmul")
    calls = []

    def timer(fn):
        fn()
        calls.append(fn)
        return 1.0 + 0.01 * len(calls)
    cfg = mod.dt.Config(block_sizes=(32, 32, 16), num_warps=4, num_stages=3, group_size=4)
    monkeypatch.setattr(mod.matmul, "autotune", lambda *a, **k: cfg)
    mod.bench(sizes=(48,), device="cpu", timer=timer)
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("48 ")]
    assert len(row) == 1 and "group_size=4" in row[0] and " - " not in row[0], row
    # deuteron, its pinned g8 twin, torch and the six hand-written configs, three rounds each
    assert len(calls) == 3 * (3 + 6)
