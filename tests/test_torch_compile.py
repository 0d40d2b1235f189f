"""newt launches inside torch.compile: traced as the newt::launch custom op (newt/torch_ops.py),
fullgraph with no graph break, on the CPU interpreter (the eager, aot_eager and inductor
backends) and on the GPU (inductor, mode="reduce-overhead")."""
import pytest
import torch

import newt
import newt.language as nl

HAS_CUDA = torch.cuda.is_available()


@newt.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x * alpha + y, mask=mask)


def model_step(x, y):
    """torch ops around a newt launch whose grid is a callable, as a model would have them."""
    h = torch.relu(x) + 1.0
    out = torch.empty_like(h)
    n = h.numel()
    scale_add[lambda meta: (newt.cdiv(meta["n"], meta["BLOCK"]),)](h, y, out, n, 0.5, BLOCK=32)
    return out.sum(dim=0) * 2.0 + out.mean()


def reference(x, y):
    out = (torch.relu(x) + 1.0) * 0.5 + y
    return out.sum(dim=0) * 2.0 + out.mean()


def compile_and_count(fn, backend, **kwargs):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    return torch.compile(fn, fullgraph=True, backend=backend, **kwargs), counters


@pytest.fixture
def interp(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_launch_compiles_fullgraph_on_the_interpreter(interp, backend):
    compiled, counters = compile_and_count(model_step, backend)
    for rows in (7, 13):      # odd sizes; the second one may recompile with dynamic shapes
        x, y = torch.randn(rows, 5), torch.randn(rows, 5)
        torch.testing.assert_close(compiled(x, y), reference(x, y))
    assert sum(counters["graph_break"].values()) == 0


def test_launch_is_one_custom_op_in_the_graph(interp):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x, y = torch.randn(9, 3), torch.randn(9, 3)
    compiled, counters = compile_and_count(model_step, backend)
    torch.testing.assert_close(compiled(x, y), reference(x, y))
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert sum(t in (torch.ops.newt.launch, torch.ops.newt.launch.default) for t in targets) == 1


def test_same_tensor_twice_and_in_place(interp):
    def f(x):
        scale_add[(newt.cdiv(x.numel(), 16),)](x, x, x, x.numel(), 2.0, BLOCK=16)
        return x * 1.0

    x = torch.randn(37)
    compiled, counters = compile_and_count(f, "aot_eager")
    want = x * 3.0
    got = compiled(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x, want)   # the input itself was written
    assert sum(counters["graph_break"].values()) == 0


def test_run_entry_point(interp):
    def f(x, y):
        out = torch.full_like(x, float("nan"))
        scale_add.run(x, y, out, x.numel(), -1.5, BLOCK=64, grid=(newt.cdiv(x.numel(), 64),))
        return out

    x, y = torch.randn(101), torch.randn(101)
    compiled, counters = compile_and_count(f, "aot_eager")
    torch.testing.assert_close(compiled(x, y), x * -1.5 + y)
    assert sum(counters["graph_break"].values()) == 0


def test_autograd_function_around_a_launch(interp):
    class ScaleAdd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            out = torch.empty_like(x)
            scale_add[(newt.cdiv(x.numel(), 32),)](x, y, out, x.numel(), 3.0, BLOCK=32)
            return out

        @staticmethod
        def backward(ctx, g):
            return g * 3.0, g

    def f(x, y):
        return ScaleAdd.apply(x, y).square().sum()

    x = torch.randn(45, requires_grad=True)
    y = torch.randn(45, requires_grad=True)
    compiled, counters = compile_and_count(f, "aot_eager")
    compiled(x, y).backward()
    gx, gy = x.grad.clone(), y.grad.clone()
    x.grad = y.grad = None
    ((x * 3.0 + y).square().sum()).backward()
    torch.testing.assert_close(gx, x.grad)
    torch.testing.assert_close(gy, y.grad)
    assert sum(counters["graph_break"].values()) == 0


def test_unsupported_argument_names_it(interp):
    def f(x):
        scale_add[(1,)](x, x, x, x.numel(), "two", BLOCK=16)
        return x

    compiled, _ = compile_and_count(f, "eager")
    with pytest.raises(Exception, match="argument `alpha` is a str"):
        compiled(torch.randn(8))


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_launch_compiles_under_inductor_on_the_gpu(mode):
    compiled, counters = compile_and_count(model_step, "inductor", mode=mode)
    for _ in range(3):   # reduce-overhead: warm-up, record, replay
        x = torch.randn(257, 33, device="cuda")
        y = torch.randn(257, 33, device="cuda")
        torch.testing.assert_close(compiled(x, y), reference(x, y))
    assert sum(counters["graph_break"].values()) == 0


@newt.autotune(configs=[newt.Config({"BLOCK": 16}), newt.Config({"BLOCK": 64})], key=["n"])
@newt.jit
def tuned_scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) * alpha
             + nl.load(y_ptr + offs, mask=mask), mask=mask)


def tuned_grid(meta):
    return (newt.cdiv(meta["n"], meta["BLOCK"]),)


def test_autotuned_kernel_with_a_grid_function(interp):
    def f(x, y):
        out = torch.full_like(x, float("nan"))
        tuned_scale_add[tuned_grid](x, y, out, x.numel(), 0.5)
        return out + 1.0

    x, y = torch.randn(83), torch.randn(83)
    compiled, counters = compile_and_count(f, "aot_eager")
    torch.testing.assert_close(compiled(x, y), x * 0.5 + y + 1.0)
    assert sum(counters["graph_break"].values()) == 0


@newt.jit
def cast_scale(x_ptr, out_ptr, n, twice, BLOCK: nl.constexpr, DT: nl.constexpr = nl.float16,
               NEG: nl.constexpr = False):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    if NEG:
        x = -x
    if twice:
        x = x * 2.0
    nl.store(out_ptr + offs, x.to(DT), mask=mask)


def test_dtype_and_bool_constexprs_and_defaults(interp):
    def f(x):
        half = torch.full(x.shape, float("nan"), dtype=torch.float16)
        cast_scale[(newt.cdiv(x.numel(), 32),)](x, half, x.numel(), True, BLOCK=32, NEG=True)
        bf = torch.full(x.shape, float("nan"), dtype=torch.bfloat16)
        cast_scale[(newt.cdiv(x.numel(), 32),)](x, bf, x.numel(), False, BLOCK=32,
                                                 DT=nl.bfloat16)
        return half.float() + bf.float()

    x = torch.randn(70)
    compiled, counters = compile_and_count(f, "aot_eager")
    torch.testing.assert_close(compiled(x), (-x * 2).half().float() + x.bfloat16().float())
    assert sum(counters["graph_break"].values()) == 0
