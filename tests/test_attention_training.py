"""Attention for training (examples/08_attention_training.py): the forward that saves the row
logsumexp and the two-kernel backward, against torch autograd in fp64 on fresh data with
NaN-poisoned gradients, small odd sequence lengths (partial key and query blocks), causal and
not, fp16 and bf16, on the interpreter and the GPU (target fixture); torch.autograd.gradcheck
in fp64; a few training steps against SDPA; and every kernel compiled for sm_80 and sm_90a at
the launch configuration the example uses there, with the ptxas report checked (no spills, no
local memory). The compiled code run on the CPU: tests/test_attention_emulated.py."""
import os
import sys

import pytest
import torch

import newt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py: load_file)

ex = common.load_file(os.path.join(ROOT, "examples", "08_attention_training.py"),
                      "newt_example_08_attention_training")


def _configs(target):
    return (ex.SMALL_FWD_CONFIG, ex.SMALL_BWD_CONFIG) if target == "interp" else (None, None)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_gradients_odd_sizes(target, device, dt):
    """N = 45: a partial last key block and query block in both walks; two heads; D = 32."""
    shapes = [(1, 2, 45, 32)] if target == "interp" else [(2, 3, 45, 64), (1, 2, 200, 128),
                                                          (1, 1, 1000, 64)]
    ex.check_gradients(device, shapes, (dt,), *_configs(target))


def test_gradcheck(target, device):
    if target == "interp":
        pytest.skip("test_main_on_interpreter runs it on the interpreter")
    ex.gradcheck(device, ex.SMALL_FWD_CONFIG, ex.SMALL_BWD_CONFIG)


def test_training_steps(target, device):
    if target == "interp":
        pytest.skip("test_main_on_interpreter runs it on the interpreter")
    ex.check_training(device, steps=3, fwd_config=_configs(target)[0],
                      bwd_config=_configs(target)[1])


def test_main_on_interpreter(monkeypatch, capsys):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    ex.main(["--small"])
    out = capsys.readouterr().out
    assert "matches torch autograd" in out and "gradcheck fp64 causal=True: ok" in out


def test_wrong_gradient_is_detected(monkeypatch):
    """check_gradients fails when a gradient is wrong (dK left as the NaN poison)."""
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    real = ex.backward

    def no_dk(*args, out=None, **kw):
        dq, dk, dv = real(*args, **kw)
        out[0].copy_(dq)
        out[2].copy_(dv)
        return out
    monkeypatch.setattr(ex, "backward", no_dk)
    with pytest.raises(AssertionError, match="disagree"):
        ex.check_gradients("cpu", [(1, 1, 20, 16)], (torch.float16,), ex.SMALL_FWD_CONFIG,
                           ex.SMALL_BWD_CONFIG)


# ----------------------------------------------------------------------------- compilation

_compiled: dict = {}


def _compile_bwd(arch, D, causal):
    key = ("bwd", arch, D, causal)
    if key not in _compiled:
        e = ex.aot_backward(D, causal)
        _compiled[key] = newt.compile(e["fn"], e["signature"], e["constexprs"], arch=arch,
                                      num_warps=e["num_warps"], num_stages=e["num_stages"],
                                      specialization=e["specialization"])
    return _compiled[key]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("arch,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_80", 64),
                                    ("sm_80", 128)])
def test_backward_compiles_without_spills(arch, D, causal):
    """The example's configuration: no spills, no local memory; Q and dO read transposed as
    loads of the transposed block (passes/tc/trans_loads.py), not through a register
    transpose; the dQ walk's row vectors broadcast in registers; on sm_80 at D = 128 (dK and dV: 128 accumulator registers per thread) the
    mma.sync k-steps stay rolled (passes/tc/fragment_epilogue.py)."""
    k = _compile_bwd(arch, D, causal)
    cfg = ex.bwd_config_for(D)
    print(f"{arch} D={D} causal={causal} {cfg}: {k.n_regs} registers, {k.n_spills} B spilled, "
          f"{k.local_bytes} B local, {k.shared_bytes} B shared")
    assert k.num_threads == 32 * cfg["num_warps"]
    assert k.n_spills == 0 and k.local_bytes == 0 and 0 < k.n_regs <= 255, k.log
    assert "permute" not in k.ir
    # the dQ walk's logsumexp and delta rows: converted to the fragment's rows once, before
    # the loop (passes/tc/dot_rows.py 3b), broadcast in registers inside it
    assert k.ir.count("dot_row_bcast") == (4 if causal else 2)
    if arch == "sm_90a":
        assert "wgmma.mma_async" in k.ptx
    else:
        assert "mma.sync" in k.ptx
    assert ("ksteps_rolled" in k.ir) == (D == 128)
    if arch == "sm_80" and D == 128:
        assert "#pragma unroll 1" in k.source
    _check_walk_rings(k, arch, causal, cfg["num_stages"], arch == "sm_80", D)


def _walk_body(src, iv):
    """The C text of the `for` loop over induction variable `iv` (its first occurrence)."""
    start = src.index(f"for (i32 {iv}")
    depth, i = 0, src.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return src[start:i]
        i += 1


def _check_walk_rings(k, arch, causal, stages, mma_sync, D):
    """The walks copy their tiles through a ring (passes/tc/walk_ring.py): the four tiles of
    a key block's walk (Q^T, Q, dO, dO^T: two blocks, each copied once) and the three of a
    query block's (K^T, K, V^T: two blocks), iteration i + 1's issued by the first dot of
    iteration i, one barrier per iteration; on sm_90a the tiles come as TMA boxes, and the
    row loads are issued before the first dot. On mma.sync a walk whose accumulators
    take 64+ registers per thread (dK and dV at D = 64; every walk at D = 128) keeps its copies
    in place, and the IR says why."""
    import re
    n = 2 if causal else 1
    ringed = {"m": not mma_sync, "n": not mma_sync or D == 64}   # key / query block walks
    walks = re.findall(r"dot_tile_prefetch \{[^\n]*walk=(\d)", k.ir)
    want = ["4"] * ringed["m"] + ["3"] * ringed["n"]
    assert sorted(walks) == sorted(want * n), walks
    assert k.ir.count(f"tile_ring={stages}") == (4 * ringed["m"] + 3 * ringed["n"]) * n
    # a dot the walk ring took says no reason the K-loop ring left it (the walk is its ring)
    assert not re.search(r"ring_why=[^\n]*tile_ring=|tile_ring=[^\n]*ring_why=", k.ir)
    # the first dot of each walk waits and issues; the others read landed tiles
    assert k.ir.count("ring_ready") == (3 * ringed["m"] + 2 * ringed["n"]) * n
    assert k.ir.count("accumulator registers per thread on mma.sync") == \
        (2 - len(want)) * n
    # one copy of each block a walk reads in both orders (Q and dO; K): the dot of its
    # transpose reads the same tile (passes/tc/walk_ring.py, _share_transposed)
    assert k.ir.count("b_tile_of=ref") == (2 * ringed["m"] + ringed["n"]) * n
    if arch == "sm_90a":
        assert len(re.findall(r"tma=\[box\([^]]*\), box\([^]]*\)\]", k.ir)) == len(walks)
    # dV += P^T dO left in flight until dS^T Q's wait (walk_ring.py); ptxas keeps every wgmma
    # asynchronous
    assert k.ir.count("wg_defer=ref") == (n * ringed["m"] if arch == "sm_90a" else 0)
    # each walk's dO V^T issued right behind Q K^T, one wait for both (walk_ring.py)
    wg = 2 * n if arch == "sm_90a" else 0
    assert k.ir.count("wg_wait_at=ref") == k.ir.count("zero_acc") == wg
    assert not re.search(r"\(C75\d\d\)", k.log), k.log
    # the key block's walk reads the query rows' logsumexp and delta after its first and third
    # dots: both loads are issued before the first (passes/tc/walk_loads.py)
    assert k.ir.count("early='before the first ring dot'") == 2 * n * ringed["m"]
    loops = re.findall(r"for \(i32 (start_([mn])_\d+)", k.source)
    assert len(loops) == 2 * n
    for iv, axis in loops:
        if ringed[axis]:
            body = _walk_body(k.source, iv)
            assert body.count("__syncthreads()") == 1, (iv, body.count("__syncthreads()"))
            assert body.count("newt_mbar_wait" if arch == "sm_90a" else "cp_async_wait") == 1
        if arch == "sm_90a":    # Q K^T and dO V^T; then dV and dK, or dQ
            assert body.count("newt_wgmma_wait<0>()") == 2


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_forward_and_preprocess_compile_without_spills(arch):
    """The AOT entries (forward at D = 64 causal, preprocess at D = 128) and the forward at
    D = 128 at its benchmark configuration (4 stages, non-causal)."""
    entries = [e for e in ex.AOT if e["fn"] is not ex._attn_bwd]
    cfg = ex.fwd_example.config_for(128, False)
    entries.append(dict(entries[0], constexprs=dict(HEAD_DIM=128, STAGE=1, EVEN_N=True,
                                                    BLOCK_M=cfg["BLOCK_M"],
                                                    BLOCK_N=cfg["BLOCK_N"]),
                        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))
    for e in entries:
        k = newt.compile(e["fn"], e["signature"], e["constexprs"], arch=arch,
                         num_warps=e["num_warps"], num_stages=e.get("num_stages", 3))
        assert k.n_spills == 0 and k.local_bytes == 0, (e["fn"].__name__, k.log)


# ----------------------------------------------------------------------------- benchmark logic
# benchmarks/bench_attention_train.py times on a GPU only; its checks and bookkeeping run here
# on the interpreter with a fake timer.

def _bench():
    return common.load_file(os.path.join(ROOT, "benchmarks", "bench_attention_train.py"),
                            "newt_bench_attention_train")


def test_bench_sizes_and_flops():
    b = _bench()
    for quick in (False, True):
        shapes = b.sizes(quick)
        assert {N for _, _, N, _ in shapes} == ({1024, 4096} if quick else {1024, 4096, 16384})
        assert {D for *_, D in shapes} == {64, 128}
        assert all(B * H * N >= 16384 for B, H, N, _ in shapes)
    assert b.flops(2, 3, 100, 64, False, False) == 4.0 * 2 * 3 * 100 * 100 * 64
    assert b.flops(2, 3, 100, 64, True, True) == 4.0 * 2 * 3 * 100 * 100 * 64 * 2.5 / 2


def test_bench_logic_on_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    ks = {"newt": (ex._attn_fwd_train, ex._attn_bwd_preprocess, ex._attn_bwd)}
    rows = b.measure(b.sizes(tiny=True), dev="cpu", bench=lambda fn: (fn(), 1.0)[1],
                     providers=ks, sync=lambda: None, fwd_config=ex.SMALL_FWD_CONFIG,
                     bwd_config=ex.SMALL_BWD_CONFIG, show_registers=False)
    assert [r["workload"].split()[1] for r in rows] == ["fwd", "bwd", "fwd", "bwd"]
    for r in rows:
        assert r["errors"] == {}, r
        assert r["newt"] is not None and r["torch"] is not None and r["triton"] is None
    assert rows[0]["newt"] == pytest.approx(b.flops(1, 2, 40, 16, False, False) / 1e-3 / 1e12)
    assert "newt/torch 1.00x" in b.format_row(rows[1])


def test_bench_reports_a_wrong_backward(monkeypatch):
    """A backward that fails (here: the wrong kernel launched) is reported, never timed."""
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    b = _bench()
    ks = {"newt": (ex._attn_fwd_train, ex._attn_bwd_preprocess, ex._attn_bwd_preprocess)}
    rows = b.measure(b.sizes(tiny=True)[:1], dev="cpu", bench=lambda fn: (fn(), 1.0)[1],
                     providers=ks, sync=lambda: None, fwd_config=ex.SMALL_FWD_CONFIG,
                     bwd_config=ex.SMALL_BWD_CONFIG, show_registers=False)
    assert rows[0]["newt"] is not None and rows[1]["newt"] is None
    assert "newt" in rows[1]["errors"]


def test_bench_registers_report_without_gpu(monkeypatch):
    """The benchmark's register report compiles the GPU configuration here (warmup without a
    driver compiles for sm_90a), D = 64, causal: nothing spills."""
    if torch.cuda.is_available():
        pytest.skip("the report is the GPU run's")
    monkeypatch.setattr(newt.options.flags, "interpret", False)
    b = _bench()
    q, k, v, do = (torch.randn(1, 2, 256, 64, dtype=torch.float16) for _ in range(4))
    lse = torch.empty(1, 2, 256)
    regs = b.registers(ex, q, k, v, torch.empty_like(q), lse, do, True, 0.125)
    text = regs["fwd"] + " " + regs["bwd"]
    assert "?" not in text and text.count("r/0s") == 3, text
