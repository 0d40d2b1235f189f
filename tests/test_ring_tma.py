"""The ring TMA pass (newt/passes/ring_tma.py) on the fused attention kernel: which maps its K
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
from newt.passes.ring_tma import BIG  # noqa: E402
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
