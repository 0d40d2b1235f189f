"""Fused attention (examples/06_fused_attention.py): the flash-attention forward against SDPA
computed in fp32, on the interpreter and the GPU (target fixture), for small and odd sequence
lengths (the key tail masked, the query tail's store masked), causal and not, D 16/32/64,
fp16 and bf16, strided (non-contiguous) inputs; and the kernel compiled for sm_80 and sm_90a at
the benchmark's launch configuration with the ptxas report checked (registers, spills)."""
import math
import os
import re
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


def _config(target, D, causal):
    # the interpreter runs small blocks (several key blocks and query blocks at small N); the
    # GPU runs the benchmark's configuration
    return ex.SMALL_CONFIG if target == "interp" else ex.config_for(D, causal)


def _check(q, k, v, causal, target, sm_scale=None, atol=2e-2):
    out = torch.full_like(q, float("nan"))  # poisoned: every row must be written
    o = ex.attention(q, k, v, causal, sm_scale=sm_scale,
                     config=_config(target, q.shape[-1], causal),
                     out=out)
    assert o is out
    ref = ex.reference(q.cpu(), k.cpu(), v.cpu(), causal, sm_scale=sm_scale)
    assert torch.isfinite(o).all()
    torch.testing.assert_close(o.cpu().float(), ref, atol=atol, rtol=0)


def _qkv(B, H, N, D, dt, device):
    return [torch.randn(B, H, N, D, dtype=torch.float32).to(dt).to(device) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,N,D", [(1, 2, 1, 16), (2, 1, 17, 16), (1, 2, 45, 32),
                                     (1, 1, 64, 64), (1, 2, 100, 16), (2, 3, 200, 128)])
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


# the specialization the JIT gives contiguous [B, H, N, D] tensors: the head-dim strides are
# 1 (compiled as the constant), pointers and the other strides divisible by 16
_SPEC = {p: dict(divisible_by_16=p not in ("sm_scale", "H", "N_CTX"),
                 equal_to_1=p in ("stride_qk", "stride_kk", "stride_vk", "stride_ok"), large=False)
         for p in _signature()}

# Triton's tutorial launch configurations (BLOCK_M=128, BLOCK_N 64, 4 / 8 warps)
TRITON_CONFIG = {64: dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3),
                 128: dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)}

_compiled: dict = {}


def _compile(arch, D, causal, config=None, spec=True, ring_tma=True):
    """The kernel for sm_80 / sm_90a; ring_tma=False compiles it with passes/tc/ring_tma.py off
    (K and V through the cp.async ring, as where TMA cannot read them)."""
    import newt.passes as P
    cfg = dict(config or ex.config_for(D, causal))
    key = (arch, D, causal, tuple(sorted(cfg.items())), spec, ring_tma)
    if key not in _compiled:
        nw, ns = cfg.pop("num_warps"), cfg.pop("num_stages")
        passes = P.PASSES
        if not ring_tma:     # the pass's entry in PASSES, skipped
            P.PASSES = tuple((n, (lambda fn, options: None) if n == "ring_tma" else p)
                             for n, p in passes)
        try:
            _compiled[key] = newt.compile(
                ex._attn_fwd, _signature(), dict(HEAD_DIM=D, STAGE=3 if causal else 1,
                                                 EVEN_N=True, **cfg),
                arch=arch, num_warps=nw, num_stages=ns, specialization=_SPEC if spec else None)
        finally:
            P.PASSES = passes
    return _compiled[key]


def _report(k, what):
    print(f"{what}: {k.n_regs} registers, {k.n_spills} B spilled, {k.local_bytes} B local, "
          f"{k.shared_bytes} B shared")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("arch,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_80", 64),
                                    ("sm_80", 128)])
def test_compiles_at_benchmark_config(arch, D, causal):
    """The benchmark's configuration: no spills. Rows reduce in the fragment, P goes to the
    second dot from registers, Q is staged once, K and V are copied straight into a ring of
    tiles ahead of their dots."""
    k = _compile(arch, D, causal)
    assert k.cubin and k.ptx and k.source
    cfg = ex.config_for(D, causal)
    assert k.num_threads == 32 * cfg["num_warps"]
    _report(k, f"{arch} D={D} causal={causal}")
    assert k.shared_bytes <= (232448 if arch == "sm_90a" else 166912)
    assert k.n_spills == 0 and k.local_bytes == 0 and 0 < k.n_regs <= 255, k.log
    assert not re.search(r"\(C75\d\d\)", k.log), k.log   # no wgmma wait / serialization by ptxas
    if arch == "sm_80":
        assert "mma.sync" in k.ptx and "ldmatrix" in k.ptx
    else:   # Q K^T from shared-memory descriptors, P @ V with P in registers
        assert re.search(r"wgmma\.mma_async\S* \{[^}]*\}, %rd", k.ptx)
        assert re.search(r"wgmma\.mma_async\S* \{[^}]*\}, \{%r", k.ptx)
    # the row statistics never go through the scratch arena inside the key loop
    assert "__shfl_xor_sync" in k.source and "dot_row_reduce" in k.ir
    assert "reduce.max" not in k.ir and "reduce.sum" not in k.ir
    # K and V run through a ring of buffers: the tiles of a later key block are copied
    # while Q K^T runs, one barrier per key block (on sm_90a at D=64: after Q K^T's wait, one
    # block further ahead); on sm_90a P @ V stays in flight into the next key block
    # (accumulating in place into the carried accumulator)
    assert k.ir.count("dot_tile_prefetch") == (2 if causal else 1)
    assert k.ir.count(f"tile_ring={cfg['num_stages']}") == (4 if causal else 2)
    body = k.source[k.source.index("for (i32 start_n"):]
    body = body[:body.index("\n  }\n")]
    late = "late_copies" in k.ir
    assert late == (arch == "sm_90a" and D == 64)   # (D=128: rotated, or one CTA per SM)
    R = cfg["num_stages"]
    if arch == "sm_90a":
        # K and V by TMA (passes/tc/ring_tma.py): 4-D boxes (head dim, key, head, batch), the
        # maps of both loops shared, no per-thread copy, no proxy fence in the loop; each
        # thread waits on the buffer's mbarrier, and the one barrier left guards buffer reuse
        assert k.ir.count("tma=[box(map") == (2 if causal else 1), k.ir
        assert len(k.tma_maps) == 2 and all(len(r["outer"]) == 2 for r in k.tma_maps)
        assert "cp.async.bulk.tensor.4d" in k.ptx and "cp.async.cg" not in k.ptx
        assert "fence.proxy.async" not in body and "newt_mbar_wait" in body
        assert body.count("__syncthreads") == 1, body
        if late:    # copies of block i + stages - 1 once Q K^T (and P @ V of i - 1) retired
            w = body.index("newt_wgmma_wait<0>")
            assert w < body.index("__syncthreads();\n", w) < body.index("newt_tma_load_4d"), body
            assert f" + {R - 1} * v_" in body, body
    else:
        # K's and V's pointers move by one stride per key block: each chunk's copy reads a
        # pointer advanced by a delta instead of recomputing its address
        assert k.ir.count("iv_slope") == (4 if causal else 2)
        assert len(re.findall(r"const i64 rp\d+_d = ", k.source)) == k.ir.count("iv_slope")
        assert body.count("__syncthreads") == 1, body
    if arch == "sm_90a":
        # (a rotated loop, D=128 at 4 stages, also waits for the next block's scores)
        per_loop = 2 if "rotate" in k.ir else 1
        assert k.ir.count("dot_async_wait") == (2 if causal else 1) * per_loop
        assert body.count("newt_wgmma_wait<0>") == 1


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_cp_async_ring_on_sm90a_without_ring_tma(causal):
    """Where TMA cannot read K and V (passes/tc/ring_tma.py off here), sm_90a keeps the cp.async
    ring: at D=64 late copies after Q K^T's wait and a second barrier, a proxy fence before
    the wgmma reads the copied tiles."""
    k = _compile("sm_90a", 64, causal, ring_tma=False)
    assert "tma=[" not in k.ir and not k.tma_maps and k.n_spills == 0
    body = k.source[k.source.index("for (i32 start_n"):]
    body = body[:body.index("\n  }\n")]
    R = ex.config_for(64, causal)["num_stages"]
    assert "late_copies" in k.ir and body.count("__syncthreads") == 2, body
    assert f"newt_cp_async_wait<{R - 2}>();" in body and "newt_fence_proxy_async" in body
    assert body.index("newt_wgmma_wait<0>") < body.index("__syncthreads();\n", body.index(
        "newt_wgmma_wait<0>")) < body.index("newt_cp_async16"), body
    assert f" + {R - 1} * v_" in body, body


def _ptx_loops(ptx):
    """The PTX of each loop: from a label to the last branch back to it."""
    loops = []
    for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, flags=re.M):
        back = [b.end() for b in re.finditer(rf"bra(\.uni)?\s+{re.escape(m.group(1))};", ptx)
                if b.start() > m.start()]
        if back:
            loops.append(ptx[m.end():back[-1]])
    return loops


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_key_loop_copies_and_descriptors_stay_out_of_the_loop(D, causal):
    """Inside the key loop (sm_90a), the copies of a later K / V block read no thread index.
    cp.async ring (ring TMA off): each 16-byte chunk's place in its tile is the same every
    iteration and stays in a register (recomputing its swizzle from the thread index cost
    about 20 instructions per key block, 5% of the loop). TMA ring: one thread issues one box
    per 128-byte panel of K and of V. Q's descriptor is built before the loop from a warp index
    read through shfl.sync.idx, which ptxas knows is the same in every lane, so it lives in
    uniform registers (from a plain thread index: 8 register-to-uniform moves per key block)."""
    k = _compile("sm_90a", D, causal, ring_tma=False)
    loops = [b for b in _ptx_loops(k.ptx) if "cp.async.cg" in b and "wgmma.mma_async" in b]
    assert len(loops) == (2 if causal else 1), len(loops)
    for body in loops:
        window = body[body.index("wgmma.mma_async"):]
        window = window[:window.index("cp.async.commit_group")]
        assert window.count("cp.async.cg") == D // 16     # K and V: 16-byte chunks per thread
        assert "%tid.x" not in window, window
    before = k.ptx[:k.ptx.index(loops[0])]
    assert re.search(r"shfl\.sync\.idx\.b32", before)
    k = _compile("sm_90a", D, causal)
    loops = [b for b in _ptx_loops(k.ptx) if "cp.async.bulk.tensor" in b and "wgmma" in b]
    assert len(loops) == (2 if causal else 1), len(loops)
    for body in loops:
        assert body.count("cp.async.bulk.tensor.4d") == 2 * D // 64, body
        assert "mbarrier.try_wait.parity" in body
        w = body[body.index("mbarrier.arrive.expect_tx"):body.rindex("cp.async.bulk.tensor")]
        assert "%tid.x" not in w, w             # the copies: coordinates only
        assert "cp.async.cg" not in body and "fence.proxy.async" not in body


ROTATED_CONFIG = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)


def test_no_rotation_with_a_small_accumulator():
    """At D=64 the accumulator is 32 registers per thread: a second array of scores would cost
    the second CTA per SM, so the key loop is not rotated."""
    k = _compile("sm_90a", 64, False, ROTATED_CONFIG)
    assert "rotate" not in k.ir and "tile_ring=4" in k.ir


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [128])
def test_rotated_key_loop_keeps_wgmma_asynchronous(D, causal):
    """num_stages=4 on sm_90a: Q K^T of the next key block is issued before the softmax of
    this one (passes/tc/dot_loads.py, the rotation), one barrier per key block, and ptxas keeps
    every wgmma asynchronous (it serializes them all, with a C7514 note, when it cannot count
    the groups in flight at a wait)."""
    k = _compile("sm_90a", D, causal, ROTATED_CONFIG)
    _report(k, f"sm_90a D={D} causal={causal} (rotated)")
    assert k.n_spills == 0 and k.local_bytes == 0, k.log
    assert k.ir.count("rotate,") + k.ir.count("rotate}") == (2 if causal else 1)
    assert not re.search(r"\(C75\d\d\)", k.log) and "serialized" not in k.log, k.log
    body = k.source[k.source.index("for (i32 start_n"):]
    body = body[:body.index("\n  }\n")]
    assert body.count("__syncthreads") == 1
    assert body.count("newt_wgmma_wait<0>") == 1 and "newt_wgmma_wait<1>" not in body


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("arch,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_80", 64),
                                    ("sm_80", 128)])
def test_compiles_at_triton_tutorial_config(arch, D, causal):
    """Triton's own tile (128 x 64 on 4 warps at D=64: 64 accumulators and 64 scores per
    thread) fits too: the causal mask and the fragment addresses are recomputed per
    iteration instead of hoisted."""
    k = _compile(arch, D, causal, TRITON_CONFIG[D])
    _report(k, f"{arch} D={D} causal={causal} (Triton's config)")
    assert k.shared_bytes <= (232448 if arch == "sm_90a" else 166912)
    assert k.n_spills == 0 and k.local_bytes == 0 and 0 < k.n_regs <= 255, k.log


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_normalisation_happens_in_the_fragment(arch, monkeypatch):
    """`acc / l_i[:, None]` after the key loop divides the accumulator fragment by the thread's
    own row values; the tile leaves the fragment afterwards. Through shared memory instead, the
    tile, the broadcast divisor and the quotient were alive at once: the peak of the kernel.
    (The result against SDPA: tests/test_attention_emulated.py.)"""
    import newt.passes as P
    cfg = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3)
    k = _compile(arch, 128, False, cfg)
    ir = k.ir.splitlines()
    div = next(i for i, line in enumerate(ir) if "binary.div" in line and "mma_acc" in line)
    out = next(i for i, line in enumerate(ir) if "dot_acc_out" in line)
    assert div < out and "dot_row_bcast" in k.ir, k.ir
    monkeypatch.setattr(P, "PASSES", tuple((n, (lambda fn, options: None) if n == "row_scale"
                                            else p) for n, p in P.PASSES))
    _compiled.clear()
    before = _compile(arch, 128, False, cfg)
    _compiled.clear()
    assert "dot_acc_out" in before.ir, before.ir
    # The epilogue was the sm_90a peak (197 -> 143 registers with NVRTC 13.0: three blocks per
    # SM instead of two). Since its stores take the staged bits and need no scalar fallback
    # (codegen/tc/dot_epilogue.py) both forms peak in the key loop (146): the in-fragment
    # division must still never cost registers (beyond the register or two NVRTC's allocation
    # moves by with unrelated code, such as the defined integer division of the grid index)
    assert k.n_regs <= before.n_regs + 2, (k.n_regs, before.n_regs)
    assert k.n_spills == 0 and k.local_bytes == 0


def test_unspecialized_strides_still_compile_without_spills():
    """AOT without a specialization: the head-dim strides are runtime values, so K^T's tile is
    MN-major and every chunk tests its addresses at run time (the slow, general path)."""
    k = _compile("sm_80", 64, False, spec=False)
    _report(k, "sm_80 D=64 unspecialized")
    assert k.n_spills == 0 and k.local_bytes == 0


@newt.jit
def _big_dot(a_ptr, b_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
    rm = nl.arange(0, M)
    rn = nl.arange(0, N)
    rk = nl.arange(0, K)
    a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], nl.dot(a, b))


@pytest.mark.parametrize("arch,limit", [("sm_90a", 232448), ("sm_80", 166912)])
def test_shared_memory_over_the_device_limit_is_a_compile_error(arch, limit):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32"}
    with pytest.raises(newt.CompilationError) as e:
        newt.compile(_big_dot, sig, dict(M=256, N=256, K=256), arch=arch, num_warps=8)
    msg = str(e.value)
    assert str(limit) in msg and arch in msg and "shared memory" in msg, msg


# ----------------------------------------------------------------------------- benchmark logic
# benchmarks/bench_attention.py times on a GPU only; its checking and bookkeeping run here on
# the interpreter with tiny sizes and a fake timer.

def _bench():
    return common.load_file(os.path.join(ROOT, "benchmarks", "bench_attention.py"),
                            "newt_bench_attention")


def test_bench_attention_logic_on_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    # the interpreter is slow on a loaded machine: no "slow call" notes here
    monkeypatch.setattr(b, "SLOW_MS", 1e9)
    monkeypatch.setattr(b, "SKIP_MS", 1e9)
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


# ----------------------------------------------------------------------------- shared memory

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


def test_sequential_dots_share_shared_memory():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32"}
    one = newt.compile(_dots_kernel, sig, dict(M=128, N=64, TWO=False), arch="sm_90a",
                       num_warps=8)
    two = newt.compile(_dots_kernel, sig, dict(M=128, N=64, TWO=True), arch="sm_90a",
                       num_warps=8)
    assert two.shared_bytes <= 1.25 * one.shared_bytes, (one.shared_bytes, two.shared_bytes)
