"""PASSES names every pass that runs (no pass runs hidden inside another), and NEWT_DEBUG=2
prints the IR after each of them (no GPU, no NVRTC: frontend -> passes)."""
import newt
import newt.language as nl
import newt.passes as P
from newt import compiler, dtypes
from newt.frontend import build_ir
from newt.options import Options


@newt.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    acc = nl.zeros([BM, BN], dtype=nl.float32)
    for k in range(0, K, BK):
        a = nl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = nl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += nl.dot(a, b)
    nl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(nl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}


def _ir():
    spec = {p: {"divisible_by_16": True} for p in SIG}
    fn = build_ir(_mm.fn, {k: dtypes.from_signature(v) for k, v in SIG.items()},
                  {"BM": 128, "BN": 128, "BK": 64}, spec)
    compiler._apply_specialization(fn, spec)
    fn.attrs["num_warps"] = 8
    return fn


def test_passes_are_named_once_and_called_with_fn_and_options():
    names = [n for n, _ in P.PASSES]
    assert len(names) == len(set(names))
    for want in ("dot_ring", "dot_tma", "layout", "dot_rows", "tile_loads", "ring_tma",
                 "store_tma", "smem", "persistent"):
        assert want in names


def test_debug_level_2_prints_the_ir_after_every_pass(monkeypatch, capsys):
    monkeypatch.setattr(newt.options.flags, "debug_level", 2)
    P.run_passes(_ir(), Options(arch="sm_90a", num_warps=8, num_stages=3))
    err = capsys.readouterr().err
    for name, _ in P.PASSES:
        assert f"// ===== newt IR after pass {name}: _mm" in err
    # each decision shows up after the pass that makes it, not before
    # (the kernel's `acc += dot` on recomputed pointers is the TMA ring's: tc/canonical.py)
    for name, mark in (("dot_ring", "ring_role="),
                       ("dot_tma", "D=2, tma)"), ("layout", "layout=mma_acc("),
                       ("store_tma", "tma_store")):
        before, after = err.split(f"after pass {name}: _mm", 1)
        assert mark not in before and mark in after, name


def test_debug_level_1_prints_no_pass_by_pass_ir(monkeypatch, capsys):
    monkeypatch.setattr(newt.options.flags, "debug_level", 1)
    P.run_passes(_ir(), Options(arch="sm_90a", num_warps=8, num_stages=3))
    assert "after pass" not in capsys.readouterr().err
