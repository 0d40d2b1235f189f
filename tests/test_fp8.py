"""8-bit floats, nl.float8e4nv (torch.float8_e4m3fn) and nl.float8e5 (torch.float8_e5m2): every
code decoded, fp32 values encoded (round to nearest even, saturating to the largest finite value,
NaN kept), bitcasts, nl.where, masked loads with `other`, and nl.dot on fp8 blocks (every pair
of fp8 types, through fp16, which holds every fp8 value exactly) against torch, on the
interpreter and the GPU; the generated code's software conversions (sm_80, and the CPU
emulation) against torch; what sm_90a's PTX uses; arithmetic on fp8 as a CompilationError."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import check

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
_ids = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}


def _ids_of(d):
    return _ids.get(d, str(d))


@newt.jit
def widen_kernel(x_ptr, y_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(y_ptr + offs, nl.load(x_ptr + offs, mask=m).to(nl.float32), mask=m)


@newt.jit
def narrow_kernel(x_ptr, y_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(y_ptr + offs, nl.load(x_ptr + offs, mask=m).to(y_ptr.dtype.element_ty), mask=m)


def _edge_values():
    """fp32 values around every rounding and saturation boundary of both formats."""
    special = [0.0, -0.0, 448.0, 449.0, 463.9, 464.0, 464.1, 480.0, 1e6, -1e6, float("inf"),
               -float("inf"), float("nan"), 57344.0, 61439.0, 61440.0, 61441.0, 7e4, 2 ** -6,
               2 ** -7, 2 ** -9, 2 ** -10, 3 * 2 ** -11, 2 ** -14, 2 ** -16, 2 ** -17,
               3 * 2 ** -18, 1.0625, 1.1875, 1.125 + 2 ** -20, 1e-30]
    g = torch.Generator().manual_seed(0)
    return torch.cat([torch.tensor(special), -torch.tensor(special),
                      torch.randn(3000, generator=g) * 30,
                      torch.randn(1000, generator=g) * 1e-3,
                      torch.randn(1000, generator=g) * 2e4])


def _reference(x, fdt):
    """torch's conversion with the saturation cvt.rn.satfinite applies (torch keeps e5m2's inf)."""
    m = torch.finfo(fdt).max
    return x.float().clamp(-m, m).to(fdt)


def _same_codes(got, want):
    """Equal bytes, NaN compared as NaN (its sign and payload are not part of the contract)."""
    g, w = got.float(), want.float()
    assert torch.equal(g.isnan(), w.isnan())
    keep = ~w.isnan()
    assert torch.equal(got.view(torch.uint8)[keep], want.view(torch.uint8)[keep])


@pytest.mark.parametrize("fdt", FP8, ids=_ids_of)
def test_every_code_decodes(target, device, fdt):
    codes = torch.arange(256, dtype=torch.uint8).view(fdt).to(device)
    out = torch.full((256,), 7.0, device=device)
    widen_kernel[(2,)](codes, out, 256, BLOCK=128)
    torch.testing.assert_close(out.cpu(), codes.cpu().float(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("fdt", FP8, ids=_ids_of)
def test_encode_rounds_to_even_and_saturates(target, device, fdt):
    x = _edge_values().to(device)
    n = x.numel()
    y = torch.full((n + 7,), 1.0, dtype=fdt, device=device)   # the tail stays untouched
    narrow_kernel[(newt.cdiv(n, 256),)](x, y, n, BLOCK=256)
    _same_codes(y[:n].cpu(), _reference(x.cpu(), fdt))
    assert (y[n:].float() == 1.0).all()


@newt.jit
def convert_kernel(x_ptr, h_ptr, b_ptr, i_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m, other=2.0)
    nl.store(h_ptr + offs, x.to(nl.float16), mask=m)                  # exact
    nl.store(b_ptr + offs, x.to(nl.bfloat16), mask=m)                 # exact
    nl.store(i_ptr + offs, x.to(nl.int8, bitcast=True), mask=m)       # the byte itself


@pytest.mark.parametrize("fdt", FP8, ids=_ids_of)
def test_widening_casts_are_exact_and_bitcast_is_the_byte(target, device, fdt):
    n = 301
    x = (torch.randn(n) * 8).to(fdt).to(device)
    h = torch.full((n,), float("nan"), dtype=torch.float16, device=device)
    b = torch.full((n,), float("nan"), dtype=torch.bfloat16, device=device)
    i = torch.full((n,), 7, dtype=torch.int8, device=device)
    convert_kernel[(newt.cdiv(n, 128),)](x, h, b, i, n, BLOCK=128)
    check(h, x.half())
    check(b, x.bfloat16())
    assert torch.equal(i.cpu(), x.cpu().view(torch.int8))


@newt.jit
def select_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m, other=0.0)
    y = nl.load(y_ptr + offs, mask=m, other=0.0)
    # a select of fp8 values (no arithmetic), then the comparison in fp32
    pick = nl.where(x.to(nl.float32) > y.to(nl.float32), x, y)
    nl.store(out_ptr + offs, pick, mask=m)


@pytest.mark.parametrize("fdt", FP8, ids=_ids_of)
def test_where_selects_fp8_values(target, device, fdt):
    n = 1000
    x, y = ((torch.randn(n) * 4).to(fdt).to(device) for _ in range(2))
    out = torch.full((n,), 3.0, dtype=fdt, device=device)
    select_kernel[(newt.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    assert torch.equal(out.cpu().view(torch.uint8),
                       torch.maximum(x.float(), y.float()).cpu().to(fdt).view(torch.uint8))


@newt.jit
def fp8_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr,
                      BK: nl.constexpr):
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    acc = nl.zeros([BM, BN], dtype=nl.float32)
    for k0 in range(0, K, BK):
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k0 + offs_k)[None, :] < K), other=0.0)
        b = nl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k0 + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = nl.dot(a, b, acc)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@pytest.mark.parametrize("da,db", [(torch.float8_e4m3fn, torch.float8_e4m3fn),
                                   (torch.float8_e5m2, torch.float8_e5m2),
                                   (torch.float8_e4m3fn, torch.float8_e5m2)],
                         ids=["e4m3", "e5m2", "mixed"])
@pytest.mark.parametrize("aligned", [False, True], ids=["odd", "aligned"])
def test_dot_of_fp8_blocks(target, device, da, db, aligned):
    """Odd sizes, a transposed B operand, every element of the NaN-poisoned output written. On
    sm_90a: 8-bit wgmma fed by the cp.async ring (rows not 16-byte aligned) or by TMA boxes
    (aligned rows, B's boxes transposed)."""
    if target == "interp" and aligned:
        pytest.skip("one shape on the interpreter")
    M, N, K = (45, 37, 70) if target == "interp" else (1008, 520, 784) if aligned else \
        (1000, 500, 777)
    a = torch.randn(M, K).to(da).to(device)
    b = torch.randn(N, K).to(db).to(device).t()            # [K, N], K contiguous
    c = torch.full((M, N), float("nan"), device=device)
    BM, BN, BK = (16, 16, 32) if target == "interp" else (64, 64, 32)
    fp8_matmul_kernel[(newt.cdiv(M, BM), newt.cdiv(N, BN))](
        a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=BM, BN=BN, BK=BK)
    ref = a.double() @ b.double()
    assert torch.isfinite(c).all()
    # the products are exact; 8-bit wgmma adds them with fewer mantissa bits than fp32 (on the
    # H200, 2026-11-30: max error 0.11-0.19 at K = 777-784, 0.1-0.14% of max |ref|, the same
    # errors as Triton's code for this kernel); the interpreter and the fp16 path are exact
    native = target == "cuda" and torch.cuda.get_device_capability() >= (9, 0)
    atol = 4e-3 * float(ref.abs().max()) if native else 1e-3
    torch.testing.assert_close(c.double(), ref, atol=atol, rtol=1e-4)


def test_arithmetic_on_fp8_is_a_compilation_error():
    @newt.jit
    def add_fp8(x_ptr, y_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK)
        x = nl.load(x_ptr + offs)
        nl.store(y_ptr + offs, x + x)

    with pytest.raises(newt.CompilationError) as e:
        newt.compile(add_fp8, {"x_ptr": "*fp8e4nv", "y_ptr": "*fp8e4nv"}, {"BLOCK": 64})
    msg = str(e.value)
    assert "float8e4nv" in msg and "cast them to nl.float16" in msg and "x + x" in msg


@newt.jit
def fp8_math_kernel(x_ptr, o_ptr, OP: nl.constexpr, BLOCK: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, BLOCK))
    if OP == "add":
        y = x + x
    elif OP == "exp":
        y = nl.exp(x)
    elif OP == "max":
        y = nl.max(x, axis=0)
    else:
        y = -x
    nl.store(o_ptr, nl.sum(y.to(nl.float32), axis=0))


@pytest.mark.parametrize("op", ["add", "exp", "max", "neg"])
def test_fp8_math_and_reductions_are_compilation_errors(op):
    with pytest.raises(newt.CompilationError, match="float8e5 values: cast them"):
        newt.compile(fp8_math_kernel, {"x_ptr": "*fp8e5", "o_ptr": "*fp32"},
                     {"OP": op, "BLOCK": 64})


@newt.jit
def fp8_sums_kernel(x_ptr, s_ptr, c_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    # dtype= casts the block first, so the sum and the scan run in fp32
    nl.store(s_ptr, nl.sum(x, axis=0, dtype=nl.float32))
    nl.store(c_ptr + offs, nl.cumsum(x, axis=0, dtype=nl.float32))


def test_sum_and_cumsum_with_a_dtype_take_fp8(target, device):
    x = (torch.randn(64) * 4).to(torch.float8_e5m2).to(device)
    s = torch.full((1,), float("nan"), device=device)
    c = torch.full((64,), float("nan"), device=device)
    fp8_sums_kernel[(1,)](x, s, c, BLOCK=64)
    check(s, x.float().sum().reshape(1))
    check(c, x.float().cumsum(0), atol=1e-4, rtol=1e-5)


def test_fp8_atomics_are_compilation_errors():
    @newt.jit
    def bump(o_ptr, BLOCK: nl.constexpr):
        nl.atomic_add(o_ptr + nl.arange(0, BLOCK), 1.0)

    with pytest.raises(newt.CompilationError, match="atomic_add is not supported on float8e4nv"):
        newt.compile(bump, {"o_ptr": "*fp8e4nv"}, {"BLOCK": 64})


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_generated_conversions(arch):
    """sm_90a encodes with one cvt.rn.satfinite per value; sm_80 has no fp8 instructions and
    computes the same bytes with integer code (tested against torch by the emulation below)."""
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp8e4nv", "n": "i32"}
    k = newt.compile(narrow_kernel, sig, {"BLOCK": 256}, arch=arch)
    assert ("cvt.rn.satfinite.e4m3x2.f32" in k.ptx) == (arch == "sm_90a")
    assert k.n_spills == 0 and k.local_bytes == 0
    sig = dict(sig, y_ptr="*fp8e5")
    k = newt.compile(narrow_kernel, sig, {"BLOCK": 256}, arch=arch)
    assert ("cvt.rn.satfinite.e5m2x2.f32" in k.ptx) == (arch == "sm_90a")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_fp8_matmul_compiles_without_spills(arch):
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32"}
    sig.update({p: "i32" for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                   "stride_bn", "stride_cm", "stride_cn")})
    k = newt.compile(fp8_matmul_kernel, sig, {"BM": 64, "BN": 64, "BK": 32}, arch=arch,
                     num_warps=4)
    assert ("wgmma.mma_async" if arch == "sm_90a" else "mma.sync") in k.ptx
    assert ".f16.f16" in k.ptx          # the fp8 tiles feed the fp16 tensor-core path
    assert k.n_spills == 0 and k.local_bytes == 0


@pytest.mark.parametrize("fdt", FP8, ids=_ids_of)
def test_software_conversions_in_emulation(fdt):
    """The generated code's own conversions (the integer path sm_80 runs), compiled for the
    CPU: every code decoded, the edge values encoded, against torch."""
    from test_codegen_emulator import emulate
    codes = torch.arange(256, dtype=torch.uint8).view(fdt)
    out = torch.full((256,), 7.0)
    emulate(widen_kernel, (2,), codes, out, 256, BLOCK=128)
    torch.testing.assert_close(out.cpu(), codes.cpu().float(), rtol=0, atol=0, equal_nan=True)
    x = _edge_values()
    n = x.numel()
    y = torch.full((n,), 1.0, dtype=fdt)
    emulate(narrow_kernel, (newt.cdiv(n, 256),), x, y, n, BLOCK=256)
    _same_codes(y, _reference(x, fdt))
