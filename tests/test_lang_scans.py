"""nl.reduce and nl.associative_scan with user @newt.jit combine functions (one operand and
tuples of two, a non-commutative one, axis 0 / 1 / None, reverse, keep_dims, odd sizes under
masks), nl.cumprod, nl.reduce_or and nl.map_elementwise, against torch on the interpreter, the CPU emulation of the generated
code and the GPU; the kernels compiled with NVRTC for sm_80 and sm_90a."""
import pytest
import torch

import newt
import newt.language as nl
from lang_helpers import NVRTC_ARCHS, nan_like, nvrtc, where  # noqa: F401


@newt.jit
def add_fn(a, b):
    return a + b


@newt.jit
def max_fn(a, b):
    return nl.maximum(a, b)


@newt.jit
def argmax_fn(v0, i0, v1, i1):
    take = (v1 > v0) | ((v1 == v0) & (i1 < i0))
    return nl.where(take, v1, v0), nl.where(take, i1, i0)


@newt.jit
def affine_fn(a0, b0, a1, b1):
    # composition of x -> a*x + b maps: associative, not commutative
    return a1 * a0, a1 * b0 + b1


@newt.jit
def scan_kernel(x_ptr, y_ptr, o_ptr, p_ptr, M, N, AXIS: nl.constexpr, FN: nl.constexpr,
                REV: nl.constexpr, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    y = nl.load(y_ptr + offs, mask=mask, other=0.0)
    if FN == "add":
        r = nl.associative_scan(x, AXIS, add_fn, reverse=REV)
        nl.store(o_ptr + offs, r, mask=mask)
    else:
        a, b = nl.associative_scan((x, y), AXIS, affine_fn, reverse=REV)
        nl.store(o_ptr + offs, a, mask=mask)
        nl.store(p_ptr + offs, b, mask=mask)


def _affine_ref(a, b, axis, rev):
    if rev:
        a, b = a.flip(axis), b.flip(axis)
    A, B = a.clone(), b.clone()
    for i in range(1, a.shape[axis]):
        pa, pb = A.select(axis, i - 1), B.select(axis, i - 1)
        ca, cb = a.select(axis, i), b.select(axis, i)
        A.select(axis, i).copy_(ca * pa)
        B.select(axis, i).copy_(ca * pb + cb)
    return (A.flip(axis), B.flip(axis)) if rev else (A, B)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("fn", ["add", "affine"])
def test_associative_scan(where, axis, rev, fn):
    M, N, BM, BN = 5, 13, 8, 16
    x = torch.rand(M, N) + 0.5
    y = torch.randn(M, N)
    o, p = nan_like((M, N), device=where.device), nan_like((M, N), device=where.device)
    where(scan_kernel, (1,), where.t(x), where.t(y), o, p, M, N, AXIS=axis, FN=fn, REV=rev,
          BM=BM, BN=BN)
    # padded lanes hold 0: they come after the real ones, so a forward scan never sees them; a
    # reverse one starts from them (0 for add; a=0 maps for affine make both 0 up to the pad)
    xp = torch.zeros(BM, BN)
    yp = torch.zeros(BM, BN)
    xp[:M, :N], yp[:M, :N] = x, y
    if fn == "add":
        ref = (xp.flip(axis).cumsum(axis).flip(axis) if rev else xp.cumsum(axis))[:M, :N]
        torch.testing.assert_close(o.cpu(), ref, rtol=1e-5, atol=1e-5)
    else:
        ra, rb = _affine_ref(xp.double(), yp.double(), axis, rev)
        torch.testing.assert_close(o.cpu(), ra[:M, :N].float(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(p.cpu(), rb[:M, :N].float(), rtol=1e-5, atol=1e-5)


@newt.jit
def reduce_kernel(x_ptr, s_ptr, m_ptr, a_ptr, k_ptr, M, N, AXIS: nl.constexpr,
                  BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    xm = nl.where(mask, x, -float("inf"))
    if AXIS == 0:
        nl.store(s_ptr + rn, nl.reduce(x, 0, add_fn), mask=rn < N)
        nl.store(m_ptr + rn, x.reduce(0, max_fn), mask=rn < N)     # (pad 0 only adds ties)
        k = nl.reduce(x, 0, add_fn, keep_dims=True)
        nl.store(k_ptr + rn[None, :], k, mask=rn[None, :] < N)
    else:
        nl.store(s_ptr + rm, nl.reduce(x, 1, add_fn), mask=rm < M)
        nl.store(m_ptr + rm, nl.reduce(xm, 1, max_fn), mask=rm < M)
        k = nl.reduce(x, 1, add_fn, keep_dims=True)
        nl.store(k_ptr + rm[:, None], k, mask=rm[:, None] < M)
    v, i = nl.reduce((xm, offs), None, argmax_fn)
    nl.store(a_ptr, i)


@pytest.mark.parametrize("axis", [0, 1])
def test_reduce(where, axis):
    M, N, BM, BN = 7, 11, 8, 16
    x = torch.randn(M, N)
    n_out = N if axis == 0 else M
    s, m, k = [nan_like((n_out,), device=where.device) for _ in range(3)]
    a = torch.full((1,), -1, dtype=torch.int32, device=where.device)
    where(reduce_kernel, (1,), where.t(x), s, m, a, k, M, N, AXIS=axis, BM=BM, BN=BN)
    torch.testing.assert_close(s.cpu(), x.sum(axis), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k.cpu(), x.sum(axis), rtol=1e-5, atol=1e-5)
    ref_max = x.amax(0).clamp(min=0) if axis == 0 else x.amax(1)
    torch.testing.assert_close(m.cpu(), ref_max)
    flat = x.argmax()
    assert a.item() == int(flat // N) * N + int(flat % N)


@newt.jit
def affine_reduce_kernel(x_ptr, y_ptr, a_ptr, b_ptr, N, BN: nl.constexpr):
    rn = nl.arange(0, BN)
    x = nl.load(x_ptr + rn, mask=rn < N, other=1.0)     # identity maps (a=1, b=0) as padding
    y = nl.load(y_ptr + rn, mask=rn < N, other=0.0)
    a, b = nl.reduce((x, y), 0, affine_fn)
    nl.store(a_ptr, a)
    nl.store(b_ptr, b)


def test_reduce_keeps_the_order_of_a_non_commutative_function(where):
    N = 45
    x, y = torch.rand(N) + 0.5, torch.randn(N)
    a, b = nan_like((1,), device=where.device), nan_like((1,), device=where.device)
    where(affine_reduce_kernel, (1,), where.t(x), where.t(y), a, b, N, BN=64)
    ra, rb = _affine_ref(x.double()[None], y.double()[None], 1, False)
    torch.testing.assert_close(a.cpu(), ra[0, -1:].float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.cpu(), rb[0, -1:].float(), rtol=1e-5, atol=1e-5)


@newt.jit
def cumprod_kernel(x_ptr, o_ptr, n, REV: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=1)
    nl.store(o_ptr + offs, nl.cumprod(x, 0, reverse=REV), mask=offs < n)


@pytest.mark.parametrize("dt", [torch.float32, torch.int32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rev", [False, True])
def test_cumprod(where, dt, rev):
    n = 29
    if dt == torch.int32:
        x = torch.randint(-3, 4, (n,), dtype=torch.int32)
        x[x == 0] = 2
    else:
        x = (torch.rand(n) + 0.6).to(dt)
    out_dt = torch.float32 if dt == torch.bfloat16 else dt     # Triton's bf16 promotion
    out = torch.full((n,), 77, dtype=out_dt, device=where.device)
    where(cumprod_kernel, (1,), where.t(x), out, n, REV=rev, BLOCK=32)
    xd = x.double()
    ref = xd.flip(0).cumprod(0).flip(0) if rev else xd.cumprod(0)
    if dt == torch.int32:
        ref = ((ref.long() + 2 ** 31) % 2 ** 32 - 2 ** 31).int()
        assert torch.equal(out.cpu(), ref)
    else:
        torch.testing.assert_close(out.cpu(), ref.float(), rtol=1e-4, atol=1e-4)


def test_combine_fn_errors():
    @newt.jit
    def two(a, b):
        return a, b

    @newt.jit
    def k(x_ptr, B: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, B))
        nl.store(x_ptr + nl.arange(0, B), nl.associative_scan(x, 0, two))

    with pytest.raises(newt.CompilationError, match="returned 2 value"):
        newt.compile(k, {"x_ptr": "*fp32"}, {"B": 16})


@pytest.mark.parametrize("arch", NVRTC_ARCHS)
def test_scan_kernels_compile(arch):
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "o_ptr": "*fp32", "p_ptr": "*fp32", "M": "i32",
           "N": "i32"}
    nvrtc(scan_kernel, sig, {"AXIS": 1, "FN": "affine", "REV": True, "BM": 8, "BN": 64}, arch)
    sig = {"x_ptr": "*fp32", "s_ptr": "*fp32", "m_ptr": "*fp32", "a_ptr": "*i32",
           "k_ptr": "*fp32", "M": "i32", "N": "i32"}
    k = nvrtc(reduce_kernel, sig, {"AXIS": 0, "BM": 16, "BN": 64}, arch)
    assert "nt_combine_argmax_fn" in k.source
    nvrtc(map_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "p_ptr": "*i32", "n": "i32"},
          {"BLOCK": 256}, arch)


@newt.jit
def clipped_fn(x, lo):
    # per-element control flow on scalars: a runtime `if` inside the scalar function
    r = x
    if x < lo:
        r = lo * 2.0
    return r, (x > 0).to(nl.int32)


@newt.jit
def map_kernel(x_ptr, o_ptr, p_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    r, pos = nl.map_elementwise(clipped_fn, x, -0.5)
    nl.store(o_ptr + offs, r, mask=offs < n)
    nl.store(p_ptr + offs, pos, mask=offs < n)


def test_map_elementwise(where):
    n = 37
    x = torch.randn(n)
    o = nan_like((n,), device=where.device)
    p = torch.full((n,), 7, dtype=torch.int32, device=where.device)
    where(map_kernel, (1,), where.t(x), o, p, n, BLOCK=64)
    assert torch.equal(o.cpu(), torch.where(x < -0.5, torch.tensor(-1.0), x))
    assert torch.equal(p.cpu(), (x > 0).int())


@newt.jit
def reduce_or_kernel(x_ptr, r_ptr, c_ptr, b_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0)
    nl.store(r_ptr + rm, nl.reduce_or(x, 1), mask=rm < M)
    nl.store(c_ptr + rn[None, :], x.reduce_or(0, keep_dims=True), mask=rn[None, :] < N)
    nl.store(b_ptr, nl.reduce_or(x < -(2 ** 30), None).to(nl.int32))


def test_reduce_or(where):
    """Triton's nl.reduce_or (and the method) over rows, columns and all of a masked block."""
    M, N = 7, 11
    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (M, N), dtype=torch.int32)
    r, c = [torch.full((n,), -7, dtype=torch.int32, device=where.device) for n in (M, N)]
    b = torch.full((1,), -7, dtype=torch.int32, device=where.device)
    where(reduce_or_kernel, (1,), where.t(x), r, c, b, M, N, BM=8, BN=16)
    rows, cols = x[:, 0].clone(), x[0].clone()
    for j in range(1, N):
        rows |= x[:, j]
    for i in range(1, M):
        cols |= x[i]
    assert torch.equal(r.cpu(), rows) and torch.equal(c.cpu(), cols)
    assert b.item() == int(bool((x < -2 ** 30).any()))
