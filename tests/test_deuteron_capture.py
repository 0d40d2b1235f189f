"""deuteron kernels and CUDA graph capture (deuteron/capture.py): a call that would autotune
inside a capture stops with an error saying to warm the kernel up, before any GPU work, and the
process (and the capture) stay usable; a warmed kernel, or one with a pinned config, captures and
replays with new data in the same buffers."""
import importlib

import pytest
import torch

import deuteron as dt
from deuteron import capture

HAS_CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def _axpy_kernel(**options):
    """A new kernel object each time: nothing tuned or planned in this process."""
    def axpy(x, y):
        out = torch.empty_like(x)
        for t in dt.tile(x.shape[0]):
            out[t] = x[t] * 2.0 + y[t]
        return out
    return dt.kernel(axpy, **options)


def test_refusal_names_the_kernel_and_says_warm_up(monkeypatch):
    """A call that would tune while a capture runs is refused with the kernel's name; CPU
    tensors never count as captured (the interpreter never captures)."""
    dk = importlib.import_module("deuteron.kernel")   # the package's `kernel` is the decorator
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    k = _axpy_kernel()
    with pytest.raises(capture.CaptureError, match="axpy.*Warm it up first"):
        capture.refuse_tuning_in_capture(k)
    assert not dk.capturing((torch.randn(3),), {})


@cuda_only
def test_first_call_inside_a_capture_is_refused_and_nothing_breaks():
    k = _axpy_kernel(autotune_effort="quick")
    x = torch.randn(1000, device="cuda")
    y = torch.randn(1000, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(capture.CaptureError, match="Warm it up first"):
        with torch.cuda.graph(g):
            k(x, y)
    # the process still works: an eager call tunes, then a capture of it replays correctly
    torch.testing.assert_close(k(x, y), x * 2.0 + y)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = k(x, y)
    x.copy_(torch.randn_like(x))
    y.copy_(torch.randn_like(y))
    out.fill_(float("nan"))
    g.replay()
    torch.testing.assert_close(out, x * 2.0 + y)


@cuda_only
def test_pinned_config_first_call_inside_a_capture():
    k = _axpy_kernel(config=dt.Config(block_sizes=[128]))
    x = torch.randn(777, device="cuda")
    y = torch.randn(777, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = k(x, y)
    out.fill_(float("nan"))
    g.replay()
    torch.testing.assert_close(out, x * 2.0 + y)
