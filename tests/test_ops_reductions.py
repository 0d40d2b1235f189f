"""Op suite, reductions and scans: sum/max/min/argmax/argmin over axis 0, 1 or all, with and
without keep_dims, on masked 2-D blocks of every numeric dtype; narrow-int sums accumulate in
32 bits; argmax/argmin take the first index among ties; cumsum (forward, reverse); softmax and
layernorm rows of non-power-of-two length. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import check, from_i64, name, poison, rand, to_i64


@newt.jit
def reduce_kernel(x_ptr, out_ptr, M, N, OP: nl.constexpr, AXIS: nl.constexpr,
                  KEEP: nl.constexpr, OTHER: nl.constexpr, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=OTHER)
    if OP == "sum":
        r = nl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "max":
        r = nl.max(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "min":
        r = nl.min(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "argmax":
        r = nl.argmax(x, axis=AXIS, keep_dims=KEEP)
    else:
        nl.static_assert(OP == "argmin")
        r = nl.argmin(x, axis=AXIS, keep_dims=KEEP)
    if AXIS == 0:  # results along the kept axis
        if KEEP:
            nl.store(out_ptr + rn[None, :], r, mask=rn[None, :] < N)
        else:
            nl.store(out_ptr + rn, r, mask=rn < N)
    else:
        if KEEP:
            nl.store(out_ptr + rm[:, None], r, mask=rm[:, None] < M)
        else:
            nl.store(out_ptr + rm, r, mask=rm < M)


def _ref(op, x, axis):
    if op == "sum":
        return x.sum(axis)
    if op in ("max", "min"):
        return x.amax(axis) if op == "max" else x.amin(axis)
    return x.argmax(axis) if op == "argmax" else x.argmin(axis)


def _pad_value(op, dt):
    """What masked-off lanes load: a value that cannot win the reduction."""
    if op == "sum":
        return 0
    low = op in ("max", "argmax")
    if dt.is_floating_point:
        return float("-inf") if low else float("inf")
    return 0 if low else 127  # integer data is drawn from [1, 100)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", ["sum", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("M,N", [(1, 7), (5, 33), (16, 16)])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16, torch.float64,
                                torch.int32, torch.int8, torch.uint8, torch.int64], ids=name)
def test_axis_reductions(target, device, dt, M, N, op, axis, keep):
    if (M, N) == (16, 16) and dt not in (torch.float32, torch.int32):
        pytest.skip("full 16x16 blocks: fp32 and int32 only (keeps the GPU compile count down)")
    x = rand((M, N), dt, device) if dt.is_floating_point else rand((M, N), dt, device, 1, 100)
    if M * N > 1:  # ties: the first index wins
        x.view(-1)[-1] = x.max() if op.endswith("max") else x.min()
        x.view(-1)[0] = x.view(-1)[-1]
    BM, BN = 1 << (M - 1).bit_length(), 1 << (N - 1).bit_length()
    idx_op = op.startswith("arg")
    # sums of narrow ints widen to 32 bits (int32 for signed, uint32 for unsigned)
    out_dt = torch.int32 if idx_op or (op == "sum" and dt in (torch.int8, torch.uint8)) else dt
    out = poison(N if axis == 0 else M, out_dt, device)
    reduce_kernel[(1,)](x, out, M, N, OP=op, AXIS=axis, KEEP=keep, OTHER=_pad_value(op, dt),
                        BM=BM, BN=BN)
    xs = x.cpu().to(torch.float64) if dt.is_floating_point else to_i64(x)
    ref = _ref(op, xs, axis)
    check(out, ref.to(torch.int32) if idx_op else ref.to(out_dt))


@newt.jit
def full_reduce_kernel(x_ptr, out_ptr, n, OTHER: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    nl.store(out_ptr + 0, nl.sum(x))
    nl.store(out_ptr + 1, nl.max(x))
    nl.store(out_ptr + 2, nl.min(x))
    nl.store(out_ptr + 3, nl.argmax(x, axis=0))
    nl.store(out_ptr + 4, nl.argmin(x, axis=0))
    nl.store(out_ptr + 5, x.sum(axis=0))  # method spelling


@pytest.mark.parametrize("n", [1, 7, 1000])
@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.int32, torch.int16,
                                torch.int64, torch.uint32], ids=name)
def test_full_reductions(target, device, dt, n):
    """Sums pad with 0; here max/min read only real elements since `other` is 0 and data is
    drawn so that 0 never wins: values in [1, 100) for max... so pad with 0 affects min only."""
    if dt.is_floating_point:
        x = rand(n, dt, device)
    else:
        x = rand(n, dt, device, 1, 1000)
    out = poison(6, torch.float64 if dt.is_floating_point else torch.int64, device)
    block = 1 << (n - 1).bit_length()
    # pad with the first element: it never changes max/min, and argmax/argmin keep the first index
    first = x[0].item()
    padded = torch.cat([x.cpu(), torch.full((block - n,), first, dtype=dt)]).to(device)
    full_reduce_kernel[(1,)](padded, out, block, OTHER=0, BLOCK=block)
    xs = to_i64(x) if not dt.is_floating_point else x.cpu().double()
    ref_sum = (xs.sum() + (block - n) * xs[0])
    if not dt.is_floating_point:
        ref_sum = from_i64(ref_sum, dt if dt in (torch.int64, torch.uint32) else torch.int32)
        ref_sum = to_i64(ref_sum)
    ref = torch.stack([ref_sum.to(out.dtype), xs.max().to(out.dtype), xs.min().to(out.dtype),
                       xs.argmax().to(out.dtype), xs.argmin().to(out.dtype),
                       ref_sum.to(out.dtype)])
    if dt == torch.float32:
        check(out, ref, rtol=1e-5, atol=1e-4)
    else:
        check(out, ref)


@newt.jit
def narrow_sum_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, BLOCK))
    s = nl.sum(x, axis=0)
    nl.store(out_ptr, s)


@pytest.mark.parametrize("dt", [torch.int8, torch.uint8, torch.int16, torch.bool], ids=name)
def test_narrow_int_sum_accumulates_in_32_bits(target, device, dt):
    x = torch.full((256,), 120 if dt != torch.bool else 1, dtype=torch.int64).to(dt).to(device)
    out = poison(1, torch.int32, device)
    narrow_sum_kernel[(1,)](x, out, BLOCK=256)
    check(out, torch.tensor([to_i64(x).sum().item() if dt != torch.bool else 256],
                            dtype=torch.int32))


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=name)
def test_half_sum_accumulates_in_fp32(target, device, dt):
    x = (torch.rand(1024) + 1).to(dt).to(device)
    out = poison(1, dt, device)
    narrow_sum_kernel[(1,)](x, out, BLOCK=1024)
    check(out, x.cpu().double().sum().reshape(1).to(dt))


@newt.jit
def cumsum_kernel(x_ptr, out_ptr, M, N, AXIS: nl.constexpr, REVERSE: nl.constexpr,
                  BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=0)
    nl.store(out_ptr + offs, nl.cumsum(x, axis=AXIS, reverse=REVERSE), mask=mask)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dt", [torch.float32, torch.int32, torch.float16, torch.int64], ids=name)
def test_cumsum(target, device, dt, axis, reverse):
    M, N = 5, 29
    x = rand((M, N), dt, device) if dt.is_floating_point else rand((M, N), dt, device, -50, 50)
    if dt == torch.float16:  # quarter-integers: every partial sum is exact in fp16, any order
        x = (rand((M, N), torch.int32, device, -8, 8).to(dt)) / 4
    out = poison((M, N), dt, device)
    cumsum_kernel[(1,)](x, out, M, N, AXIS=axis, REVERSE=reverse, BM=8, BN=32)
    xs = x.cpu().double() if dt.is_floating_point else to_i64(x)
    if reverse:
        ref = xs.flip(axis).cumsum(axis).flip(axis)
    else:
        ref = xs.cumsum(axis)
    check(out, ref.to(dt), **({"rtol": 1e-4, "atol": 1e-4} if dt == torch.float32 else {}))


@newt.jit
def softmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    mask = offs < n_cols
    x = nl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    z = x - nl.max(x, axis=0)
    e = nl.exp(z)
    nl.store(out_ptr + row * stride + offs, e / nl.sum(e, axis=0), mask=mask)


@pytest.mark.parametrize("M,N", [(1, 1), (3, 1000), (17, 129)])
def test_softmax_rows(target, device, M, N):
    x = rand((M, N), torch.float32, device)
    out = poison((M, N), torch.float32, device)
    softmax_kernel[(M,)](x, out, N, N, BLOCK=1 << (N - 1).bit_length(), num_warps=8)
    check(out, torch.softmax(x.cpu(), dim=1))


@newt.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, N, eps, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    mask = offs < N
    x = nl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(nl.float32)
    mean = nl.sum(x, axis=0) / N
    d = nl.where(mask, x - mean, 0.0)
    var = nl.sum(d * d, axis=0) / N
    y = d * nl.rsqrt(var + eps)
    w = nl.load(w_ptr + offs, mask=mask)
    b = nl.load(b_ptr + offs, mask=mask)
    nl.store(out_ptr + row * N + offs, y * w + b, mask=mask)


@pytest.mark.parametrize("dt", [torch.float16, torch.float32], ids=name)
def test_layernorm_rows(target, device, dt):
    M, N = 4, 1500
    x, w, b = rand((M, N), dt, device), rand(N, dt, device), rand(N, dt, device)
    out = poison((M, N), dt, device)
    layernorm_kernel[(M,)](x, w, b, out, N, 1e-5, BLOCK=2048)
    ref = torch.nn.functional.layer_norm(x.cpu().float(), (N,), w.cpu().float(), b.cpu().float(),
                                         1e-5)
    check(out, ref.to(dt), **({"rtol": 1e-4, "atol": 1e-4} if dt == torch.float32 else {}))


@newt.jit
def max_with_indices_kernel(x_ptr, v_ptr, i_ptr, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    x = nl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    v, i = nl.max(x, axis=1, return_indices=True)
    nl.store(v_ptr + rm, v)
    nl.store(i_ptr + rm, i)


def test_max_return_indices(target, device):
    x = rand((8, 32), torch.float32, device)
    x[:, 5] = 10.0
    x[:, 20] = 10.0  # tie: index 5
    v, i = poison(8, torch.float32, device), poison(8, torch.int32, device)
    max_with_indices_kernel[(1,)](x, v, i, BM=8, BN=32)
    check(v, torch.full((8,), 10.0))
    check(i, torch.full((8,), 5, dtype=torch.int32))


@newt.jit
def center_rows_kernel(x_ptr, out_ptr, s_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    """Reduce along each axis, then broadcast the results back across the block (the values
    cross threads and warps), for every num_warps."""
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    row_max = nl.max(nl.where(mask, x, -float("inf")), axis=1, keep_dims=True)   # [BM, 1]
    col_sum = nl.sum(x, axis=0)                                                  # [BN]
    y = x - row_max + col_sum[None, :]
    nl.store(out_ptr + offs, y, mask=mask)
    total = nl.sum(x, keep_dims=True)                                            # [1, 1]
    nl.store(s_ptr + rm[:, None] * 0 + rn[None, :] * 0, total, mask=(rm[:, None] == 0) & (rn[None, :] == 0))


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("M,N", [(32, 64), (3, 1000), (64, 16)])
def test_reductions_across_warps(target, device, M, N, num_warps):
    x = rand((M, N), torch.float32, device)
    out, s = poison((M, N), torch.float32, device), poison(1, torch.float32, device)
    BM, BN = 1 << (M - 1).bit_length(), 1 << (N - 1).bit_length()
    center_rows_kernel[(1,)](x, out, s, M, N, BM=BM, BN=BN, num_warps=num_warps)
    xs = x.cpu().double()
    ref = xs - xs.amax(1, keepdim=True) + xs.sum(0)[None, :]
    check(out, ref.float(), rtol=1e-5, atol=1e-4)
    check(s, xs.sum().reshape(1).float(), rtol=1e-5, atol=1e-3)
