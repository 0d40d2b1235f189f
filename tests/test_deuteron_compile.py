"""deuteron kernels inside torch.compile: a call traces as the deuteron::call custom op
(deuteron/torch_ops.py), fullgraph with no graph break; on the CPU interpreter and on the GPU
(inductor, mode="reduce-overhead")."""
import pytest
import torch

import deuteron as dt

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def scaled_sum(x, y, alpha: float):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] * alpha + y[t]
    return out


@dt.kernel
def row_stats(x):
    m = torch.empty([x.shape[0]], dtype=torch.float32, device=x.device)
    s = torch.empty([x.shape[0]], dtype=torch.float32, device=x.device)
    for tm in dt.tile(x.shape[0]):
        row = x[tm, :].to(dt.float32)
        m[tm] = row.amax(dim=1)
        s[tm] = row.sum(dim=1)
    return m, s


@dt.kernel
def add_into(x, y):
    for t in dt.tile(x.shape[0]):
        x[t] = x[t] + y[t]
    return x


def step(x, y):
    h = scaled_sum(torch.tanh(x), y, 0.25)
    m, s = row_stats(h)
    return m * 2.0 + s.sin()


def reference(x, y):
    h = torch.tanh(x) * 0.25 + y
    return h.amax(dim=1) * 2.0 + h.sum(dim=1).sin()


def compile_and_count(fn, backend, **kwargs):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    return torch.compile(fn, fullgraph=True, backend=backend, **kwargs), counters


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])   # inductor: CPU-tested in test_torch_compile.py
def test_calls_compile_fullgraph_on_the_interpreter(backend):
    compiled, counters = compile_and_count(step, backend)
    for rows in (11, 5):
        x, y = torch.randn(rows, 7), torch.randn(rows, 7)
        torch.testing.assert_close(compiled(x, y), reference(x, y))
    assert sum(counters["graph_break"].values()) == 0


def test_in_place_kernel_returns_its_argument():
    def f(x, y):
        z = add_into(x, y)
        return z * 2.0

    x, y = torch.randn(19), torch.randn(19)
    want_x = x + y
    compiled, counters = compile_and_count(f, "aot_eager")
    got = compiled(x, y)
    torch.testing.assert_close(got, want_x * 2.0)
    torch.testing.assert_close(x, want_x)
    assert sum(counters["graph_break"].values()) == 0


def test_two_calls_are_two_ops():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled, _ = compile_and_count(step, backend)
    x, y = torch.randn(6, 3), torch.randn(6, 3)
    torch.testing.assert_close(compiled(x, y), reference(x, y))
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert sum(t in (torch.ops.deuteron.call, torch.ops.deuteron.call.default)
               for t in targets) == 2


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_calls_compile_under_inductor_on_the_gpu(mode):
    compiled, counters = compile_and_count(step, "inductor", mode=mode)
    for _ in range(3):
        x = torch.randn(129, 65, device="cuda")
        y = torch.randn(129, 65, device="cuda")
        torch.testing.assert_close(compiled(x, y), reference(x, y), rtol=1e-4, atol=1e-4)
    assert sum(counters["graph_break"].values()) == 0


@dt.kernel
def to_dtype(x, dtype, scale: float = 2.0):
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    for t in dt.tile(x.shape[0]):
        out[t] = (x[t] * scale).to(dtype)
    return out


def test_dtype_argument_and_keyword():
    def f(x):
        return to_dtype(x, torch.float16, scale=3.0).float() + 1.0

    x = torch.randn(37)
    compiled, counters = compile_and_count(f, "aot_eager")
    torch.testing.assert_close(compiled(x), (x * 3.0).half().float() + 1.0)
    assert sum(counters["graph_break"].values()) == 0
