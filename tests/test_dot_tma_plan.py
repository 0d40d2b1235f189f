"""The TMA decision of newt/passes/tc/dot_tma.py on the CPU: which rings take TMA boxes, the map
recipes handed to the launcher, the refusals (with their reason in the printed IR), and the
launcher-side map building of newt/runtime/tensormap.py. GPU correctness: the GPU test suite
and benchmarks/bench_matmul.py; CPU correctness of the generated code: test_dot_emulated.py."""
import os
import sys

import pytest

import newt
import newt.language as nl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

NAMES = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk",
         "stride_bn", "stride_cm", "stride_cn")


def _spec(aligned=True):
    spec = {p: {"divisible_by_16": True} for p in ("a_ptr", "b_ptr", "c_ptr")}
    spec.update({p: {"divisible_by_16": aligned} for p in ("M", "N", "K", "stride_am",
                                                          "stride_bk", "stride_cm")})
    spec.update({p: {"equal_to_1": True} for p in ("stride_ak", "stride_bn", "stride_cn")})
    return spec


def _compile(kernel, arch="sm_90a", aligned=True, dt="fp16", **cx):
    sig = {p: ("*" + dt if p.endswith("ptr") else "i32") for p in NAMES}
    cx = dict(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8), **cx)
    return newt.compile(kernel, sig, cx, arch=arch, num_warps=8, num_stages=4,
                        specialization=_spec(aligned))


def _tutorial():
    import bench_matmul as bm
    return bm.example().matmul_kernel


def test_tutorial_matmul_takes_tma_with_the_right_recipes():
    k = _compile(_tutorial(), ACTIVATION="leaky_relu")
    a, b, c = k.tma_maps
    # C: the epilogue's tile leaves by boxes (passes/tc/store_tma.py), the store's mask bounds
    # being the extents; optional: the kernel tests its arguments before it reads the map
    assert (c["ptr_name"], c["rows"][2], c["cols"][2], c["row_stride"][2], c["optional"]) == \
        ("c_ptr", "M", "N", "stride_cm", True)
    # A: rows wrapped by `% M` (extent M), columns masked by `< K - k * BK` (extent K)
    assert (a["ptr_name"], a["rows"][2], a["cols"][2], a["row_stride"][2]) == \
        ("a_ptr", "M", "K", "stride_am")
    # B: rows masked (extent K), columns wrapped by `% N`
    assert (b["ptr_name"], b["rows"][2], b["cols"][2], b["row_stride"][2]) == \
        ("b_ptr", "K", "N", "stride_bk")
    assert (a["box_inner"], a["box_outer"], a["swizzle"]) == (64, 128, 128)
    assert (b["box_inner"], b["box_outer"], b["swizzle"]) == (64, 64, 128)
    # one A box, two B panels; issued in the persistent kernel's prologue and in its loop
    # (passes/tc/persistent.py: the 128 KB ring leaves no room for a second CTA)
    assert k.persistent and k.source.count("newt_tma_load_2d(st") == (1 + 2) * 2
    assert "nt_tmap1" in k.source and k.n_spills == 0
    assert "ring(S=4, D=3, tma)" in k.ir


@pytest.mark.parametrize("why,kw", [
    ("divisible by 16", dict(aligned=False)),         # row strides not multiples of 16 bytes
    # tf32 is computed swapped; the swapped accumulator needs BN a multiple of 16 * num_warps
    ("needs the swapped accumulator", dict(dt="fp32", BLOCK_SIZE_K=32, BLOCK_SIZE_N=64)),
])
def test_refusals_keep_cp_async_and_say_why(why, kw):
    k = _compile(_tutorial(), ACTIVATION="", **kw)
    assert not k.tma_maps and "cp.async" in k.ptx
    assert "cp.async: " in k.ir and why in k.ir


def test_sm80_never_takes_tma():
    k = _compile(_tutorial(), arch="sm_80", ACTIVATION="")
    assert not k.tma_maps and "mma.sync" in k.ptx


@newt.jit
def _column_sums(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn, BLOCK_SIZE_M: nl.constexpr, BLOCK_SIZE_N: nl.constexpr,
                 BLOCK_SIZE_K: nl.constexpr, GROUP_SIZE_M: nl.constexpr):
    """The tutorial's wrapped loads, but the rows of the product are summed: the rows past M
    (which TMA would read as zeros, the wrap as rows 0, 1, ...) reach the result."""
    pid_m = nl.program_id(0)
    pid_n = nl.program_id(1)
    offs_am = (pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = nl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_SIZE_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    offs_cn = pid_n * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)
    nl.store(c_ptr + pid_m * stride_cm + offs_cn, nl.sum(acc, axis=0), mask=offs_cn < N)


def test_wrap_reaching_a_reduction_is_refused():
    k = _compile(_column_sums)
    assert not k.tma_maps
    assert "a wrapped axis" in k.ir


def test_deuteron_matmul_source_takes_tma():
    """deuteron's generated matmul (`offs_k = start_k + arange` masks, `% M` rows, a store masked
    by `offs_m < M`) is recognised too."""
    import torch

    import deuteron as dt

    @dt.kernel
    def mm(x, y, out):
        for tile_m, tile_n in dt.tile([x.shape[0], y.shape[1]]):
            acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
            for tile_k in dt.tile(x.shape[1]):
                acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
            out[tile_m, tile_n] = acc

    x, y = torch.randn(64, 48), torch.randn(48, 80)
    src = mm.to_newt_source(x, y, torch.empty(64, 80))
    from deuteron.kernel import exec_source
    kern = exec_source(src, "matmul_kernel" if "def matmul_kernel" in src else "mm_kernel")
    names = list(kern.signature.parameters)
    sig = {p: ("*fp16" if p.endswith("ptr") else "i32") for p in names
           if p not in kern.constexpr_names}
    spec = {p: {"divisible_by_16": True} for p in sig}
    spec.update({p: {"equal_to_1": True} for p in ("stride_x1", "stride_y1", "stride_out1")})
    k = newt.compile(kern, sig, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                                     GROUP_SIZE_M=8), arch="sm_90a", num_warps=8, num_stages=4,
                     specialization=spec)
    assert len([r for r in k.tma_maps if not r.get("optional")]) == 2, k.ir
    assert k.tma_maps[0]["cols"][2] == "K" and k.tma_maps[0]["rows"][2] == "M"


def test_launch_maps_are_built_once_and_errors_name_the_argument():
    from test_dot_tma import model_encode

    from newt.errors import LaunchError
    from newt.runtime.tensormap import TensorMaps, recipe_builder
    rec = dict(ptr=0, ptr_name="a_ptr", kind="f16", rows=["param", 3, "M"],
               cols=["const", 64], row_stride=["param", 4, "stride_am"], box_inner=64,
               box_outer=128, swizzle=128, esize=2)
    maps = TensorMaps(model_encode)
    build = recipe_builder([rec], {0: 0, 3: 1, 4: 2}, maps)
    first = build((4096, 100, 64))
    assert build((4096, 100, 64)) == first and maps.built == 1
    assert build((8192, 100, 64)) != first and maps.built == 2
    assert build((4096, 0, 64)) and maps.built == 3      # an empty extent still encodes
    with pytest.raises(LaunchError, match="a_ptr"):
        build((4096 + 2, 100, 64))                       # a misaligned base address
