"""A dot loop over 3-D tiles with a unit batch dim (deuteron's bmm / baddbmm with a batch block
of 1; a Triton user's `[1, BM, BK]` loads) takes the 2-D loop's ring (newt/passes/tc/
squeeze.py): its loads are squeezed into 2-D loads the ring copies, its 3-D accumulator is
carried as the dot's own. Checked on the IR, and the sm_90a code (cp.async ring + wgmma) run on
the CPU emulator against torch on odd shapes with a NaN-poisoned output."""
import os
import re
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.dirname(__file__))


@newt.jit
def bmm_unit_batch(a_ptr, b_ptr, c_ptr, B, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn,
                   BB: nl.constexpr, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    pid = nl.program_id(0)
    num_n = nl.cdiv(N, BN)
    num_m = nl.cdiv(M, BM)
    pid_n = pid % num_n
    pid_m = (pid // num_n) % num_m
    pid_b = pid // num_n // num_m
    ob = pid_b * BB + nl.arange(0, BB)
    om = pid_m * BM + nl.arange(0, BM)
    on = pid_n * BN + nl.arange(0, BN)
    acc = nl.zeros((BB, BM, BN), dtype=nl.float32)
    for k0 in range(0, K, BK):
        ok = k0 + nl.arange(0, BK)
        a = nl.load(a_ptr + ob[:, None, None] * sab + om[None, :, None] * sam
                    + ok[None, None, :] * sak,
                    mask=(ob[:, None, None] < B) & (om[None, :, None] < M)
                    & (ok[None, None, :] < K), other=0.0)
        b = nl.load(b_ptr + ob[:, None, None] * sbb + ok[None, :, None] * sbk
                    + on[None, None, :] * sbn,
                    mask=(ob[:, None, None] < B) & (ok[None, :, None] < K)
                    & (on[None, None, :] < N), other=0.0)
        d = nl.dot(nl.reshape(a, (BM, BK)), nl.reshape(b, (BK, BN)))
        acc = acc + nl.reshape(d, (BB, BM, BN))
    nl.store(c_ptr + ob[:, None, None] * scb + om[None, :, None] * scm + on[None, None, :] * scn,
             acc.to(c_ptr.dtype.element_ty),
             mask=(ob[:, None, None] < B) & (om[None, :, None] < M) & (on[None, None, :] < N))


CFG = dict(BB=1, BM=64, BN=64, BK=32)


def _compile(arch):
    sig = {p: "*fp16" for p in ("a_ptr", "b_ptr", "c_ptr")}
    spec = {p: {"divisible_by_16": True} for p in sig}
    for p in ("B", "M", "N", "K", "sab", "sam", "sbb", "sbk", "scb", "scm"):
        sig[p], spec[p] = "i32", {"divisible_by_16": True}
    for p in ("sak", "sbn", "scn"):
        sig[p], spec[p] = "i32", {"equal_to_1": True}
    return newt.compile(bmm_unit_batch, sig, CFG, arch=arch, num_warps=4, num_stages=3,
                        specialization=spec)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_unit_batch_dot_takes_the_ring_of_the_2d_loop(arch):
    ir = _compile(arch).ir
    loads = re.findall(r"= (dot_ring_load|load) [^\n]*: fp16\[([\d,]+)\]", ir)
    assert [s for k, s in loads if k == "dot_ring_load"] == ["64,32", "32,64"], loads
    assert not [s for k, s in loads if k == "load"], loads          # no 3-D load left
    dot = next(ln for ln in ir.splitlines() if re.search(r"= dot %", ln))
    assert "ring=ring(" in dot and "ring_why" not in dot, dot
    assert ": fp32[64,64]" in dot                                   # the 2-D accumulator


def test_unit_batch_dot_takes_tma_boxes_with_the_batch_as_a_bounded_dimension():
    """On sm_90a the squeezed loads are boxes of rank-3 maps: the batch index is the third
    coordinate and its mask `b < B` the map's extent there (TMA reads zeros past it)."""
    ir = _compile("sm_90a").ir
    boxes = re.findall(r"tma_box='([^']*)'", ir)
    assert len(boxes) == 2 and all("at a pid_b index < B (mask)" in b for b in boxes), boxes
    assert "ring=ring(S=3, D=2, tma)" in ir


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("M,N,K", [(70, 50, 45), (70, 80, 96)])
def test_unit_batch_dot_emulated(monkeypatch, M, N, K):
    """Rows of 45 elements take the cp.async ring, rows of 80 and 96 the TMA boxes."""
    from test_dot_emulated import _emulator
    E = _emulator(monkeypatch, "sm_90a")
    torch.manual_seed(0)
    B = 2
    a = torch.randn(B, M, K).half()
    b = torch.randn(B, K, N).half()
    c = torch.full((B, M, N), float("nan")).half()
    grid = (B * -(-M // CFG["BM"]) * -(-N // CFG["BN"]),)
    E.emulate(bmm_unit_batch, grid, a, b, c, B, M, N, K, *a.stride(), *b.stride(), *c.stride(),
              num_warps=4, **CFG)
    ref = torch.bmm(a.double(), b.double())
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    assert float((c.double() - ref).norm() / ref.norm()) < 2e-3


def test_deuteron_bmm_takes_the_tma_ring(tmp_path):
    """deuteron's `torch.baddbmm` over 3-D tiles (examples/dt_ops_matmul.py's bmm), with the
    untuned default config (batch block 1), compiles for sm_90a to the 2-D loop's TMA ring."""
    import importlib.util
    import inspect
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import dt_ops_matmul as m
    a, b = torch.randn(3, 256, 192).half(), torch.randn(3, 192, 320).half()
    cfg = m.bmm.config_for((a, b))
    assert cfg.block_sizes[0] == 1, cfg
    path = tmp_path / "dt_bmm_src.py"
    path.write_text("import newt\nimport newt.language as nl\n" + m.bmm.to_newt_source(a, b))
    spec = importlib.util.spec_from_file_location("dt_bmm_src", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = mod.bmm_kernel
    sig, sp = {}, {}
    for p in inspect.signature(k.fn).parameters:
        if p.startswith("BLOCK_SIZE_"):
            continue
        sig[p] = "*fp16" if p.endswith("ptr") else "i32"
        sp[p] = {"equal_to_1": True} if p.endswith("2") and p.startswith("stride") else \
            {"divisible_by_16": True}
    cx = dict(zip(["BLOCK_SIZE_TB", "BLOCK_SIZE_TM", "BLOCK_SIZE_TN", "BLOCK_SIZE_TK"],
                  cfg.block_sizes))
    ck = newt.compile(k, sig, cx, arch="sm_90a", num_warps=cfg.num_warps,
                      num_stages=cfg.num_stages, specialization=sp)
    assert ck.ir.count("tma)") >= 2 and "at a rest_tm index < TB (mask)" in ck.ir, ck.ir
    assert ck.n_spills == 0
