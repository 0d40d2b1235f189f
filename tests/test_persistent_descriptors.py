"""A persistent matmul over host TensorDescriptor arguments, written the way Triton's TMA
programs write one: descriptors made with a placeholder block shape that an autotune pre_hook
sets per config, one program per SM walking output tiles in an `nl.range(..., flatten=True,
warp_specialize=..., disallow_acc_multi_buffer=...)` loop, B read K-major and transposed in the
dot, the epilogue either stored whole or split in two halves (reshape, permute, split), fp16 or
fp8 outputs. Against torch on the interpreter and the GPU (skipped without one), and in the CPU
emulator of the generated code for sm_80 and sm_90a."""
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, os.path.dirname(__file__))
from conftest import HAS_CUDA  # noqa: E402

NAN = float("nan")


@newt.jit
def tile_walk_mm(a_d, bt_d, c_d, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                 BK: nl.constexpr, NPROG: nl.constexpr, HALVES: nl.constexpr,
                 FP8_OUT: nl.constexpr, SPECIALIZE: nl.constexpr):
    out_ty = nl.float8e4nv if FP8_OUT else nl.float16
    per_row = nl.cdiv(N, BN)
    for t in nl.range(nl.program_id(0), nl.cdiv(M, BM) * per_row, NPROG, flatten=True,
                      warp_specialize=SPECIALIZE, disallow_acc_multi_buffer=SPECIALIZE):
        row = (t // per_row) * BM
        col = (t % per_row) * BN
        acc = nl.zeros((BM, BN), dtype=nl.float32)
        for k in range(0, K, BK):
            acc = nl.dot(a_d.load([row, k]), bt_d.load([col, k]).T, acc)
        if HALVES:
            left, right = nl.split(nl.permute(nl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
            c_d.store([row, col], left.to(out_ty))
            c_d.store([row, col + BN // 2], right.to(out_ty))
        else:
            c_d.store([row, col], acc.to(out_ty))


def set_blocks(nargs):
    """The autotune pre_hook: each descriptor's block shape from the config."""
    nargs["a_d"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["bt_d"].block_shape = [nargs["BN"], nargs["BK"]]
    nargs["c_d"].block_shape = [nargs["BM"], nargs["BN"] // (2 if nargs["HALVES"] else 1)]


tuned_walk_mm = newt.autotune(
    [newt.Config({"BM": 64, "BN": 64, "BK": 32}, num_warps=4, pre_hook=set_blocks),
     newt.Config({"BM": 64, "BN": 128, "BK": 64}, num_warps=4, num_stages=2, pre_hook=set_blocks)],
    key=["M", "N", "K", "HALVES"])(tile_walk_mm)

CASES = [(torch.float16, True, False), (torch.float16, False, True),
         (torch.float8_e4m3fn, True, True), (torch.float8_e4m3fn, False, False)]
IDS = ["fp16-halves", "fp16-whole-ws", "fp8-halves-ws", "fp8-whole"]


def operands(M, N, K, dtype, device):
    a = torch.randn(M, K, device=device).to(dtype)
    bt = torch.randn(N, K, device=device).to(dtype)         # B stored K-major: (N, K)
    c = torch.full((M, N), NAN, device=device).to(dtype)
    return a, bt, c


def check(c, a, bt, scale=1.0):
    """c against the float64 product (times `scale`) rounded to c's dtype: fp8 outputs may
    differ by the rounding of an fp32 sum that lands near a rounding boundary (1/8 relative)."""
    want = (scale * (a.double() @ bt.double().T)).to(c.dtype).double()
    got = c.double()
    assert not got.isnan().any()
    rel = 0.13 if c.dtype == torch.float8_e4m3fn else 4e-3
    assert ((got - want).abs() <= rel * want.abs() + 0.02).all(), (got - want).abs().max()


@pytest.mark.parametrize("dtype,halves,ws", CASES, ids=IDS)
@pytest.mark.parametrize("where", ["interp", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAS_CUDA, reason="no CUDA device"))])
def test_autotuned_with_descriptor_block_shapes_from_the_hook(where, dtype, halves, ws,
                                                             monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", where == "interp")
    device = "cuda" if where == "cuda" else "cpu"
    M, N, K = 150, 200, 112
    a, bt, c = operands(M, N, K, dtype, device)
    descs = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (a, bt, c)]   # set by the hook
    nprog = 3

    def grid(meta):
        return (min(nprog, newt.cdiv(M, meta["BM"]) * newt.cdiv(N, meta["BN"])),)
    tuned_walk_mm[grid](*descs, M, N, K, NPROG=nprog, HALVES=halves,
                        FP8_OUT=dtype == torch.float8_e4m3fn, SPECIALIZE=ws)
    check(c.cpu(), a.cpu(), bt.cpu())


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype,halves,ws", CASES[:3], ids=IDS[:3])
def test_generated_code_emulated(monkeypatch, arch, dtype, halves, ws):
    """The generated code for sm_80 (mma.sync) and sm_90a (wgmma) run on the CPU with the
    instruction models of tests/emu_dot.py (as tests/test_dot_emulated.py does)."""
    from emu_dot import patch_emulator
    E = patch_emulator(monkeypatch, arch)
    M, N, K = 100, 150, 80             # 2 x 3 tiles over 4 programs; K ends inside a block
    a, bt, c = operands(M, N, K, dtype, "cpu")
    BM, BN, BK = 64, 64, 32
    descs = [TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(bt, [BN, BK]),
             TensorDescriptor.from_tensor(c, [BM, BN // 2 if halves else BN])]
    E.emulate(tile_walk_mm, (4,), *descs, M, N, K, BM=BM, BN=BN, BK=BK, NPROG=4, HALVES=halves,
              FP8_OUT=dtype == torch.float8_e4m3fn, SPECIALIZE=ws)
    check(c, a, bt)


@newt.jit
def made_inside_mm(a_ptr, bt_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                   BK: nl.constexpr, NPROG: nl.constexpr):
    """Descriptors made in the kernel from pointers; the output type and a compile-time branch
    on it read from the pointer's element type."""
    a_d = nl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    bt_d = nl.make_tensor_descriptor(bt_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = nl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    per_col = nl.cdiv(M, BM)
    for t in nl.range(nl.program_id(0), per_col * nl.cdiv(N, BN), NPROG, flatten=True):
        row = (t % per_col) * BM           # column-major tile order
        col = (t // per_col) * BN
        acc = nl.zeros((BM, BN), dtype=nl.float32)
        for k in range(0, K, BK):
            acc = nl.dot(a_d.load([row, k]), bt_d.load([col, k]).T, acc)
        if c_ptr.dtype.element_ty == nl.float8e4nv:
            acc = acc * 0.25
        c_d.store([row, col], acc.to(c_ptr.dtype.element_ty))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e4m3fn], ids=str)
@pytest.mark.parametrize("where", ["interp", "emu", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAS_CUDA, reason="no CUDA device"))])
def test_descriptors_made_in_the_kernel(where, dtype, monkeypatch):
    # Triton's programs set one for in-kernel descriptors; newt's need no scratch memory
    newt.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    M, N, K = 100, 90, 72
    a, bt, c = operands(M, N, K, dtype, "cuda" if where == "cuda" else "cpu")
    kw = dict(BM=64, BN=32, BK=32, NPROG=3)
    if where == "emu":
        if shutil.which("g++") is None:
            pytest.skip("no host C++ compiler")
        from emu_dot import patch_emulator
        E = patch_emulator(monkeypatch)
        E.emulate(made_inside_mm, (3,), a, bt, c, M, N, K, **kw)
    else:
        monkeypatch.setattr(newt.options.flags, "interpret", where == "interp")
        made_inside_mm[(3,)](a, bt, c, M, N, K, **kw)
    newt.set_allocator(None)
    check(c.cpu(), a.cpu(), bt.cpu(), 0.25 if dtype == torch.float8_e4m3fn else 1.0)
