"""Layer norm backward (examples/03_layernorm.py): the dX kernel with its spin-locked partial
dW/dB rows and the reduction kernel, against torch autograd on every target (interp, cuda), on
the CPU emulation of the generated CUDA C++, through the torch.autograd.Function in a few
training steps, and compiled for sm_80 and sm_90a without spills."""
import os
import sys

import pytest
import torch

import newt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py)

ex = common.example("layernorm")


def _inputs(m, n, dt, device):
    x = (torch.randn(m, n) * 2 + 0.5).to(dt).to(device)
    w = torch.randn(n).to(dt).to(device)
    b = torch.randn(n).to(dt).to(device)
    dy = torch.randn(m, n).to(dt).to(device)
    return x, w, b, dy


def _backward(x, w, b, dy, group, kernels=ex.BWD_KERNELS):
    """The example's backward with every output and partial buffer poisoned with NaN."""
    m, n = x.shape
    xf = x.float()     # the forward's statistics, from torch: only the backward is under test
    mean, rstd = xf.mean(1), torch.rsqrt(xf.var(1, unbiased=False) + 1e-5)
    cfg = dict(ex.backward_config(m, n), group=group)
    outs = [torch.full_like(t, float("nan")) for t in (x, w, w)]
    parts = [torch.full((group, n), float("nan"), device=x.device) for _ in "wb"]
    got = ex.layernorm_backward(dy, x, w, mean, rstd, kernels=kernels, config=cfg, dx=outs[0],
                                dw=outs[1], db=outs[2], partials=parts)
    assert all(g is o for g, o in zip(got, outs))
    return got


@pytest.mark.parametrize("dt", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("m,n,group", [(37, 1151, 8), (37, 1151, 64), (3, 17, 2)])
def test_backward_matches_torch_autograd(target, device, dt, m, n, group):
    """Odd sizes; 8 groups: several rows share a partial row and its lock; 64 groups: more
    groups than rows (the rows past 37 are never written and never read)."""
    x, w, b, dy = _inputs(m, n, dt, device)
    got = _backward(x, w, b, dy, group)
    ex.check_backward_result(got, ex.reference_backward(dy, x, w, b), f"{m}x{n} {dt}")


def test_backward_reports_a_wrong_partial_sum(monkeypatch):
    """The check fails when one row's share of dW is lost (the lock or count gone wrong)."""
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    x, w, b, dy = _inputs(9, 40, torch.float32, "cpu")
    dx, dw, db = _backward(x, w, b, dy, 4)
    ref = ex.reference_backward(dy, x, w, b)
    ex.check_backward_result((dx, dw, db), ref, "right")
    xhat = (x - x.mean(1, keepdim=True)) * torch.rsqrt(x.var(1, unbiased=False, keepdim=True)
                                                       + 1e-5)
    with pytest.raises(AssertionError, match="dw"):
        ex.check_backward_result((dx, dw - dy[3] * xhat[3], db), ref, "one row lost")


def test_autograd_function_trains_like_torch(target, device):
    """A few SGD steps of a tiny model (linear, layer norm, linear) with newt's LayerNorm and
    with torch's: the same losses and parameters, step after step."""
    torch.manual_seed(1)
    x = torch.randn(4, 5, 24, device=device)
    target_y = torch.randn(4, 5, 3, device=device)
    lin1, lin2 = torch.nn.Linear(24, 40).to(device), torch.nn.Linear(40, 3).to(device)
    w = (1 + 0.1 * torch.randn(40, device=device)).requires_grad_()
    b = (0.1 * torch.randn(40, device=device)).requires_grad_()
    twins = [[p.detach().clone().requires_grad_() for p in (*lin1.parameters(),
                                                            *lin2.parameters(), w, b)]
             for _ in range(2)]

    def loss(params, norm):
        w1, b1, w2, b2, wn, bn = params
        h = norm(torch.nn.functional.linear(x, w1, b1), wn, bn)
        y = torch.nn.functional.linear(torch.relu(h), w2, b2)
        return ((y - target_y) ** 2).mean()

    norms = [lambda h, wn, bn: ex.LayerNorm.apply(h, wn, bn, 1e-5),
             lambda h, wn, bn: torch.nn.functional.layer_norm(h, (40,), wn, bn, 1e-5)]
    for step in range(3):
        losses = []
        for params, norm in zip(twins, norms):
            value = loss(params, norm)
            grads = torch.autograd.grad(value, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p -= 0.5 * g
            losses.append(value.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-4), step
        for a, e in zip(*twins):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_backward_on_emulated_generated_code():
    """The compiled path's semantics without a GPU: both kernels' generated CUDA C++ built for
    the CPU (test_codegen_emulator.py), blocks one after another, the lock taken and given back
    by thread 0 through the scratch arena as on the GPU."""
    emu = pytest.importorskip("test_codegen_emulator")
    if not emu.HAS_CXX:
        pytest.skip("no host C++ compiler")

    class Emulated:
        def __init__(self, k):
            self.k = k

        def __getitem__(self, grid):
            return lambda *a, **kw: emu.emulate(self.k, grid, *a, **kw)

    x, w, b, dy = _inputs(13, 300, torch.float16, "cpu")
    got = _backward(x, w, b, dy, 4, kernels=tuple(map(Emulated, ex.BWD_KERNELS)))
    ex.check_backward_result(got, ex.reference_backward(dy, x, w, b), "emulated")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_backward_kernels_compile_without_spills(arch):
    """The lock is one acquire compare-and-swap and one release exchange, by one thread; the
    partial rows are read with plain (coherent) loads, never through the read-only path."""
    dx_entry, dwdb_entry = [e for e in ex.AOT if e["fn"] in ex.BWD_KERNELS]
    for e in (dx_entry, dwdb_entry):
        k = newt.compile(e["fn"], e["signature"], e["constexprs"], arch=arch,
                         num_warps=e["num_warps"])
        assert k.cubin and k.n_spills == 0 and k.local_bytes == 0, (arch, k.name, k.log)
        assert ".nc" not in k.ptx
        if e is dx_entry:
            assert k.ptx.count("atom.acquire.gpu.global.cas.b32") == 1
            assert k.ptx.count("atom.release.gpu.global.exch.b32") == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("m,n,group", [(4099, 1500, 4), (2048, 4096, None)])
def test_backward_under_contention_on_the_gpu(m, n, group):
    """Thousands of rows through few locks at once: a lost update or a torn partial row shows."""
    x, w, b, dy = _inputs(m, n, torch.float16, "cuda")
    group = group or ex.backward_config(m, n)["group"]
    for _ in range(3):   # races are not deterministic: a few runs
        got = _backward(x, w, b, dy, group)
        ex.check_backward_result(got, ex.reference_backward(dy, x, w, b), f"{m}x{n}")


# ----------------------------------------------------------------------------- benchmark logic
# benchmarks/bench_layernorm_bwd.py times on a GPU only; its checking and bookkeeping run here
# on the interpreter with tiny sizes and a fake timer.

def _bench():
    return common.load_file(os.path.join(ROOT, "benchmarks", "bench_layernorm_bwd.py"),
                            "newt_bench_layernorm_bwd")


def test_bench_layernorm_bwd_logic_on_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    rows = b.measure(b.SIZES["tiny"], dev="cpu", bench=lambda fn: (fn(), 1.0)[1],
                     providers={"newt": ex.BWD_KERNELS}, sync=lambda: None)
    assert len(rows) == len(b.SIZES["tiny"])
    for r in rows:
        assert r["errors"] == {}, r
        assert r["newt"] is not None and r["torch"] is not None and r["triton"] is None
    m, n = b.SIZES["tiny"][0]
    assert rows[0]["newt"] == pytest.approx((3 * m * n * 2 + 3 * n * 2 + 8 * m) / 1e-3 / 1e9)


class _FirstPartialRowOnly:
    """The reduction kernel launched over one partial row instead of all (M is argument 4)."""

    def __init__(self, k):
        self.k = k

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            args = list(args)
            args[4] = 1
            return self.k[grid](*args, **kwargs)
        return launch


def test_bench_layernorm_bwd_reports_a_wrong_kernel(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    wrong = (ex.BWD_KERNELS[0], _FirstPartialRowOnly(ex.BWD_KERNELS[1]))
    rows = b.measure(b.SIZES["tiny"][:1], dev="cpu", bench=lambda fn: 1.0,
                     providers={"newt": wrong}, sync=lambda: None)
    assert rows[0]["newt"] is None and "dw" in rows[0]["errors"]["newt"]
    assert rows[0]["torch"] is not None


def test_bench_triton_twins_are_the_same_source():
    for f in ex.BWD_KERNELS:
        src = common.kernel_source(f)
        twin = common.swap_to_triton(src)
        assert "nl." not in twin and "@triton.jit" in twin
        assert twin.replace("@triton.jit", "@newt.jit").replace("tl.", "nl.") == src
    if common.have_triton():
        assert [k.fn.__name__ for k in _bench().triton_kernels()] == \
            [k.fn.__name__ for k in ex.BWD_KERNELS]
