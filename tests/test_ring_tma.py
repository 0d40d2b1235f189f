"""The ring TMA pass (newt/passes/tc/ring_tma.py) on the fused attention kernel: which maps its K
and V tiles get, what the launcher encodes from a call's arguments, and where the ring stays
on cp.async. CPU only: NVRTC compiles for sm_90a; a recording encoder stands in for the
driver (the emulated runs of tests/test_attention_emulated.py execute the boxes)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_attention as TA  # noqa: E402

from newt.errors import LaunchError  # noqa: E402
from newt.passes.tc.ring_tma import BIG  # noqa: E402
from newt.runtime.tensormap import TensorMaps, recipe_builder  # noqa: E402

SIG = list(TA._signature())


def _idx(name):
    return SIG.index(name)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_recipes_name_the_head_and_batch_dimensions(causal):
    """K at Q K^T (loaded transposed) and V at P V: boxes of 64 keys x 64 head-dim elements of
    a 4-D map (head dim, key, batch, head); the key extent is N_CTX (the mask's bound), the
    head extent H (off_h = pid % H), the batch unbounded; H must be >= 1 at launch."""
    k = TA._compile("sm_90a", 64, causal)
    assert len(k.tma_maps) == 2            # both loops of the causal kernel share them
    for r, t in zip(k.tma_maps, "kv"):
        assert r["ptr_name"] == t.upper() and r["kind"] == "f16" and r["esize"] == 2
        assert tuple(r["rows"]) == ("param", _idx("N_CTX"), "N_CTX")
        assert tuple(r["cols"]) == ("const", 64)
        assert tuple(r["row_stride"]) == ("param", _idx(f"stride_{t}n"), f"stride_{t}n")
        assert (r["box_inner"], r["box_outer"], r["swizzle"]) == (64, 64, 128)
        ext = [tuple(o["extent"]) for o in r["outer"]]
        st = [tuple(o["stride"])[2] for o in r["outer"]]
        assert ext == [("const", BIG), ("param", _idx("H"), "H")] and st == [f"stride_{t}z",
                                                                             f"stride_{t}h"]
        assert [tuple(p) for p in r["positive"]] == [("param", _idx("H"), "H")]


class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        from newt.runtime.driver import CUtensorMap
        return CUtensorMap()


def _values(B, H, N, D, strides):
    """The packed launch values of _attn_fwd in parameter order (pointers as addresses)."""
    v = dict(Q=0x10000, K=0x20000, V=0x30000, sm_scale=0.125, Out=0x40000, H=H, N_CTX=N)
    for t in "qkvo":
        for s, x in zip(("z", "h", "m" if t in "qo" else "n", "k"), strides):
            v[f"stride_{t}{s}"] = x
    return [v[n] for n in SIG]


def test_launcher_encodes_4d_maps_and_checks_the_divisor():
    k = TA._compile("sm_90a", 64, False)
    rec = _Recorder()
    slot_of = {i: i for i in range(len(SIG))}
    build = recipe_builder(k.tma_maps, slot_of, TensorMaps(rec))
    B, H, N, D = 2, 3, 200, 64
    # [B, N, H, D] storage seen as [B, H, N, D]: every stride passed through
    vals = _values(B, H, N, D, (N * H * D, D, H * D, 1))
    assert len(build(vals)) == 2 and len(rec.calls) == 2
    dtype, rank, addr, dims, strides, box = rec.calls[0][:6]
    assert (rank, addr) == (4, 0x20000)
    assert list(dims) == [64, N, BIG, H]
    assert list(strides) == [2 * H * D, 2 * N * H * D, 2 * D]
    assert list(box) == [64, 64, 1, 1]
    build(vals)
    assert len(rec.calls) == 2             # the same tensors again: found in the cache
    with pytest.raises(LaunchError, match="'H' is 0"):
        build(_values(B, 0, N, D, (N * H * D, D, H * D, 1)))


def test_strides_tma_cannot_take_stay_on_cp_async():
    """Head-dim strides not specialized as 1: the tiles' columns are not contiguous for TMA,
    and the ring keeps its cp.async copies (the reason is in the printed IR)."""
    k = TA._compile("sm_90a", 64, False, spec=False)
    assert 'tma_why="the tile\'s columns are not contiguous"' in k.ir
    assert not k.tma_maps and "cp.async.cg" in k.ptx and "cp.async.bulk.tensor" not in k.ptx


def test_no_ring_tma_before_hopper():
    k = TA._compile("sm_80", 64, False)
    assert "tma" not in k.ir and not k.tma_maps and "cp.async.cg" in k.ptx


# ---------------------------------------------------------------- a two-dot ring, varied
import shutil  # noqa: E402

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def _two_dots(Q, K, V, O, stride_h, stride_n, N, SHIFT: nl.constexpr, BOUND: nl.constexpr,
              D: nl.constexpr, BM: nl.constexpr, BN: nl.constexpr):
    """acc = sum over key blocks of (Q K^T) V for head program_id(1) - SHIFT: attention's loop
    without the softmax (K loaded transposed through the strides, as the tutorial does)."""
    h = nl.program_id(1) - SHIFT
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.arange(0, BN)
    offs_d = nl.arange(0, D)
    q = nl.load(Q + h * stride_h + offs_m[:, None] * stride_n + offs_d[None, :])
    acc = nl.zeros([BM, D], dtype=nl.float32)
    Kh = K + h * stride_h
    Vh = V + h * stride_h
    if BOUND == 1:
        bound = N - 1          # not a parameter: no TMA extent for it
    else:
        bound = N
    for s in range(0, N, BN):
        k = nl.load(Kh + offs_d[:, None] + (s + offs_n)[None, :] * stride_n,
                    mask=(s + offs_n)[None, :] < bound, other=0.0)
        p = nl.dot(q, k)
        v = nl.load(Vh + (s + offs_n)[:, None] * stride_n + offs_d[None, :],
                    mask=(s + offs_n)[:, None] < bound, other=0.0)
        acc = nl.dot(p.to(nl.float16), v, acc)
    nl.store(O + h * stride_h + offs_m[:, None] * stride_n + offs_d[None, :], acc)


_SIG2 = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "O": "*fp32", "stride_h": "i32",
         "stride_n": "i32", "N": "i32"}
_SPEC2 = {p: dict(divisible_by_16=p != "N", equal_to_1=False, large=False) for p in _SIG2}
_CFG2 = dict(D=32, BM=64, BN=32)


@pytest.mark.parametrize("shift,bound,why", [
    (0, 0, None),
    (1, 0, "an offset index is not provably non-negative"),
    (0, 1, "the rows' bound is not a parameter"),
], ids=["tma", "negative-head", "computed-bound"])
def test_what_the_ring_tma_pass_proves(shift, bound, why):
    """A head index that may be negative (program_id(1) - 1) would read zeros where the
    pointers read memory before the tensor; a bound that is not a parameter has no extent to
    encode: both stay on cp.async, with the reason printed. The plain form gets a 3-D map
    (head dim, key, head) with an unbounded head extent and nothing to check at launch."""
    k = newt.compile(_two_dots, _SIG2, dict(SHIFT=shift, BOUND=bound, **_CFG2), arch="sm_90a",
                     num_warps=4, num_stages=3, specialization=_SPEC2)
    assert k.n_spills == 0
    if why is None:
        assert "tma=[box(map 0, 32x32, rank 3)" in k.ir and len(k.tma_maps) == 2
        assert all(tuple(r["outer"][0]["extent"]) == ("const", BIG) for r in k.tma_maps)
        assert not any("positive" in r for r in k.tma_maps)
        assert "cp.async.bulk.tensor.3d" in k.ptx and "cp.async.cg" not in k.ptx
    else:
        assert "tma_why=" in k.ir and why in k.ir, k.ir
        assert not k.tma_maps and "cp.async.cg" in k.ptx


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("shift", [0, 1], ids=["tma", "cp-async"])
def test_two_dot_ring_emulated(monkeypatch, shift):
    """Both forms on the sm_90a emulator against torch: odd N (the key tail zero-filled by the
    map's extent, or by the masked copies) and three heads. With shift 1 the tensors passed
    start at head 1, so program 0's head index -1 reads head 0: valid memory that TMA boxes at a
    negative coordinate would have read as zeros (why the pass refuses that form)."""
    import test_dot_emulated as T
    E = T._emulator(monkeypatch, "sm_90a")
    torch.manual_seed(11)
    Hn, M, N, D = 3, 64, 75, 32
    q, kk, v = (torch.randn(Hn, 96, D).half() for _ in range(3))
    o = torch.full((Hn, 96, D), float("nan"))
    E.emulate(_two_dots, (1, Hn), *(t[shift:] for t in (q, kk, v, o)), 96 * D, D, N,
              SHIFT=shift, BOUND=0, **_CFG2, num_warps=4)
    for h in range(Hn):
        ref = (q[h, :M].float() @ kk[h, :N].float().T).half().float() @ v[h, :N].float()
        torch.testing.assert_close(o[h, :M], ref, atol=2e-2, rtol=1e-2)
    assert torch.isnan(o[:, M:]).all()      # rows past the query block: never written
