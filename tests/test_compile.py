"""newt.compiler.compile (AOT, no GPU): Triton-tutorial-style kernels compile with NVRTC for
sm_80 and sm_90a with no register spills and no local memory, use 128-bit vector accesses,
warp shuffles in reductions, 64-bit offsets for large tensors, and show their layout
decisions in the printed IR."""
import re

import pytest

import newt
import newt.language as nl
from newt import compiler

ARCHS = ["sm_80", "sm_90a"]


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x + y, mask=mask)


@newt.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK)
    x = nl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - nl.max(x, axis=0)
    num = nl.exp(x)
    nl.store(out_ptr + row * out_stride + cols, num / nl.sum(num, axis=0), mask=cols < n_cols)


@newt.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK)
    mask = cols < N
    x = nl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(nl.float32)
    mean = nl.sum(x, axis=0) / N
    xc = nl.where(mask, x - mean, 0.0)
    rstd = 1.0 / nl.sqrt(nl.sum(xc * xc, axis=0) / N + eps)
    w = nl.load(w_ptr + cols, mask=mask).to(nl.float32)
    b = nl.load(b_ptr + cols, mask=mask).to(nl.float32)
    nl.store(y_ptr + row * stride + cols, (xc * rstd * w + b).to(nl.float16), mask=mask)


@newt.jit
def tile_kernel(a_ptr, out_ptr, M, K, stride_am, BM: nl.constexpr, BK: nl.constexpr):
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_k = nl.arange(0, BK)
    acc = nl.zeros([BM], dtype=nl.float32)
    for k in range(0, K, BK):
        ks = k + offs_k
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :],
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        acc += nl.sum(a, axis=1)
    nl.store(out_ptr + offs_m, acc, mask=offs_m < M)


@newt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, B: nl.constexpr):
    r = nl.arange(0, B)
    a = nl.load(a_ptr + r[:, None] * B + r[None, :])
    b = nl.load(b_ptr + r[:, None] * B + r[None, :])
    c = nl.dot(a, b)
    nl.store(c_ptr + r[:, None] * B + r[None, :], c)


F32_3 = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
SOFTMAX_SIG = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
               "n_cols": "i32"}
LN_SIG = {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16",
          "stride": "i32", "N": "i32", "eps": "fp32"}
TILE_SIG = {"a_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "K": "i32", "stride_am": "i32"}

KERNELS = [
    ("add", add_kernel, F32_3, {"BLOCK": 1024}, 4),
    ("softmax", softmax_kernel, SOFTMAX_SIG, {"BLOCK": 4096}, 8),
    ("layernorm", layernorm_kernel, LN_SIG, {"BLOCK": 4096}, 8),
    ("tile", tile_kernel, TILE_SIG, {"BM": 32, "BK": 64}, 4),
]


def _assert_clean(k):
    assert k.n_spills == 0, f"{k.name}: {k.n_spills} bytes of spills\n{k.log}"
    assert k.local_bytes == 0, f"{k.name}: {k.local_bytes} bytes of local memory\n{k.log}"
    assert not re.search(r"\b(ld|st)\.local\b", k.ptx), "local memory in the PTX"
    assert k.n_regs > 0


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,fn,sig,cx,warps", KERNELS, ids=[k[0] for k in KERNELS])
@pytest.mark.parametrize("scale_warps", [1, 2])
def test_no_spills_no_local_memory(arch, name, fn, sig, cx, warps, scale_warps):
    w = 4 * scale_warps          # the examples' kernels at num_warps 4 and 8
    k = compiler.compile(fn, sig, cx, arch=arch, num_warps=w)
    _assert_clean(k)
    assert k.num_threads == 32 * w
    assert f'extern "C" __global__ void __launch_bounds__({32 * w}, ' in k.source
    assert k.cubin and k.ptx.lstrip().startswith("//")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["add", "softmax", "layernorm"])
def test_128_bit_vector_path(arch, name):
    _, fn, sig, cx, w = next(k for k in KERNELS if k[0] == name)
    k = compiler.compile(fn, sig, cx, arch=arch, num_warps=w)
    assert "ld.global.v4" in k.ptx
    assert "st.global.v4" in k.ptx
    # the scalar fallback exists too, for unaligned or partially masked groups
    assert re.search(r"ld\.global\.(u|b|f)(16|32)\b", k.ptx)


def test_reductions_use_warp_shuffles_and_smem():
    k = compiler.compile(softmax_kernel, SOFTMAX_SIG, {"BLOCK": 4096}, num_warps=8)
    assert k.ptx.count("shfl.sync.bfly") >= 10          # two reductions x 5 butterfly steps
    assert "bar.sync" in k.ptx
    assert k.shared_bytes >= 2 * 8 * 4                  # one fp32 per warp, two regions
    assert "plan=full(n=4096" in k.ir


def test_single_warp_full_reduction_needs_no_shared_memory():
    k = compiler.compile(softmax_kernel, SOFTMAX_SIG, {"BLOCK": 256}, num_warps=1)
    assert k.shared_bytes == 0 and "bar.sync" not in k.ptx
    _assert_clean(k)


def test_ir_shows_layouts_and_decisions():
    k = compiler.compile(layernorm_kernel, LN_SIG, {"BLOCK": 4096}, num_warps=8)
    # fp16 memory ops at this size: 8 elements per 16 bytes, 4096 / (256 * 8) = 2 groups
    assert "layout=cyclic(vec=8, slots=16)" in k.ir
    assert "icomp" in k.ir and "contig=4096" in k.ir
    t = compiler.compile(tile_kernel, TILE_SIG, {"BM": 32, "BK": 64})
    assert "movement='recompute'" in t.ir      # offs_m[:, None] broadcast costs nothing


def test_pointer_math_of_tiles_is_recomputed_not_staged():
    k = compiler.compile(tile_kernel, TILE_SIG, {"BM": 32, "BK": 64})
    # the only shared-memory user is the row reduction
    assert "movement='smem'" not in k.ir
    _assert_clean(k)


def test_large_tensors_use_64_bit_offsets():
    spec = {"x_ptr": {"large": True}, "y_ptr": {"large": True}, "out_ptr": {"large": True}}
    big = compiler.compile(add_kernel, F32_3, {"BLOCK": 1024}, specialization=spec)
    small = compiler.compile(add_kernel, F32_3, {"BLOCK": 1024})
    assert "wide" in big.ir and "wide" not in small.ir
    # pid * BLOCK and the offsets are 64-bit C values: no 32-bit wrap past 2**31 elements
    # (an offsets array, or offsets evaluated where the accesses use them)
    big_body, small_body = (k.source.split('extern "C"')[1] for k in (big, small))
    assert re.search(r"i64 offs_\d+\[", big_body) or "(i64)(" in big_body
    # (a 64-bit multiply, on u64 so that it wraps as Triton's does: codegen/elementwise.py)
    assert re.search(r"i64 v_\d+ = \(i64\)\(\(u64\)\(pid_\d+\) \* \(u64\)\(v_\d+\)\)",
                     big.source)
    assert re.search(r"i32 offs_\d+\[", small_body) or "i64" not in small_body
    assert "mul.wide.s32" in big.ptx or "mul.lo.s64" in big.ptx


def test_equal_to_1_params_are_not_passed():
    k = compiler.compile(softmax_kernel, SOFTMAX_SIG, {"BLOCK": 1024},
                         specialization={"in_stride": {"equal_to_1": True}})
    assert [p.name for p in k.params] == ["out_ptr", "in_ptr", "out_stride", "n_cols"]
    assert "in_stride" not in k.source.split("__launch_bounds__")[1].split(")")[1].split("{")[0]


def test_signature_accepts_dtypes_and_reports_params():
    k = compiler.compile(add_kernel, {"x_ptr": nl.pointer_type(nl.float16),
                                      "y_ptr": "*fp16", "out_ptr": "*fp16", "n": nl.int32},
                         {"BLOCK": 2048}, arch="sm_80")
    assert [(p.name, p.index) for p in k.params] == [("x_ptr", 0), ("y_ptr", 1),
                                                     ("out_ptr", 2), ("n", 3)]
    assert k.options.arch == "sm_80" and "ld.global.v4" in k.ptx


def test_dot_compiles_on_tensor_cores():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}
    k = compiler.compile(dot_kernel, sig, {"B": 32})      # newt.codegen.tc.dot.emit_dot
    assert "dot_plan=" in k.ir          # (4 warps x 16 rows do not tile M = 32: the fma engine)
    _assert_clean(k)


def test_debug_flag_prints_ir_and_source(monkeypatch, capsys):
    monkeypatch.setattr(newt.options.flags, "debug", True)
    compiler.compile(add_kernel, F32_3, {"BLOCK": 256})
    err = capsys.readouterr().err
    assert "newt IR after passes: add_kernel" in err and "layout=cyclic" in err
    assert "newt CUDA C++: add_kernel" in err and "__global__" in err


def test_compile_is_exported():
    assert newt.compiler.compile is compiler.compile
    assert getattr(newt, "compile", compiler.compile) is compiler.compile


@pytest.mark.parametrize("threads,regs,blocks", [
    (256, 48, 5), (256, 40, 6), (256, 32, 8), (128, 26, 16), (1024, 64, 1), (32, 16, 32)])
def test_blocks_per_sm_from_registers(threads, regs, blocks):
    """64K registers per SM, given to warps in units of 256; 2048 threads and 32 blocks at most."""
    assert compiler._blocks_per_sm(regs, threads) == blocks


def _launch_bounds(k):
    return tuple(int(x) for x in re.search(r"__launch_bounds__\((\d+), (\d+)\)", k.source).groups())


def build_layernorm_row():
    """The fp16 layernorm row kernel, 4096 wide, 8 warps, sm_90a, specialized as the JIT does
    (pointers and ints multiples of 16)."""
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16",
           "stride": "i32", "N": "i32", "eps": "fp32"}
    spec = {k: dict(divisible_by_16=True) for k in sig if k != "eps"}
    return newt.compile(layernorm_kernel, sig, {"BLOCK": 4096}, arch="sm_90a", num_warps=8,
                        specialization=spec)


def test_memory_bound_kernel_is_raised_one_block_per_sm_when_nothing_spills(monkeypatch):
    """The fp16 layernorm row is below full occupancy as ptxas first packs it; compile() asks
    for one block per SM more and keeps it, because nothing spills."""
    build = build_layernorm_row
    k = build()
    with monkeypatch.context() as m:
        m.setattr(compiler, "_raise_occupancy", lambda ir, o, e, *first: first)
        first = build()
    have = compiler._blocks_per_sm(first.n_regs, 256)
    assert have < 8, "the test needs a kernel below full occupancy"
    assert k.n_spills == 0 and k.local_bytes == 0
    assert compiler._blocks_per_sm(k.n_regs, 256) == have + 1
    assert _launch_bounds(k) == (256, have + 1)


def test_occupancy_is_not_raised_into_spills_nor_for_dots():
    """softmax at 8 warps: a seventh block would need <= 32 registers, which spills, so the
    first compile stands; the vector add is at full occupancy already."""
    sig = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
           "n_cols": "i32"}
    k = newt.compile(softmax_kernel, sig, {"BLOCK": 4096}, arch="sm_90a", num_warps=8)
    assert k.n_spills == 0 and k.local_bytes == 0
    add = newt.compile(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                    "n": "i32"}, {"BLOCK": 1024}, arch="sm_90a", num_warps=4)
    assert compiler._blocks_per_sm(add.n_regs, 128) == 16 and add.n_spills == 0
