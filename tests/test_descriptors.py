"""Tensor descriptors (nl.make_tensor_descriptor, host TensorDescriptor arguments) and block
pointers (nl.make_block_ptr, nl.advance, boundary_check, padding_option) against torch, on the
interpreter and the GPU (`target`), in the CPU emulator of the generated code, and through the
compiler for sm_80 / sm_90a; plus the path a descriptor matmul takes through the tensor-core
passes (the same as the pointer form it lowers to)."""
import os
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, os.path.dirname(__file__))

NAN = float("nan")


def padded(x, r0, c0, R, C, fill=0.0):
    """x[r0:r0+R, c0:c0+C] with the elements outside x set to `fill` (offsets may be < 0)."""
    out = torch.full((R, C), fill, dtype=x.dtype)
    for i in range(R):
        for j in range(C):
            if 0 <= r0 + i < x.shape[0] and 0 <= c0 + j < x.shape[1]:
                out[i, j] = x[r0 + i, c0 + j]
    return out


# ----------------------------------------------------------------------------- kernels

@newt.jit
def desc_copy(x_ptr, y_ptr, M, N, sxm, sxn, sym, BM: nl.constexpr, BN: nl.constexpr):
    xd = nl.make_tensor_descriptor(x_ptr, [M, N], [sxm, sxn], [BM, BN])
    yd = nl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[sym, 1], block_shape=[BM, BN])
    pm, pn = nl.program_id(0), nl.program_id(1)
    yd.store([pm * BM, pn * BN], xd.load([pm * BM, pn * BN]) * 2)


@newt.jit
def desc_window(x_ptr, out_ptr, M, N, r0, c0, BM: nl.constexpr, BN: nl.constexpr,
                PAD: nl.constexpr):
    """One block at runtime offsets (r0, c0), possibly negative or past the end."""
    xd = nl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN], padding_option=PAD)
    t = nl.load_tensor_descriptor(xd, [r0, c0])
    od = nl.make_tensor_descriptor(out_ptr, [BM, BN], [BN, 1], [BM, BN])
    nl.store_tensor_descriptor(od, [0, 0], t)
    nl.static_assert(isinstance(xd, nl.tensor_descriptor))


@newt.jit
def desc_3d_atomic(x_ptr, acc_ptr, B, M, N, sb, sm, sn, BB: nl.constexpr, BM: nl.constexpr,
                   BN: nl.constexpr):
    """A 3-D descriptor over a permuted (non-contiguous) view, added atomically into a 3-D
    accumulator through another descriptor."""
    xd = nl.make_tensor_descriptor(x_ptr, [B, M, N], [sb, sm, sn], [BB, BM, BN])
    ad = nl.make_tensor_descriptor(acc_ptr, [B, M, N], [M * N, N, 1], [BB, BM, BN])
    offs = [nl.program_id(0) * BB, nl.program_id(1) * BM, nl.program_id(2) * BN]
    ad.atomic_add(offs, xd.load(offs))


@newt.jit
def bp_rows(x_ptr, y_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr, PAD: nl.constexpr):
    """Row sums of x + 1 through block pointers advanced along the columns; also stores x + 1."""
    pm = nl.program_id(0)
    xp = nl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BM, 0), (BM, BN), order=(1, 0))
    yp = nl.make_block_ptr(base=y_ptr, shape=(M, N), strides=(N, 1), offsets=(pm * BM, 0),
                           block_shape=(BM, BN), order=(1, 0))
    for i in range(0, N, BN):
        t = nl.load(xp, boundary_check=(0, 1), padding_option=PAD)
        nl.store(yp, t + 1, boundary_check=(0, 1))
        xp = nl.advance(xp, (0, BN))
        yp = nl.advance(yp, [0, BN])


@newt.jit
def bp_one_axis(x_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    """boundary_check on axis 0 only: the columns are in bounds by construction (BN == N)."""
    pm = nl.program_id(0)
    xp = nl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BM, 0), (BM, BN), (1, 0))
    op = nl.make_block_ptr(out_ptr, (M, N), (N, 1), (pm * BM, 0), (BM, BN), (1, 0))
    nl.store(op, nl.load(xp, boundary_check=(0,)) * 3, boundary_check=[0])


@newt.jit
def desc_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                BK: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    ad = nl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    bd = nl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    cd = nl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        acc = nl.dot(ad.load([pm * BM, k]), bd.load([k, pn * BN]), acc)
    cd.store([pm * BM, pn * BN], acc.to(nl.float16))


@newt.jit
def bp_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
              BK: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    ap = nl.make_block_ptr(a_ptr, (M, K), (K, 1), (pm * BM, 0), (BM, BK), (1, 0))
    bp = nl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, pn * BN), (BK, BN), (1, 0))
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        acc += nl.dot(nl.load(ap, boundary_check=(0, 1)), nl.load(bp, boundary_check=(0, 1)))
        ap = nl.advance(ap, (0, BK))
        bp = nl.advance(bp, (BK, 0))
    cp = nl.make_block_ptr(c_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    nl.store(cp, acc.to(nl.float16), boundary_check=(0, 1))


@newt.jit
def host_desc_scale(xd, yd, factor, BM: nl.constexpr, BN: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    yd.store([pm * BM, pn * BN], xd.load([pm * BM, pn * BN]) * factor)


# ----------------------------------------------------------------------------- interp and GPU

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_descriptor_copy_odd_shapes(target, device, dtype):
    M, N = 37, 45
    x = torch.randn(M, 2 * N, device=device).to(dtype)[:, ::2]     # a column stride of 2
    y = torch.full((M, N), NAN, device=device, dtype=dtype)
    desc_copy[(newt.cdiv(M, 16), newt.cdiv(N, 32))](x, y, M, N, x.stride(0), x.stride(1),
                                                    y.stride(0), BM=16, BN=32)
    torch.testing.assert_close(y, x * 2)


@pytest.mark.parametrize("r0,c0,pad", [(-5, 40, "zero"), (30, -3, "nan"), (2, 7, "zero"),
                                       (-20, -40, "nan")])
def test_descriptor_bounds_on_every_side(target, device, r0, c0, pad):
    M, N = 19, 45
    x = torch.randn(M, N, device=device)
    out = torch.full((16, 32), 7.0, device=device)
    desc_window[(1,)](x, out, M, N, r0, c0, BM=16, BN=32, PAD=pad)
    want = padded(x.cpu(), r0, c0, 16, 32, NAN if pad == "nan" else 0.0)
    torch.testing.assert_close(out.cpu(), want, equal_nan=True)


def test_descriptor_3d_strided_atomic_add(target, device):
    B, M, N = 3, 13, 21
    x = torch.randn(B, N, M, device=device).transpose(1, 2)        # strides (N*M, 1, M)
    acc = torch.randn(B, M, N, device=device)
    want = acc + x
    desc_3d_atomic[(newt.cdiv(B, 2), newt.cdiv(M, 8), newt.cdiv(N, 16))](
        x, acc, B, M, N, *x.stride(), BB=2, BM=8, BN=16)
    torch.testing.assert_close(acc, want)


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_block_pointer_loop_with_advance(target, device, pad):
    M, N = 37, 45
    x = torch.randn(M, N, device=device)
    y = torch.full_like(x, NAN)
    bp_rows[(newt.cdiv(M, 16),)](x, y, M, N, BM=16, BN=16, PAD=pad)
    torch.testing.assert_close(y, x + 1)


def test_block_pointer_checks_only_the_named_axes(target, device):
    M, N = 29, 32
    x = torch.randn(M, N, device=device)
    out = torch.full_like(x, NAN)
    bp_one_axis[(newt.cdiv(M, 8),)](x, out, M, N, BM=8, BN=32)
    torch.testing.assert_close(out, x * 3)


@pytest.mark.parametrize("kernel", [desc_matmul, bp_matmul], ids=["descriptor", "block_ptr"])
def test_matmul_through_descriptors(target, device, kernel):
    M, N, K = 37, 45, 50
    a = torch.randn(M, K, device=device).half()
    b = torch.randn(K, N, device=device).half()
    c = torch.full((M, N), NAN, device=device, dtype=torch.float16)
    kernel[(newt.cdiv(M, 32), newt.cdiv(N, 32))](a, b, c, M, N, K, BM=32, BN=32, BK=16)
    torch.testing.assert_close(c.float(), (a.double() @ b.double()).float(), atol=2e-2, rtol=2e-2)


def test_host_descriptor_arguments(target, device):
    M, N = 37, 45
    x = torch.randn(M, N + 3, device=device)[:, :N]
    y = torch.full((M, N), NAN, device=device)
    xd, yd = TensorDescriptor.from_tensor(x, [16, 32]), TensorDescriptor.from_tensor(y, [16, 32])
    host_desc_scale[(newt.cdiv(M, 16), newt.cdiv(N, 32))](xd, yd, 1.5, BM=16, BN=32)
    torch.testing.assert_close(y, x * 1.5)
    # block shapes changed in place (as autotuning pre-hooks do): a new specialization
    y.fill_(NAN)
    xd.block_shape = yd.block_shape = [8, 64]
    host_desc_scale[(newt.cdiv(M, 8), 1)](xd, yd, -2.0, BM=8, BN=64)
    torch.testing.assert_close(y, x * -2.0)


# ----------------------------------------------------------------------------- compile, emulate

ARGS = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32"}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_kernels_compile(arch):
    for k, sig, cx in [
            (bp_rows, ARGS, dict(BM=16, BN=32, PAD="nan")),
            (desc_matmul, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32",
                           "N": "i32", "K": "i32"}, dict(BM=64, BN=64, BK=32)),
            (host_desc_scale, {"xd": "tensordesc<fp32[16,32]>", "yd": "tensordesc<fp16[16,32]>",
                               "factor": "fp32"}, dict(BM=16, BN=32))]:
        sig = {n: t for n, t in sig.items() if n in k.arg_names}
        ck = newt.compile(k, sig, cx, arch=arch)
        assert ck.n_regs > 0 and ck.n_spills == 0


def test_descriptor_parameters_in_the_compiled_signature():
    """A descriptor parameter is its base pointer (at the Python index) and 2 * rank ints
    numbered after the Python parameters; a stride specialized as 1 is compiled in."""
    ck = newt.compile(host_desc_scale, {"xd": "tensordesc<fp32[16,32]>",
                                        "yd": "tensordesc<fp32[16,32]>", "factor": "fp32"},
                      dict(BM=16, BN=32), arch="sm_80",
                      specialization={"xd_stride1": dict(equal_to_1=True)})
    got = [(p.name, p.dtype.short, p.index) for p in ck.params]
    assert got == [("xd", "*fp32", 0), ("xd_shape0", "i32", 5), ("xd_shape1", "i32", 6),
                   ("xd_stride0", "i32", 7), ("yd", "*fp32", 1), ("yd_shape0", "i32", 9),
                   ("yd_shape1", "i32", 10), ("yd_stride0", "i32", 11),
                   ("yd_stride1", "i32", 12), ("factor", "fp32", 2)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_generated_code_in_the_emulator():
    from test_codegen_emulator import emulate
    M, N = 21, 37
    x = torch.randn(M, N)
    y = torch.full_like(x, NAN)
    emulate(bp_rows, (newt.cdiv(M, 16),), x, y, M, N, BM=16, BN=16, PAD="zero")
    torch.testing.assert_close(y, x + 1)
    out = torch.full((16, 32), 7.0)
    emulate(desc_window, (1,), x, out, M, N, -3, 20, BM=16, BN=32, PAD="nan")
    torch.testing.assert_close(out, padded(x, -3, 20, 16, 32, NAN), equal_nan=True)


# ----------------------------------------------------------------------------- errors

def test_errors_point_at_the_line():
    @newt.jit
    def plain_with_check(x_ptr):
        nl.load(x_ptr + nl.arange(0, 16), boundary_check=(0,))

    @newt.jit
    def nan_on_ints(x_ptr, n):
        d = nl.make_tensor_descriptor(x_ptr, [n], [1], [16], padding_option="nan")
        d.load([0])

    @newt.jit
    def bad_block(x_ptr, n):
        d = nl.make_tensor_descriptor(x_ptr, [n], [1], [12])
        d.load([0])

    @newt.jit
    def bad_axis(x_ptr, n):
        p = nl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,))
        nl.load(p, boundary_check=(1,))

    for k, sig, msg in [
            (plain_with_check, {"x_ptr": "*fp32"}, "apply to block pointers"),
            (nan_on_ints, {"x_ptr": "*i32", "n": "i32"}, "needs a floating-point tensor"),
            (bad_block, {"x_ptr": "*fp32", "n": "i32"}, "powers of two"),
            (bad_axis, {"x_ptr": "*fp32", "n": "i32"}, r"boundary_check axes must be ints in")]:
        with pytest.raises(newt.CompilationError, match=msg) as info:
            newt.compile(k, sig, {}, arch="sm_80")
        assert __file__ in str(info.value)


# ----------------------------------------------------------------------------- the fast path

@newt.jit
def ptr_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
               BK: nl.constexpr):
    """desc_matmul written by hand: what the descriptors lower to."""
    pm, pn = nl.program_id(0), nl.program_id(1)
    rm, rn = pm * BM + nl.arange(0, BM), pn * BN + nl.arange(0, BN)
    rk = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        a = nl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = nl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = nl.dot(a, b, acc)
    nl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(nl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _dot_decision(kernel):
    from newt.frontend import build_ir
    from newt.options import Options
    from newt.passes import run_passes
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
           "K": "i32"}
    spec = {n: dict(divisible_by_16=True, equal_to_1=False, large=False) for n in sig}
    fn = build_ir(kernel, sig, dict(BM=128, BN=128, BK=64), spec)
    fn.attrs.update(equal_to_1=set(), num_warps=4)      # as compiler.compile_ir sets them
    run_passes(fn, Options(arch="sm_90a", num_warps=4, num_stages=3))
    dots = [op for op in fn.walk() if op.opcode == "dot"]
    assert len(dots) == 1
    return {k: str(v) for k, v in dots[0].attrs.items() if k in ("dot_plan", "ring")}


def test_descriptor_matmul_takes_the_pointer_forms_path():
    """The descriptor matmul and the hand-written pointer form it lowers to get the same
    tensor-core decision on sm_90a (the dot plan and the operand ring, with its reason)."""
    got, want = _dot_decision(desc_matmul), _dot_decision(ptr_matmul)
    assert got == want and "dot_plan" in want


def test_block_pointer_matmul_takes_the_pointer_forms_path():
    """Block pointers moved by nl.advance are offsets the loop carries; read as affine in the
    induction variable (passes/tc/canonical.py), they take the pointer form's TMA ring, not
    the cp.async ring of a pointer that "does not advance by a loop-invariant step"."""
    got, want = _dot_decision(bp_matmul), _dot_decision(ptr_matmul)
    assert got == want and "tma" in want["ring"]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_block_pointer_matmul_emulated(monkeypatch):
    """The block-pointer matmul's generated code for sm_90a (TMA ring, folded offsets) in the
    CPU emulation: odd M, N and K multiples of 16 elements but not of the tiles (the row
    strides a TMA map needs), NaN-poisoned output."""
    from emu_dot import patch_emulator
    E = patch_emulator(monkeypatch, "sm_90a")
    M, N, K = 150, 80, 96
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), NAN).half()
    E.emulate(bp_matmul, (newt.cdiv(M, 64), newt.cdiv(N, 64)), a, b, c, M, N, K, BM=64, BN=64,
              BK=32)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@newt.jit
def _offsets_kernel(x_ptr, out_ptr, n, r, g, K, MODE: nl.constexpr):
    d = nl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16])
    pid = nl.program_id(0)
    acc = nl.zeros((16, 16), dtype=nl.float32)
    if MODE == 0:     # program ids, products, quotients, remainders, minimums, a loop from 0
        for k in range(0, K, 16):
            acc += d.load([nl.minimum(pid // 4, 3) * 16, k + pid % g])
    elif MODE == 1:   # a runtime argument may be negative: both bounds on that axis
        acc += d.load([r, 0])
    else:             # a loop from a runtime start, and a difference: both bounds on both axes
        for k in range(r, K, 16):
            acc += d.load([k, pid - 1])
    nl.store(out_ptr + nl.arange(0, 16), nl.sum(acc, axis=1))


@pytest.mark.parametrize("mode,lower_bounds", [(0, 0), (1, 1), (2, 2)])
def test_lower_bound_checks_only_where_an_offset_may_be_negative(mode, lower_bounds):
    from newt.frontend import build_ir
    from newt.ir.printer import format_function
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "r": "i32", "g": "i32", "K": "i32"}
    text = format_function(build_ir(_offsets_kernel, sig, dict(MODE=mode)))
    assert text.count("binary.ge") == lower_bounds
    assert text.count("binary.lt") == 2


@pytest.mark.parametrize("r", [-9, 5])
def test_negative_runtime_offsets_read_padding(target, device, r):
    n = 40
    x = torch.randn(n, n, device=device)
    out = torch.full((16,), NAN, device=device)
    _offsets_kernel[(1,)](x, out, n, r, 1, 16, MODE=1)
    torch.testing.assert_close(out.cpu(), padded(x.cpu(), r, 0, 16, 16).sum(1))


def test_benchmark_forms_agree_on_the_interpreter(monkeypatch):
    """benchmarks/descriptor_forms.py (the GPU timing of the three forms) checks itself."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", "descriptor_forms.py")
    spec = importlib.util.spec_from_file_location("newt_descriptor_forms", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    mod.check("cpu", small=True)
