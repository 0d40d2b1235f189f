"""Shared fixtures. Op tests run on every target through `target`: "interp" (the CPU
interpreter, always) and "cuda" (skipped when there is no CUDA device)."""
import sys

import pytest
import torch

import newt.options

HAS_CUDA = torch.cuda.is_available()


def pytest_terminal_summary(terminalreporter):
    """The differential fuzzer's seed (tests/test_fuzz.py), so any failure can be replayed;
    printed at the end, where -q still shows it."""
    fuzz = sys.modules.get("fuzz")     # imported only when fuzz tests were collected
    if fuzz is None:
        return
    terminalreporter.write_line(f"newt fuzz seed: {fuzz.run_seed()} (NEWT_FUZZ_SEED=<int> replays "
                                "it; NEWT_FUZZ_SEED=random draws a fresh one)")


@pytest.fixture(params=["interp", "cuda"])
def target(request):
    if request.param == "cuda" and not HAS_CUDA:
        pytest.skip("no CUDA device")
    old = newt.options.flags.interpret
    newt.options.flags.interpret = request.param == "interp"
    yield request.param
    newt.options.flags.interpret = old


@pytest.fixture
def device(target):
    """The torch device for tensors of the current target."""
    return "cpu" if target == "interp" else "cuda"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """An empty newt disk cache for one test."""
    d = tmp_path / "newt-cache"
    monkeypatch.setenv("NEWT_CACHE_DIR", str(d))
    return d
