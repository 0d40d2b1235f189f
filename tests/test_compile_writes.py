"""Which tensors a launch inside torch.compile declares mutated (newt/ir/writes.py,
newt/launch_writes.py, newt/torch_ops.py): only those the kernel may write. A launch that reads
the compiled function's inputs and writes tensors allocated inside it mutates no graph input,
so inductor keeps CUDA graphs under mode="reduce-overhead"; one that writes an input mutates
it as torch does for any custom op. CPU: the IR analysis, and the graph inductor gets (its
"mutated inputs" are the placeholders written there); GPU: no "skipping cudagraphs" under
reduce-overhead, and the right results."""
import pytest
import torch

import deuteron as dt
import newt
import newt.language as nl
from newt.frontend import build_ir
from newt.ir.writes import written_params
from newt.launch_writes import written_tensors

HAS_CUDA = torch.cuda.is_available()


@newt.jit
def bias_gelu(x_ptr, b_ptr, out_ptr, n, cols, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask) + nl.load(b_ptr + offs % cols, mask=mask)
    nl.store(out_ptr + offs, x * nl.sigmoid(1.702 * x), mask=mask)


@newt.jit
def carried(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, f_ptr, n, BLOCK: nl.constexpr):
    """c and d swap inside the loop, so both are written; e is written after a while loop
    that carries it; b only by an atomic; f's address goes through an int and back."""
    pa = a_ptr + nl.arange(0, BLOCK)
    pc = c_ptr + nl.arange(0, BLOCK)
    pd = d_ptr + nl.arange(0, BLOCK)
    for i in range(0, n):
        nl.store(pc, nl.load(pa))
        pa += BLOCK
        pc, pd = pd + BLOCK, pc
    pe = e_ptr
    k = 0
    while k < n:
        pe += 1
        k += 1
    nl.store(pe + nl.arange(0, BLOCK), nl.load(pa))
    nl.atomic_add(b_ptr + nl.arange(0, BLOCK), 1.0)
    addr = f_ptr.to(nl.int64) + 4
    nl.store(addr.to(nl.pointer_type(nl.float32)), 1.0)


@newt.jit
def chosen(x_ptr, y_ptr, out_ptr, n, ALT: nl.constexpr, BLOCK: nl.constexpr):
    """Which of two pointers is written depends on a constexpr and on a runtime branch."""
    offs = nl.arange(0, BLOCK)
    v = nl.load(x_ptr + offs)
    if ALT:
        nl.store(y_ptr + offs, v)
    if n > 3:
        p = out_ptr
    else:
        p = x_ptr
    nl.store(p + offs, v)


def test_written_params_through_loops_atomics_and_casts():
    sig = {n: "*fp32" for n in ("a_ptr", "b_ptr", "c_ptr", "d_ptr", "e_ptr", "f_ptr")}
    fn = build_ir(carried, {**sig, "n": "i32"}, {"BLOCK": 32})
    assert written_params(fn) == {"b_ptr", "c_ptr", "d_ptr", "e_ptr", "f_ptr"}


@pytest.mark.parametrize("alt", [False, True])
def test_written_params_follow_constexprs_and_both_branches(alt):
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16", "n": "i32"}
    fn = build_ir(chosen, sig, {"ALT": alt, "BLOCK": 16})
    assert written_params(fn) == {"x_ptr", "out_ptr"} | ({"y_ptr"} if alt else set())


def test_written_tensors_fall_back_to_every_tensor():
    layout = (("x_ptr", "t", 0), ("b_ptr", "t", 1), ("out_ptr", "t", 2), ("n", "i", 0),
              ("cols", "i", 1))
    dtypes = (torch.float32,) * 3
    assert written_tensors(bias_gelu, layout, {"BLOCK": 64}, dtypes) == (2,)
    # no BLOCK: the IR cannot be built, so every tensor counts as written
    assert written_tensors(bias_gelu, layout, {}, dtypes) == (0, 1, 2)


# the same kernel under an autotuner and under @heuristics: a launch through either declares
# what the kernel writes
tuned_bias_gelu = newt.autotune(configs=[newt.Config({"BLOCK": 16}), newt.Config({"BLOCK": 64})],
                                key=["n"])(newt.jit(bias_gelu.fn))
heuristic_bias_gelu = newt.heuristics({"BLOCK": lambda a: 32})(newt.jit(bias_gelu.fn))


def _grid(meta):
    return (newt.cdiv(meta["n"], meta["BLOCK"]),)


def _step(x, w, b):
    """A model step: the kernel reads a matmul's result and the input `b`, writes a new
    tensor (poisoned with NaN, so an unwritten element shows)."""
    h = x @ w
    out = torch.full_like(h, float("nan"))
    bias_gelu[(newt.cdiv(h.numel(), 64),)](h, b, out, h.numel(), h.shape[1], BLOCK=64)
    return out.sum(dim=1) + x[:, 0]


def _tuned_step(x, w, b):
    h = x @ w
    out = torch.full_like(h, float("nan"))
    tuned_bias_gelu[_grid](h, b, out, h.numel(), h.shape[1])
    return out * 2.0


def _heuristic_step(x, w, b):
    h = x @ w
    out = torch.full_like(h, float("nan"))
    heuristic_bias_gelu[_grid](h, b, out, h.numel(), h.shape[1])
    return out * 2.0


def _gelu(z):
    return z * torch.sigmoid(1.702 * z)


def _want(fn, x, w, b):
    z = _gelu(x @ w + b)
    return z.sum(dim=1) + x[:, 0] if fn is _step else z * 2.0


def _inputs(device="cpu"):
    return (torch.randn(13, 9, device=device), torch.randn(9, 21, device=device) / 3,
            torch.randn(21, device=device))


def mutated_inputs(graph) -> set:
    """Names of the placeholders of a post-grad graph that some node writes: a copy_ into
    one, a functionalized op's base, or an argument its schema marks written. Inductor counts
    these as mutated inputs, and skips CUDA graphs for them."""
    inputs = {n for n in graph.nodes if n.op == "placeholder"}
    out = set()

    def note(v):
        for a in v if isinstance(v, (list, tuple)) else [v]:
            if a in inputs:
                out.add(a.name)

    for n in graph.nodes:
        if n.op != "call_function":
            continue
        note(n.kwargs.get("_all_bases", []))
        schema = getattr(n.target, "_schema", None)
        if schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                note(n.args[i] if i < len(n.args) else n.kwargs.get(arg.name))
    return out


def compiled_once(fn, *args):
    """fn compiled by inductor (fullgraph) and called once: (its result, the post-grad graphs
    inductor was handed, the number of graph breaks)."""
    from torch._dynamo.utils import counters
    graphs = []
    torch._dynamo.reset()
    counters.clear()
    with torch._inductor.config.patch(post_grad_custom_post_pass=graphs.append):
        got = torch.compile(fn, fullgraph=True, backend="inductor")(*args)
    assert graphs
    return got, graphs, sum(counters["graph_break"].values())


@pytest.fixture
def interp(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)


@pytest.mark.parametrize("fn", [_step, _tuned_step])
def test_launch_reading_inputs_mutates_none(interp, fn):
    x, w, b = _inputs()
    b_before = b.clone()
    got, graphs, breaks = compiled_once(fn, x, w, b)
    torch.testing.assert_close(got, _want(fn, x, w, b))
    torch.testing.assert_close(b, b_before)
    assert all(not mutated_inputs(g) for g in graphs)
    assert breaks == 0


def test_heuristics_launch_declares_every_tensor_written(interp):
    # its value comes from the arguments at run time: every tensor stays declared mutated
    x, w, b = _inputs()
    got, graphs, breaks = compiled_once(_heuristic_step, x, w, b)
    torch.testing.assert_close(got, _want(_heuristic_step, x, w, b))
    assert set().union(*(mutated_inputs(g) for g in graphs))
    assert breaks == 0


def test_launch_writing_an_input_mutates_it(interp):
    def f(x, b):
        bias_gelu[(newt.cdiv(x.numel(), 32),)](x, b, x, x.numel(), x.shape[1], BLOCK=32)
        return x.sum(dim=0)

    x, b = torch.randn(7, 11), torch.randn(11)
    want = _gelu(x + b)
    got, graphs, breaks = compiled_once(f, x, b)
    torch.testing.assert_close(got, want.sum(dim=0))
    torch.testing.assert_close(x, want)    # the input itself was written
    written = set().union(*(mutated_inputs(g) for g in graphs))
    assert len(written) == 1               # x, not b
    assert breaks == 0


def _cudagraph_skips(fn, args, want):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):     # warm-up, record, replay
        torch.testing.assert_close(compiled(*args), want, rtol=1e-4, atol=1e-4)
    assert sum(counters["graph_break"].values()) == 0
    return counters["inductor"]["cudagraph_skips"]


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("fn", [_step, _tuned_step])
def test_reduce_overhead_keeps_cuda_graphs_on_the_gpu(fn):
    x, w, b = _inputs("cuda")
    assert _cudagraph_skips(fn, (x, w, b), _want(fn, x, w, b)) == 0
    x2, w2, b2 = _inputs("cuda")      # new data in the same buffers: the replay reads it
    x.copy_(x2), w.copy_(w2), b.copy_(b2)
    compiled = torch.compile(fn, fullgraph=True, mode="reduce-overhead")
    torch.testing.assert_close(compiled(x, w, b), _want(fn, x, w, b), rtol=1e-4, atol=1e-4)


@dt.kernel
def row_rms(x):
    out = torch.empty_like(x)
    for tm in dt.tile(x.shape[0]):
        row = x[tm, :].to(dt.float32)
        out[tm, :] = (row * torch.rsqrt((row * row).mean(dim=1, keepdim=True) + 1e-6)).to(x.dtype)
    return out


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_reduce_overhead_keeps_cuda_graphs_with_newt_and_deuteron():
    def f(x, w, b):
        h = x @ w
        out = torch.full_like(h, float("nan"))
        bias_gelu[(newt.cdiv(h.numel(), 64),)](h, b, out, h.numel(), h.shape[1], BLOCK=64)
        return row_rms(out) + 1.0

    x, w, b = _inputs("cuda")
    z = _gelu(x @ w + b)
    want = z * torch.rsqrt((z * z).mean(dim=1, keepdim=True) + 1e-6) + 1.0
    assert _cudagraph_skips(f, (x, w, b), want) == 0


# ---- deuteron: a kernel that stores into its arguments declares only those mutated ----------

@dt.kernel
def add_into(x, y):
    for t in dt.tile(x.shape[0]):
        x[t] = x[t] + y[t]
    return x


@dt.kernel
def scale_through_a_view(x, alpha: float):
    flat = x.view(-1)
    for t in dt.tile(flat.shape[0]):
        flat[t] = flat[t] * alpha
    return x


def _src_params(src: str):
    """written_params of a function defined from source text (as a kernel's file would)."""
    import linecache
    import deuteron.arg_writes as aw
    name = f"<written-params-{abs(hash(src))}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {}
    exec(compile(src, name, "exec"), ns)
    return aw.written_params(ns["k"])


@pytest.mark.parametrize("src,want", [
    ("def k(x, out):\n    for t in tile(x.shape[0]):\n        out[t] = x[t]\n", {"out"}),
    ("def k(x, y):\n    v = x.view(-1)\n    w = v[1:]\n    w[0] = y[0]\n", {"x"}),
    ("def k(x, y):\n    out = torch.empty_like(x)\n    out[0] = y[0]\n    return out\n", set()),
    ("def k(x, y):\n    a, b = y, x.T\n    b.copy_(a)\n", {"x"}),
    ("def k(x, y):\n    torch.add(x, 1, out=y)\n", {"y"}),
    ("def k(x, y):\n    row = x[0]\n    row += 1\n    y += row\n", {"y"}),
])
def test_deuteron_written_params(src, want):
    assert _src_params(src) == want


def test_deuteron_in_place_call_into_a_new_buffer_mutates_no_input(monkeypatch, tmp_path):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))

    def f(x, y):
        buf = x * 2.0
        add_into(buf, y)
        return buf + 1.0

    x, y = torch.randn(37), torch.randn(37)
    y_before = y.clone()
    got, graphs, breaks = compiled_once(f, x, y)
    torch.testing.assert_close(got, x * 2.0 + y + 1.0)
    torch.testing.assert_close(y, y_before)
    assert all(not mutated_inputs(g) for g in graphs)
    assert breaks == 0


def test_deuteron_in_place_call_on_an_input_mutates_it(monkeypatch, tmp_path):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))

    def f(x, y):
        scale_through_a_view(x, -0.5)
        return add_into(y, x) * 3.0

    x, y = torch.randn(5, 7), torch.randn(5, 7)
    want_x = x * -0.5
    want_y = y + want_x
    got, graphs, breaks = compiled_once(f, x, y)
    torch.testing.assert_close(got, want_y * 3.0)
    torch.testing.assert_close(x, want_x)
    torch.testing.assert_close(y, want_y)
    assert len(set().union(*(mutated_inputs(g) for g in graphs))) == 2
    assert breaks == 0


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_reduce_overhead_keeps_cuda_graphs_with_an_in_place_deuteron_call():
    def f(x, y):
        buf = torch.tanh(x)
        add_into(buf, y)
        return buf * 2.0

    x, y = torch.randn(1001, device="cuda"), torch.randn(1001, device="cuda")
    assert _cudagraph_skips(f, (x, y), (torch.tanh(x) + y) * 2.0) == 0
