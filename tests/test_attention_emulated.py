"""The fused attention kernel (examples/06_fused_attention.py) through its generated CUDA C++ run
on the CPU: tensor-core dots (sm_80: ldmatrix + mma.sync; sm_90a: wgmma for Q K^T), row max /
sum reduced inside the accumulator fragment with quad shuffles, P fed to the second dot from
registers, Q staged into shared memory once, tiles of the two dots sharing shared memory.

Uses tests/test_dot_emulated.py's instruction models (ldmatrix / mma.sync / wgmma exchange
fragments as the PTX ISA's tables say) on the backend's thread emulator. Each case compares
with torch SDPA in fp32 on small odd sequence lengths (the key tail masked, the query tail's
store masked) with a NaN-poisoned output, so every row must be written."""
import os
import re
import shutil
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import common  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

ex = common.load_file(os.path.join(HERE, "..", "examples", "06_fused_attention.py"),
                      "newt_example_06_fused_attention")


@pytest.fixture
def emu(monkeypatch):
    import test_dot_emulated as T
    return T._emulator(monkeypatch, "sm_80")


@pytest.fixture
def emu90(monkeypatch):
    import test_dot_emulated as T
    return T._emulator(monkeypatch, "sm_90a")


def _run(E, B, H, N, D, causal, cfg, dt=torch.float16, seed=0):
    torch.manual_seed(seed)
    q, k, v = (torch.randn(B, H, N, D).to(dt) for _ in range(3))
    _emulate_and_check(E, q, k, v, torch.full_like(q, float("nan")), causal, cfg,
                       2e-2 if dt == torch.float16 else 4e-2)


def _emulate_and_check(E, q, k, v, o, causal, cfg, atol):
    """The kernel on the emulator into the NaN-poisoned `o`, against the fp32 reference."""
    grid, args, kwargs = ex.launch_args(q, k, v, o, causal, config=cfg)
    kwargs = dict(kwargs)
    nw = kwargs.pop("num_warps")
    kwargs.pop("num_stages")
    E.emulate(ex._attn_fwd, grid, *args, num_warps=nw, **kwargs)
    ref = ex.reference(q, k, v, causal)
    assert torch.isfinite(o).all(), int((~torch.isfinite(o)).sum())
    err = float((o.float() - ref).abs().max())
    assert err <= atol, err


CFG4 = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2)
CFG8 = dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_sm80_emulated(emu, causal):
    """Odd N (a partial query block and key tail), two query blocks, two heads."""
    _run(emu, 1, 2, 75, 32, causal, CFG4)


def test_attention_sm80_bf16_d64_emulated(emu):
    _run(emu, 1, 1, 45, 64, False, CFG4, dt=torch.bfloat16, seed=1)


def test_attention_sm80_two_warp_groups_emulated(emu):
    """8 warps: two groups of 4 warps, each owning 64 of the 128 rows."""
    _run(emu, 1, 1, 130, 16, True, CFG8, seed=2)


def test_attention_sm90a_emulated(emu90):
    """sm_90a: Q K^T on wgmma from the staged Q tile, P V on wgmma with P from registers."""
    _run(emu90, 1, 1, 70, 32, True, CFG4, seed=3)


def test_attention_sm80_strided_head_dim_emulated(emu):
    """Every tensor strided along D (stride 2): no stride is specialized as 1, so the tiles are
    MN-major and every chunk is gathered element by element."""
    torch.manual_seed(4)
    B, H, N, D = 1, 1, 40, 32
    q, k, v = (torch.randn(B, H, N, 2 * D).half()[..., ::2] for _ in range(3))
    o = torch.full((B, H, N, 2 * D), float("nan")).half()[..., ::2]
    _emulate_and_check(emu, q, k, v, o, True, CFG4, 2e-2)


def _softmax_of_dot():
    import newt
    import newt.language as nl

    @newt.jit
    def k(a_ptr, b_ptr, out_ptr, m_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
        s = nl.dot(a, b)
        m = nl.max(s, 1)
        p = nl.exp(s - m[:, None])
        den = nl.sum(p, 1)
        nl.store(out_ptr + rm[:, None] * N + rn[None, :], p / den[:, None])
        nl.store(m_ptr + rm, m)          # a row statistic leaves the fragment layout
    return k


@pytest.mark.parametrize("W", [4, 8])
def test_row_statistics_of_a_dot_emulated(emu, W):
    """Row max / sum reduced inside the fragment outside attention: the softmax of a product,
    and the row max stored (each row written once from its quad)."""
    torch.manual_seed(5)
    M, N, K = 16 * W, 32, 32
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    out = torch.full((M, N), float("nan"))
    m = torch.full((M,), float("nan"))
    emu.emulate(_softmax_of_dot(), (1,), a, b, out, m, M=M, N=N, K=K, num_warps=W)
    s = a.float() @ b.float()
    torch.testing.assert_close(m, s.max(1).values, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(out, torch.softmax(s, 1), atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("cfg,D", [
    (dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3), 64),   # Triton's tile, D=64
    (dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3), 32),   # two warpgroups
], ids=["m128-n64-w4", "m128-n64-w8"])
def test_attention_sm90a_triton_tiles_emulated(emu90, cfg, D):
    """Triton's tutorial tile on sm_90a: two 64-row sub-tiles per warpgroup (4 warps) or two
    warpgroups (8 warps); causal, so both key loops and the diagonal mask run."""
    _run(emu90, 1, 1, 150, D, True, cfg, seed=6)


@pytest.mark.parametrize("stages,D", [(2, 16), (3, 16), (4, 16), (4, 128)],
                         ids=["s2", "s3", "s4", "s4-d128-rotated"])
def test_attention_sm90a_key_ring_emulated(emu90, monkeypatch, stages, D):
    """The K/V ring at 2, 3 and 4 buffers (num_stages; P V left in flight from 3 on) with two
    warpgroups, warp 0 running ahead (every other warp held in its wgmma waits): a copy into a
    buffer still under another warpgroup's in-flight wgmma, or an accumulator read before its
    wait, fails every time. At D=128 with 4 stages the loop is rotated (Q K^T of the next key
    block in flight during this block's softmax)."""
    import ctypes

    import test_dot_emulated as T
    T._STAGES[0] = stages
    build = emu90.build

    def delayed(*a, **k):
        lib, params = build(*a, **k)
        ctypes.c_int.in_dll(lib, "nt_wg_wait_delay_us").value = 200
        return lib, params
    monkeypatch.setattr(emu90, "build", delayed)
    _run(emu90, 1, 1, 200, D, False, CFG8, seed=7)    # D != BLOCK_N: Q K^T and P V differ in size


def _dt_attention_kernel(tmp_path, q, k, v, static=False):
    """deuteron's generated attention kernel (examples/dt_attention.py) for these tensors:
    sizes as runtime arguments, or as constexprs with `static` (the example's setting)."""
    import deuteron as dt
    dta = common.load_file(os.path.join(HERE, "..", "examples", "dt_attention.py"), "dt_att")
    src = dt.kernel(dta.attention.fn, static_shapes=static).to_newt_source(q, k, v)
    assert "_ptrs +=" not in src          # addresses from the loop index, not carried
    path = tmp_path / "dt_attention_kernel.py"      # (the JIT reads kernels from files)
    path.write_text("import newt\nimport newt.language as nl\n" + src)
    return common.load_file(str(path), f"dt_attention_kernel_{id(path)}").attention_kernel, dta


def test_deuteron_attention_through_the_ring_emulated(emu90, tmp_path):
    """deuteron's generated attention: its loads compute their addresses in the key loop,
    with `base + bh * stride` written inside it; the dot-loads pass hoists that scalar and
    runs K and V through the ring. On the sm_90a emulator at 3 and 4 stages, odd length."""
    import math

    import test_dot_emulated as T
    BH, L, D = 2, 150, 32
    torch.manual_seed(8)
    q, k, v = (torch.randn(BH, L, D).half() for _ in range(3))
    fn, dta = _dt_attention_kernel(tmp_path, q, k, v)
    for stages in (3, 4):
        T._STAGES[0] = stages
        out = torch.full_like(q, float("nan"))
        emu90.emulate(fn, (math.ceil(L / 128) * BH,), q, k, v, out, BH, L, D, L, *q.stride(),
                      *k.stride(), *v.stride(), *out.stride(), BLOCK_SIZE_BH=1,
                      BLOCK_SIZE_M=128, BLOCK_SIZE_K=D, BLOCK_SIZE_N=64, num_warps=8)
        torch.testing.assert_close(out.float(), dta.reference(q, k, v).float(), atol=2e-2,
                                   rtol=0)


def _static_case(tmp_path):
    BH, L, D = 2, 256, 32
    torch.manual_seed(9)
    q, k, v = (torch.randn(BH, L, D).half() for _ in range(3))
    fn, dta = _dt_attention_kernel(tmp_path, q, k, v, static=True)
    sizes = dict(BH=BH, M=L, K=D, N=L, BLOCK_SIZE_BH=1, BLOCK_SIZE_M=128, BLOCK_SIZE_K=D,
                 BLOCK_SIZE_N=64)
    return fn, dta, (q, k, v), sizes


def test_deuteron_attention_static_shapes_drop_every_mask(tmp_path):
    """Static shapes: the sizes are constexprs, and at L = 256 keys in tiles of 64 with
    head_dim 32 in one tile, newt's mask pass (newt/passes/masks.py) proves every bounds
    check true: no `where` is left, and the K and V tiles reach the ring unmasked."""
    import newt
    fn, _, _, sizes = _static_case(tmp_path)
    sig = {f"{t}_ptr": "*fp16" for t in ("q", "k", "v", "out")}
    sig.update({f"stride_{t}{i}": "i32" for t in ("q", "k", "v", "out") for i in range(3)})
    ir = newt.compile(fn, sig, sizes, arch="sm_90a", num_warps=8, num_stages=3).ir
    assert "select" not in ir and ir.count("tile_ring=3") == 2
    loads = re.findall(r"dot_tile_load %[\w.]+(, %[\w.]+)?", ir)
    assert len(loads) == 2 and not any(loads), ir


def test_deuteron_attention_static_shapes_emulated(emu90, tmp_path):
    """The same kernel on the sm_90a emulator against torch, NaN-poisoned output."""
    import test_dot_emulated as T
    fn, dta, (q, k, v), sizes = _static_case(tmp_path)
    T._STAGES[0] = 3
    out = torch.full_like(q, float("nan"))
    names = {"q": q, "k": k, "v": v, "out": out}
    ptrs = {f"{t}_ptr": x for t, x in names.items()}
    strides = {f"stride_{t}{i}": x.stride(i) for t, x in names.items() for i in range(3)}
    emu90.emulate(fn, (sizes["M"] // 128 * sizes["BH"],), **ptrs, **strides, **sizes,
                  num_warps=8)
    torch.testing.assert_close(out.float(), dta.reference(q, k, v).float(), atol=2e-2, rtol=0)


def test_deuteron_attention_compiles_with_the_ring(tmp_path):
    """The same kernel for sm_90a at the hand-written example's configuration: K and V in a
    ring of 3 buffers each, no spills."""
    import newt
    q = torch.randn(2, 256, 64).half()
    fn, _ = _dt_attention_kernel(tmp_path, q, q.clone(), q.clone())
    sig = {p: "*fp16" for p in ("q_ptr", "k_ptr", "v_ptr", "out_ptr")}
    sig.update({p: "i32" for p in ("BH", "M", "K", "N")})
    sig.update({f"stride_{t}{i}": "i32" for t in ("q", "k", "v", "out") for i in range(3)})
    kern = newt.compile(fn, sig, dict(BLOCK_SIZE_BH=1, BLOCK_SIZE_M=128, BLOCK_SIZE_K=64,
                                      BLOCK_SIZE_N=64), arch="sm_90a", num_warps=8, num_stages=3)
    assert "dot_tile_prefetch" in kern.ir and kern.ir.count("tile_ring=3") == 2
    assert kern.n_spills == 0


def _trans_variant(tmp_path):
    """examples/06_fused_attention.py with K loaded as stored ([keys, D] tiles) and multiplied
    through nl.trans, the other common way to write Q K^T."""
    src = open(os.path.join(HERE, "..", "examples", "06_fused_attention.py")).read()
    old = ("        k_ptrs = K + offs_d[:, None] * stride_kk + "
           "(start_n + offs_n)[None, :] * stride_kn\n"
           "        k = nl.load(k_ptrs, mask=(start_n + offs_n)[None, :] < N_CTX, other=0.0)\n"
           "        qk = nl.dot(q, k)\n")
    new = ("        k_ptrs = K + (start_n + offs_n)[:, None] * stride_kn + "
           "offs_d[None, :] * stride_kk\n"
           "        k = nl.load(k_ptrs, mask=(start_n + offs_n)[:, None] < N_CTX, other=0.0)\n"
           "        qk = nl.dot(q, nl.trans(k))\n")
    assert src.count(old) == 1
    path = tmp_path / "attention_trans_k.py"
    path.write_text(src.replace(old, new))
    return common.load_file(str(path), "newt_attention_trans_k")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_attention_with_transposed_k_emulated(monkeypatch, tmp_path, arch):
    """`nl.dot(q, nl.trans(k))`: the transposed load becomes a load of K^T's block
    (passes/tc/trans_loads.py), the key tiles copied straight into the dot's K-major tile as for
    the example's own strides; correct against SDPA, and no transpose left in the IR."""
    import test_dot_emulated as T
    E = T._emulator(monkeypatch, arch)
    mod = _trans_variant(tmp_path)
    torch.manual_seed(7)
    q, k, v = (torch.randn(1, 2, 70, 32).to(torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    grid, args, kwargs = mod.launch_args(q, k, v, o, True, config=CFG4)
    kwargs = dict(kwargs)
    nw = kwargs.pop("num_warps")
    kwargs.pop("num_stages")
    E.emulate(mod._attn_fwd, grid, *args, num_warps=nw, **kwargs)
    assert torch.isfinite(o).all(), int((~torch.isfinite(o)).sum())
    assert float((o.float() - mod.reference(q, k, v, True)).abs().max()) <= 2e-2
    ops = list(E.build.last_fn.walk())
    assert not any(o.opcode == "permute" for o in ops)
    dots = [o for o in ops if o.opcode == "dot"]
    assert dots[0].attrs.get("b_kmajor") and dots[0].attrs.get("b_src") == "loaded"


@pytest.mark.parametrize("layout,D,cfg,causal", [
    ("bnhd", 32, CFG4, True),       # heads interleaved with keys: map strides (N*H*D, D, H*D)
    ("bnhd", 64, dict(CFG8, num_stages=3), False),
    ("padded", 16, dict(CFG8, num_stages=4), True),   # rows padded to 2*D: a row stride != D
], ids=["bnhd-d32-causal", "bnhd-d64", "padded-d16-causal"])
def test_attention_sm90a_tma_layouts_emulated(emu90, layout, D, cfg, causal):
    """The TMA ring (passes/tc/ring_tma.py) over layouts whose 4-D maps are not the contiguous
    [B, H, N, D] one: [B, N, H, D] storage seen as [B, H, N, D] (the head stride smaller than
    the key stride), and rows padded to twice the head dim. Two batches, three heads, odd N."""
    torch.manual_seed(8)
    B, H, N = 2, 3, 70
    if layout == "bnhd":
        q, k, v = (torch.randn(B, N, H, D).half().transpose(1, 2) for _ in range(3))
        o = torch.full((B, N, H, D), float("nan")).half().transpose(1, 2)
    else:
        q, k, v = (torch.randn(B, H, N, 2 * D).half()[..., :D] for _ in range(3))
        o = torch.full((B, H, N, 2 * D), float("nan")).half()[..., :D]
    _emulate_and_check(emu90, q, k, v, o, causal, cfg, 2e-2)


# ----------------------------------------------------------------------------- backward
# examples/08_attention_training.py's backward kernels through their generated code: the
# preprocess (delta = rowsum(O * dO)) and the dK / dV / dQ kernel, whose dots take Q, K and V
# transposed, P^T / dS^T / dS from registers as A operands, and K^T / V^T / Q^T tiles of both
# orders (K-major and MN-major B tiles of one shape in one kernel).

ex08 = common.load_file(os.path.join(HERE, "..", "examples", "08_attention_training.py"),
                        "newt_example_08_attention_training")


def _emulate_backward(E, B, H, N, D, causal, cfg, dt=torch.float16, seed=0):
    import math
    torch.manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, N, D).to(dt) for _ in range(4))
    sm_scale = 1.0 / math.sqrt(D)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    o = ex08.reference(*leaves, causal, sm_scale)
    o.backward(do.double())
    s = (leaves[0] @ leaves[1].transpose(-1, -2)).detach() * sm_scale
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    lse = (torch.logsumexp(s, -1) / math.log(2)).float()     # the forward's M (log2 units)
    o16 = o.detach().to(dt)
    delta = torch.full((B, H, N), float("nan"))
    pre = ex08.PRE_ELEMENTS // D
    E.emulate(ex08._attn_bwd_preprocess, (math.ceil(N / pre), B * H), o16, do, delta,
              *o16.stride(), H, N, HEAD_DIM=D, BLOCK_M=pre, num_warps=4)
    torch.testing.assert_close(delta, (o16.float() * do.float()).sum(-1), atol=1e-3, rtol=1e-3)
    grads = [torch.full_like(q, float("nan")) for _ in range(3)]
    c = dict(cfg)
    nw = c.pop("num_warps")
    c.pop("num_stages", None)
    E.emulate(ex08._attn_bwd, (math.ceil(N / c["BLOCK_N1"]), B * H), q, k, v, sm_scale, do,
              *grads, lse, delta, *q.stride(), H, N, HEAD_DIM=D, CAUSAL=causal, num_warps=nw,
              **c)
    atol = 2e-2 if dt == torch.float16 else 4e-2
    for name, got, leaf in zip(("dq", "dk", "dv"), grads, leaves):
        assert torch.isfinite(got).all(), name
        err = float((got.double() - leaf.grad).abs().max())
        assert err <= atol, (name, err)


BWD4 = dict(BLOCK_M1=16, BLOCK_N1=64, BLOCK_M2=64, BLOCK_N2=16, num_warps=4)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_backward_sm80_emulated(emu, causal):
    """N = 45: a partial key block and query block; two heads."""
    _emulate_backward(emu, 1, 2, 45, 32, causal, BWD4)


def test_attention_backward_sm90a_emulated(emu90):
    """wgmma: Q K^T and dO V^T from staged Q / dO tiles, P^T dO and dS^T Q with A from
    registers; bf16."""
    _emulate_backward(emu90, 1, 1, 45, 32, True, BWD4, dt=torch.bfloat16, seed=1)


@pytest.mark.parametrize("arch,D", [("sm_80", 64), ("sm_80", 128), ("sm_90a", 64),
                                    ("sm_90a", 128)])
def test_attention_backward_gpu_config_emulated(monkeypatch, arch, D):
    """The example's GPU configuration (two warpgroups, 128 keys and queries per program; at
    D = 128 the mma.sync k-steps rolled; its 2 stages: the walks' tile rings of 2 buffers, TMA
    boxes on sm_90a, cp.async on sm_80 at D = 64), N = 130: a second, partial block; causal."""
    import test_dot_emulated as T
    E = T._emulator(monkeypatch, arch)
    cfg = ex08.bwd_config_for(D)
    T._STAGES[0] = cfg["num_stages"]
    _emulate_backward(E, 1, 1, 130, D, True, cfg, seed=2)
    from newt.ir.printer import format_function
    walks = format_function(E.build.last_fn).count("walk=")
    assert walks == {("sm_80", 64): 2, ("sm_80", 128): 0}.get((arch, D), 4), walks


def test_attention_backward_sm90a_cp_async_ring_emulated(monkeypatch):
    """The walks' rings on cp.async with wgmma (passes/tc/ring_tma.py skipped, as for a layout
    TMA cannot read): each thread's copies of the next iteration, cp.async.wait_group and the
    proxy fence before the iteration's barrier; the GPU configuration at D = 64, 2 stages."""
    import test_dot_emulated as T

    import newt.passes as P
    monkeypatch.setattr(P, "PASSES", tuple((n, (lambda fn, options: None) if n == "ring_tma"
                                            else p) for n, p in P.PASSES))
    E = T._emulator(monkeypatch, "sm_90a")
    cfg = ex08.bwd_config_for(64)
    T._STAGES[0] = cfg["num_stages"]
    _emulate_backward(E, 1, 1, 130, 64, True, cfg, seed=3)
    assert "newt_cp_async_wait<0>" in E.build.last_source
    assert "newt_tma_load" not in E.build.last_source
