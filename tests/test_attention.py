"""Fused attention (examples/06_fused_attention.py): the flash-attention forward against SDPA
computed in fp32, on the interpreter and the GPU (target fixture), for small and odd sequence
lengths (the key tail masked, the query tail's store masked), causal and not, D 16/32/64,
fp16 and bf16, strided (non-contiguous) inputs; and the kernel compiled for sm_80 and sm_90a at
the benchmark's launch configuration with the ptxas report checked (registers, spills)."""
import math
import os
import sys

import pytest
import torch

import newt
import newt.language as nl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py: load_file)

ex = common.load_file(os.path.join(ROOT, "examples", "06_fused_attention.py"),
                      "newt_example_06_fused_attention")


def _config(target, D):
    # the interpreter runs small blocks (several key blocks and query blocks at small N); the
    # GPU runs the benchmark's configuration
    return ex.SMALL_CONFIG if target == "interp" else ex.CONFIG.get(D, ex.CONFIG[64])


def _check(q, k, v, causal, target, sm_scale=None, atol=2e-2):
    out = torch.full_like(q, float("nan"))  # poisoned: every row must be written
    o = ex.attention(q, k, v, causal, sm_scale=sm_scale, config=_config(target, q.shape[-1]),
                     out=out)
    assert o is out
    ref = ex.reference(q.cpu(), k.cpu(), v.cpu(), causal, sm_scale=sm_scale)
    assert torch.isfinite(o).all()
    torch.testing.assert_close(o.cpu().float(), ref, atol=atol, rtol=0)


def _qkv(B, H, N, D, dt, device):
    return [torch.randn(B, H, N, D, dtype=torch.float32).to(dt).to(device) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,N,D", [(1, 2, 1, 16), (2, 1, 17, 16), (1, 2, 45, 32),
                                     (1, 1, 64, 64), (1, 2, 100, 16)])
def test_attention_fp16(target, device, B, H, N, D, causal):
    _check(*_qkv(B, H, N, D, torch.float16, device), causal, target)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_bf16(target, device, causal):
    _check(*_qkv(1, 2, 39, 32, torch.bfloat16, device), causal, target, atol=4e-2)


def test_attention_strided_inputs_and_scale(target, device):
    """[B, N, H, D] storage viewed as [B, H, N, D] (every stride passed through), and a
    softmax scale that is not 1/sqrt(D)."""
    B, H, N, D = 2, 3, 33, 32
    q, k, v = (torch.randn(B, N, H, D).half().to(device).transpose(1, 2) for _ in range(3))
    assert not q.is_contiguous()
    _check(q, k, v, True, target, sm_scale=0.3)


def test_attention_large_logits(target, device):
    """Scores far from 0 (q, k scaled up): the running max keeps exp2 from overflowing."""
    q, k, v = _qkv(1, 1, 50, 16, torch.float16, device)
    _check(q * 8, k * 8, v, False, target, sm_scale=1.0 / math.sqrt(16))


def test_wrong_kernel_is_detected(monkeypatch):
    """The check fails on a result that is not attention (here: causal computed as full)."""
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    q, k, v = _qkv(1, 1, 20, 16, torch.float16, "cpu")
    o = ex.attention(q, k, v, False, config=ex.SMALL_CONFIG)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(o.float(), ex.reference(q, k, v, True), atol=2e-2, rtol=0)


# ----------------------------------------------------------------------------- compilation

def _signature(dt="fp16"):
    sig = dict(Q=f"*{dt}", K=f"*{dt}", V=f"*{dt}", sm_scale="fp32", Out=f"*{dt}")
    for t in "qkvo":
        for s in ("z", "h", "m" if t in "qo" else "n", "k"):
            sig[f"stride_{t}{s}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    return sig


_compiled: dict = {}


def _compile(arch, D, causal):
    key = (arch, D, causal)
    if key not in _compiled:
        cfg = dict(ex.CONFIG[D])
        nw, ns = cfg.pop("num_warps"), cfg.pop("num_stages")
        _compiled[key] = newt.compile(
            ex._attn_fwd, _signature(), dict(HEAD_DIM=D, STAGE=3 if causal else 1, EVEN_N=True,
                                             **cfg), arch=arch, num_warps=nw, num_stages=ns)
    return _compiled[key]


# Spill bytes (ptxas spill stores + loads) measured at the benchmark configuration when this
# file was written (NVRTC 13.0, codegen of the day; they moved by ~20 % between codegen
# commits): the tensor-core path's register pressure, reported by the test rather than hidden.
# The test fails if they grow by more than half; lower the numbers when codegen improves
# (test_no_spills_at_d64 then starts passing and must be unmarked).
SPILLS_MEASURED = {("sm_90a", 64, False): 616, ("sm_90a", 64, True): 1188,
                   ("sm_90a", 128, False): 4368, ("sm_90a", 128, True): 6620,
                   ("sm_80", 64, False): 824, ("sm_80", 64, True): 1452}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("arch,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_80", 64)])
def test_compiles_at_benchmark_config(arch, D, causal):
    k = _compile(arch, D, causal)
    assert k.cubin and k.ptx and k.source
    assert k.num_threads == 32 * ex.CONFIG[D]["num_warps"]
    # the H200's per-block limit (227 KB): above it the launch fails
    assert k.shared_bytes <= 232448, f"{k.shared_bytes} B of shared memory"
    print(f"{arch} D={D} causal={causal}: {k.n_spills} B spilled, {k.local_bytes} B local, "
          f"{k.shared_bytes} B shared")
    assert k.n_spills <= 1.5 * SPILLS_MEASURED[(arch, D, causal)] + 256, k.log


@pytest.mark.xfail(strict=True, reason="codegen: the tensor-core attention tile at the benchmark "
                   "config spills (dot operands and results move through the default layout "
                   "in registers); no spills once the fragment layouts flow through")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_no_spills_at_d64(arch):
    k = _compile(arch, 64, False)
    assert k.n_spills == 0 and k.local_bytes == 0, f"{k.n_spills} B spilled on {arch}"


# ----------------------------------------------------------------------------- benchmark logic
# benchmarks/bench_attention.py times on a GPU only; its checking and bookkeeping run here on
# the interpreter with tiny sizes and a fake timer.

def _bench():
    return common.load_file(os.path.join(ROOT, "benchmarks", "bench_attention.py"),
                            "newt_bench_attention")


def test_bench_attention_logic_on_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    small = {64: ex.SMALL_CONFIG, 128: ex.SMALL_CONFIG}
    rows = b.measure(b.SIZES["tiny"], dev="cpu", bench=lambda fn: (fn(), 1.0)[1],
                     providers={"newt": ex._attn_fwd}, sync=lambda: None, configs=small)
    assert len(rows) == 4
    for r in rows:
        assert r["errors"] == {}, r
        assert r["newt"] is not None and r["torch"] is not None and r["triton"] is None
    B, H, N = (b.SIZES["tiny"][x] for x in "BHN")
    assert rows[0]["newt"] == pytest.approx(4 * B * H * N * N * 64 / 1e-3 / 1e12)  # 1 ms
    assert rows[1]["newt"] == pytest.approx(rows[0]["newt"] / 2)  # causal: half the FLOPs


def test_bench_attention_reports_a_wrong_kernel(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    wrong = {64: ex.SMALL_CONFIG, 128: ex.SMALL_CONFIG}
    # a kernel that is not the attention kernel: the check fails, so it is never timed
    rows = b.measure(dict(B=1, H=1, N=16), dev="cpu", bench=lambda fn: 1.0,
                     providers={"newt": _ScaledWrong(ex._attn_fwd)}, sync=lambda: None,
                     configs=wrong)
    assert all(r["newt"] is None and "newt" in r["errors"] for r in rows)


class _ScaledWrong:
    """Launches the real kernel with a wrong softmax scale (sm_scale is the 4th argument)."""

    def __init__(self, k):
        self.k = k

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            args = list(args)
            args[3] = args[3] * 3.0
            return self.k[grid](*args, **kwargs)
        return launch


def test_triton_twin_is_the_same_source():
    b = _bench()
    for f in ex.KERNELS:
        src = common.kernel_source(f)
        twin = common.swap_to_triton(src)
        assert "nl." not in twin and "@triton.jit" in twin
        assert twin.replace("@triton.jit", "@newt.jit").replace("tl.", "nl.") == src
        assert not __import__("re").search(r"\b(torch|newt|triton|np|math)\.",
                                           src.split("\n", 1)[1])
    if common.have_triton():
        assert b.triton_kernel().fn.__name__ == "_attn_fwd"


# ----------------------------------------------------------------------------- known gaps

@newt.jit
def _dots_kernel(a_ptr, b_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, TWO: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    a = nl.load(a_ptr + rm[:, None] * N + rn[None, :])
    b = nl.load(b_ptr + rn[:, None] * N + rn[None, :])
    x = nl.dot(a, b)
    if TWO:  # a second dot after the first has finished: attention's p @ v after q @ k
        x = nl.dot(x.to(nl.float16), b)
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], x)


@pytest.mark.xfail(strict=True, reason="newt/codegen/dot.py `_region`: every dot op appends a "
                   "private shared-memory staging region and none is reused, though each "
                   "non-ring dot finishes (wait + barrier) before the next starts; attention's "
                   "two dots per key loop, and the causal kernel's two loops, add up (D=128, "
                   "BLOCK_M=128 causal asks for 366592 B, above the H200's 232448 B)")
def test_sequential_dots_share_shared_memory():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32"}
    one = newt.compile(_dots_kernel, sig, dict(M=128, N=64, TWO=False), arch="sm_90a",
                       num_warps=8)
    two = newt.compile(_dots_kernel, sig, dict(M=128, N=64, TWO=True), arch="sm_90a",
                       num_warps=8)
    assert two.shared_bytes <= 1.25 * one.shared_bytes, (one.shared_bytes, two.shared_bytes)
