"""The epilogue of a TMA matmul that leaves the fragment without staging the fp32 accumulator:
the split in column halves (reshape (BM, 2, BN/2), permute, split) taken straight from the
fragment (newt/passes/tc/fragment_split.py), each half cast in the fragment and stored by TMA
boxes; a staging larger than the ring reusing the ring's region (passes/tc/regions.py).

The configs are those of Triton's persistent-matmul tutorial that its shared-memory accounting
fits (the ring, the fp16 C tile and the barriers under 227 KB) and newt used to reject: the
kernel is tests/test_persistent_descriptors.py's `tile_walk_mm`. Checked: the plan (compile
only), the generated code in the CPU emulator (tests/emu_dot.py) with odd M and N that the
descriptors clip, and the GPU against torch (skipped without one)."""
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.ir.layouts import AccLayout
from newt.ir.schedule import AccColumns
from newt.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, os.path.dirname(__file__))
from conftest import HAS_CUDA  # noqa: E402
from test_persistent_descriptors import check, operands, tile_walk_mm  # noqa: E402

TRITON_LIMIT = 227 * 1024


@pytest.mark.parametrize("M,N,T", [(64, 64, 128), (128, 128, 128), (128, 256, 256),
                                   (128, 64, 256)])
def test_a_column_half_is_a_run_of_the_fragment_slots(M, N, T):
    """AccColumns.slot on the layouts' Python model: slice slot s holds the element of the
    whole fragment's slot slot(s), in the same thread, shifted by `first` columns; its C form
    gives the same slots."""
    whole, half = AccLayout(M, N, T), AccLayout(M, N // 2, T)
    assert AccLayout.fits(M, N // 2, T) and half.nslots
    for first in (0, N // 2):
        cols = AccColumns(first, N // 2, N)
        c_form = cols.slot("s").replace("/", "//")
        for t in range(T):
            for s in range(half.nslots):
                row, col = divmod(half.py_flat(t, s), N // 2)
                assert whole.py_flat(t, cols.slot(s)) == row * N + first + col
                assert eval(c_form, {"s": s}) == cols.slot(s)


def outputs(M, N, dtype, device):
    """C as the first N columns of a NaN tensor whose rows are 16-byte multiples (a TMA map's
    row stride): the boxes clip at N, and the columns past it must stay NaN."""
    full = torch.full((M, -(-N // 16) * 16), float("nan"), device=device).to(dtype)
    return full, full[:, :N]


def check_c(full, c, a, bt):
    check(c.cpu(), a.cpu(), bt.cpu())
    assert full[:, c.shape[1]:].float().isnan().all()


def launch_spec(aligned=True):
    """The specialization a launch with whole-tensor descriptors of aligned 2-D tensors gets
    (runtime/descriptor_args.py): 16-byte bases and strides, unit inner strides."""
    spec = {}
    for p in ("a_d", "bt_d", "c_d"):
        spec[p] = dict(divisible_by_16=aligned)
        for s in ("shape0", "shape1", "stride0"):
            spec[f"{p}_{s}"] = dict(divisible_by_16=aligned)
        spec[f"{p}_stride1"] = dict(equal_to_1=True)
    return spec


def compile_walk(BN, BK, stages, warps, halves, c="fp16", aligned=True, arch="sm_90a"):
    BM = 128
    sig = {"a_d": f"tensordesc<fp16[{BM},{BK}]>", "bt_d": f"tensordesc<fp16[{BN},{BK}]>",
           "c_d": f"tensordesc<{c}[{BM},{BN // (2 if halves else 1)}]>",
           "M": "i32", "N": "i32", "K": "i32"}
    return newt.compile(tile_walk_mm, sig, dict(BM=BM, BN=BN, BK=BK, NPROG=132, HALVES=halves,
                                                FP8_OUT=0, SPECIALIZE=0),
                        arch=arch, num_warps=warps, num_stages=stages,
                        specialization=launch_spec(aligned))


def triton_bytes(BN, BK, stages, BM=128):
    return stages * (BM * BK + BN * BK) * 2 + BM * BN * 2 + 16 * stages


@pytest.mark.parametrize("BN,BK,stages,warps", [(256, 64, 2, 8), (128, 128, 3, 4)])
def test_halves_leave_the_fragment_by_tma_boxes(BN, BK, stages, warps):
    """Used to need 261 and 257 KB (the fp32 tile staged, then permuted through shared
    memory): now each half is a slice of the fragment, cast there, stored by boxes of one
    map, in no more shared memory than Triton's accounting."""
    assert triton_bytes(BN, BK, stages) <= TRITON_LIMIT
    k = compile_walk(BN, BK, stages, warps, 1)
    assert k.ir.count("dot_acc_cols") == 2 and "cols[0:" in k.ir and f"cols[{BN // 2}:" in k.ir
    assert "permute" not in k.ir and "gather" not in k.ir
    assert k.ir.count("tma_store %") == 2 and len(k.tma_maps) == 3     # A, B, C's halves
    assert k.shared_bytes <= triton_bytes(BN, BK, stages) and k.n_spills == 0


@newt.jit
def interleaved_mm(a_d, bt_d, c_d, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                   BK: nl.constexpr):
    """Even and odd columns (reshape (BM, BN/2, 2), no permute): not column halves."""
    row = nl.program_id(0) * BM
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        acc = nl.dot(a_d.load([row, k]), bt_d.load([0, k]).T, acc)
    even, odd = nl.split(nl.reshape(acc, (BM, BN // 2, 2)))
    c_d.store([row, 0], (even + odd).to(nl.float16))


def test_even_and_odd_columns_are_not_taken_for_halves():
    sig = {"a_d": "tensordesc<fp16[64,32]>", "bt_d": "tensordesc<fp16[64,32]>",
           "c_d": "tensordesc<fp16[64,32]>", "M": "i32", "N": "i32", "K": "i32"}
    k = newt.compile(interleaved_mm, sig, dict(BM=64, BN=64, BK=32), arch="sm_90a",
                     specialization=launch_spec())
    assert "dot_acc_cols" not in k.ir and "gather" in k.ir


def test_whole_tile_cast_in_fragment_without_tma_store():
    """Without the alignment facts a TMA map needs (cp.async ring, stores per thread), the
    16-bit tile staged after the cast counts 2 bytes an element: 128 x 256 at two stages used
    to be rejected (230 KB) for counting the fp32 tile's bytes."""
    k = compile_walk(256, 64, 2, 8, 0, aligned=False)
    assert "tma_store %" not in k.ir
    assert k.shared_bytes <= triton_bytes(256, 64, 2)


def test_fp32_staging_larger_than_the_ring_reuses_it():
    """An fp32 epilogue (per-thread stores) stages 128 x (256 + 8) x 4 = 132 KB, more than the
    96 KB of two stages: the ring's region grows to it instead of a second region."""
    k = compile_walk(256, 64, 2, 8, 0, c="fp32")
    ring = 2 * (128 + 256) * 64 * 2
    staging = 128 * (256 + 8) * 4
    assert staging > ring and k.shared_bytes < ring + staging


EMULATED = [  # (arch, BN, BK, stages, warps, halves, C dtype, K): each used to be rejected
    ("sm_90a", 128, 128, 3, 4, 1, torch.float16, 144),
    ("sm_90a", 256, 64, 2, 8, 1, torch.float16, 144),
    ("sm_90a", 256, 64, 2, 8, 0, torch.float32, 144),     # staging 132 KB > the ring's 96
    ("sm_90a", 128, 64, 2, 4, 1, torch.float16, 77),      # no TMA (K odd): staged per half
    ("sm_80", 128, 64, 2, 4, 1, torch.float16, 77),
    ("sm_90a", 256, 64, 2, 8, 1, torch.float8_e4m3fn, 144),  # 8-bit boxes of 128 columns
    ("sm_90a", 128, 128, 3, 4, 0, torch.float8_e4m3fn, 144),
    ("sm_90a", 128, 64, 2, 4, 0, torch.float8_e4m3fn, 77),   # 8-bit staging, stores per thread
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("arch,BN,BK,stages,warps,halves,cdt,K", EMULATED,
                         ids=[f"{e[0]}-{e[1]}x{e[2]}-s{e[3]}w{e[4]}-h{e[5]}-{str(e[6])[6:]}-K{e[7]}"
                              for e in EMULATED])
def test_generated_code_emulated(monkeypatch, arch, BN, BK, stages, warps, halves, cdt, K):
    from emu_dot import patch_emulator
    E = patch_emulator(monkeypatch, arch, num_stages=stages)
    BM, M, N = 128, 150, BN + 45            # 2 x 2 tiles over 3 programs, both clipped
    a, bt, _ = operands(M, N, K, torch.float16, "cpu")
    full, c = outputs(M, N, cdt, "cpu")
    descs = [TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(bt, [BN, BK]),
             TensorDescriptor.from_tensor(c, [BM, BN // 2 if halves else BN])]
    E.emulate(tile_walk_mm, (3,), *descs, M, N, K, BM=BM, BN=BN, BK=BK, NPROG=3, HALVES=halves,
              FP8_OUT=cdt == torch.float8_e4m3fn, SPECIALIZE=0, num_warps=warps)
    check_c(full, c, a, bt)


GPU_CONFIGS = [  # (BN, BK, stages, warps, halves): Triton's grid, rejected before
    (128, 128, 3, 4, 1), (128, 128, 3, 8, 1), (256, 64, 2, 4, 0), (256, 64, 2, 8, 0),
    (256, 64, 2, 4, 1), (256, 64, 2, 8, 1), (256, 64, 3, 4, 1), (256, 64, 3, 8, 1)]


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("BN,BK,stages,warps,halves", GPU_CONFIGS,
                         ids=[f"{c[0]}x{c[1]}-s{c[2]}w{c[3]}-h{c[4]}" for c in GPU_CONFIGS])
@pytest.mark.parametrize("K", [528, 517])           # TMA ring; cp.async (rows not 16-byte)
def test_new_configs_on_the_gpu(BN, BK, stages, warps, halves, K):
    BM, M, N = 128, 1000, 1500
    a, bt, _ = operands(M, N, K, torch.float16, "cuda")
    full, c = outputs(M, N, torch.float16, "cuda")
    descs = [TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(bt, [BN, BK]),
             TensorDescriptor.from_tensor(c, [BM, BN // 2 if halves else BN])]
    nprog = torch.cuda.get_device_properties(0).multi_processor_count
    tile_walk_mm[(nprog,)](*descs, M, N, K, BM=BM, BN=BN, BK=BK, NPROG=nprog, HALVES=halves,
                           FP8_OUT=0, SPECIALIZE=0, num_warps=warps, num_stages=stages)
    check_c(full, c, a, bt)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_fp32_staging_in_the_ring_on_the_gpu():
    BM, BN, BK, M, N, K = 128, 256, 64, 1000, 1500, 528
    a, bt, _ = operands(M, N, K, torch.float16, "cuda")
    full, c = outputs(M, N, torch.float32, "cuda")
    descs = [TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(bt, [BN, BK]),
             TensorDescriptor.from_tensor(c, [BM, BN])]
    tile_walk_mm[(64,)](*descs, M, N, K, BM=BM, BN=BN, BK=BK, NPROG=64, HALVES=0, FP8_OUT=0,
                        SPECIALIZE=0, num_warps=8, num_stages=2)
    check_c(full, c, a, bt)
