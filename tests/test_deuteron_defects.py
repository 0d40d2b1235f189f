"""Regression tests of four deuteron defects, on the newt interpreter (one GPU test skips itself
without CUDA): a callable argument's replay plan keyed on its id(), `torch.sigmoid(x @ w)`
crashing in the lowering, the oracle's block_size=1 tile lacking the tile attributes, and a first
call inside a CUDA graph capture; and the replay plan holding the tensors of the call it
recorded (reduce-overhead mode saw them leak). Fresh random data, NaN-poisoned outputs, odd sizes."""
import gc
import importlib

import pytest
import torch

import deuteron as dt

dk = importlib.import_module("deuteron.kernel")    # (the package's `kernel` is the decorator)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def scale_by(x, out, epilogue):
    for t in dt.tile(x.shape[0]):
        out[t] = epilogue(x[t])
    return out


def _make(c):
    return lambda v: v * c + 1.0


def test_plan_follows_the_closure_values_not_the_id():
    """Lambdas made one after another (CPython often reuses a freed one's address) must each
    run their own body: the plan keys on code object and closure values."""
    x = torch.randn(301)
    for c in (2.0, -3.0, 0.5, 7.0, -1.25):
        out = torch.full((301,), float("nan"))
        f = _make(c)
        scale_by(x, out, f)
        torch.testing.assert_close(out, x * c + 1.0)
        del f
        gc.collect()


def test_plan_follows_a_swapped_code_object():
    """Same function object (same id), new code: the plan must not replay the old trace."""
    x = torch.randn(77)

    def f(v):
        return v + 2.0
    out = torch.full((77,), float("nan"))
    scale_by(x, out, f)
    torch.testing.assert_close(out, x + 2.0)
    f.__code__ = (lambda v: v * 3.0).__code__
    out.fill_(float("nan"))
    scale_by(x, out, f)
    torch.testing.assert_close(out, x * 3.0)


def test_same_code_and_closure_values_reuse_the_plan():
    x = torch.randn(45)
    out = torch.full((45,), float("nan"))
    scale_by(x, out, _make(2.5))
    n = len(scale_by._plans)
    out.fill_(float("nan"))
    scale_by(x, out, _make(2.5))
    torch.testing.assert_close(out, x * 2.5 + 1.0)
    assert len(scale_by._plans) == n


@dt.kernel
def sigmoid_mm(x, w):
    out = torch.empty(x.shape[0], w.shape[1])
    for tm, tn in dt.tile([x.shape[0], w.shape[1]]):
        out[tm, tn] = torch.sigmoid(x[tm, :] @ w[:, tn])
    return out


def test_sigmoid_of_a_matmul_compiles():
    x, w = torch.randn(33, 20), torch.randn(20, 17)
    torch.testing.assert_close(sigmoid_mm(x, w), torch.sigmoid(x @ w), rtol=1e-4, atol=1e-4)


@dt.kernel
def row_offsets(x):
    out = torch.empty(x.shape[0], x.shape[1])
    for tb, tn in dt.tile([x.shape[0], x.shape[1]], block_size=[1, None]):
        out[tb, tn] = x[tb, tn] + tb.begin * 10.0 + tb.index * 100.0 + tb.end * 1000.0
    return out


def test_index_tile_attributes_agree_between_tracer_and_oracle():
    x = torch.randn(5, 19)
    rows = torch.arange(5, dtype=torch.float32)[:, None]
    want = x + rows * 10 + rows * 100 + (rows + 1) * 1000
    torch.testing.assert_close(row_offsets.ref(x.clone()), want)
    torch.testing.assert_close(row_offsets(x), want)


@dt.kernel(autotune_effort="quick")
def add_one(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] + 1.0
    return out


def test_first_call_in_a_graph_capture_raises_then_works(monkeypatch):
    """A call that would autotune inside a capture raises before running anything; later
    calls (outside the capture) tune and run normally."""
    x = torch.randn(129)
    monkeypatch.setattr(dk, "capturing", lambda args, kwargs: True)
    with pytest.raises(RuntimeError, match="warm"):
        add_one(x)
    monkeypatch.setattr(dk, "capturing", lambda args, kwargs: False)
    torch.testing.assert_close(add_one(x), x + 1.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_graph_capture_on_the_gpu():
    @dt.kernel
    def add_two(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.shape[0]):
            out[t] = x[t] + 2.0
        return out
    x = torch.randn(1001, device="cuda")
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="warm"):
        with torch.cuda.graph(g):
            add_two(x)
    torch.testing.assert_close(add_two(x), x + 2.0)     # later launches still work
    out = add_two(x)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out = add_two(x)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + 2.0)


def test_partials_and_bound_methods_key_on_their_contents():
    import functools

    class Scale:
        def __init__(self, c):
            self.c = c

        def __call__(self, v):
            return v * self.c

        def apply(self, v):
            return v * self.c + 0.5

    x = torch.randn(53)
    for f, want in ((functools.partial(torch.mul, other=3.0), x * 3.0),
                    (functools.partial(torch.mul, other=-2.0), x * -2.0),
                    (Scale(4.0).apply, x * 4.0 + 0.5), (Scale(-1.0).apply, -x + 0.5),
                    (Scale(5.0), x * 5.0), (Scale(6.0), x * 6.0)):
        out = torch.full((53,), float("nan"))
        scale_by(x, out, f)
        torch.testing.assert_close(out, want)


# ---- the replay plan keeps no tensor of the call it recorded ----------------------------------

@dt.kernel
def doubled(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] * 2.0
    return out


def test_replay_plan_keeps_no_tensor_of_its_recording():
    """An output the kernel's host code allocated (and its input) die with their last user
    reference: the recorded launch holds none of them (under torch.compile's reduce-overhead
    mode, a kept output lives on in the CUDA graph's private pool, which cudagraph trees
    reject). The replay still binds the new call's tensors."""
    import weakref
    x = torch.randn(37)
    out = doubled(x)
    torch.testing.assert_close(out, x * 2.0)
    refs = [weakref.ref(out), weakref.ref(x)]
    del out, x
    gc.collect()
    assert [r() for r in refs] == [None, None]
    y = torch.randn(37)
    torch.testing.assert_close(doubled(y), y * 2.0)      # replayed with y's tensors
