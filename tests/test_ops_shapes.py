"""Op suite, shapes and broadcasting: `x[:, None]` / `x[None, :]`, outer products, reshape,
expand_dims, broadcast_to, trans, permute, full/zeros/*_like, arange with an offset start, and
`.shape` as a constexpr. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import check, name, poison, rand


@newt.jit
def outer_kernel(a_ptr, b_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    a = nl.load(a_ptr + rm, mask=rm < M)
    b = nl.load(b_ptr + rn, mask=rn < N)
    out = a[:, None] * b[None, :] + a[:, None]      # [BM, 1] op [1, BN] -> [BM, BN]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    nl.store(out_ptr + rm[:, None] * N + rn[None, :], out, mask=mask)


@pytest.mark.parametrize("M,N", [(1, 1), (7, 5), (40, 70)])
@pytest.mark.parametrize("dt", [torch.float32, torch.int32, torch.float16], ids=name)
def test_outer_broadcast(target, device, dt, M, N):
    a, b = rand(M, dt, device, -100, 100), rand(N, dt, device, -100, 100)
    out = poison((M, N), dt, device)
    outer_kernel[(newt.cdiv(M, 16), newt.cdiv(N, 32))](a, b, out, M, N, BM=16, BN=32)
    wide = torch.float32 if dt == torch.float16 else dt
    ref = a.cpu().to(wide)[:, None] * b.cpu().to(wide)[None, :]
    if dt == torch.float16:
        ref = ref.half().float()
    check(out, (ref + a.cpu().to(wide)[:, None]).to(dt))


@newt.jit
def reshape_kernel(x_ptr, out_ptr, OP: nl.constexpr, M: nl.constexpr, N: nl.constexpr):
    offs = nl.arange(0, M * N)
    x = nl.load(x_ptr + offs)                       # [M*N]
    if OP == "reshape":
        y = nl.reshape(x, (M, N))
        y = y * (nl.arange(0, N)[None, :] + 1)      # proves the row-major order
        y = nl.reshape(y, (M * N,))
    elif OP == "method_reshape":
        y = x.reshape(M, N).trans().reshape(M * N)  # transpose through the method spellings
    elif OP == "trans":
        y = nl.reshape(nl.trans(nl.reshape(x, (M, N))), (M * N,))
    elif OP == "permute":
        y = nl.reshape(nl.permute(nl.reshape(x, (M, N, 1)), (2, 1, 0)), (M * N,))
    elif OP == "expand_dims":
        y = nl.reshape(nl.expand_dims(x, 0), (M * N,)) + nl.reshape(nl.expand_dims(x, 1), (M * N,))
    else:
        nl.static_assert(OP == "view")
        y = nl.view(x, (M, N)).sum(axis=1)
        y = nl.broadcast_to(y[:, None], (M, N)).reshape(M * N)
    nl.store(out_ptr + offs, y)


@pytest.mark.parametrize("op", ["reshape", "method_reshape", "trans", "permute", "expand_dims", "view"])
@pytest.mark.parametrize("M,N", [(4, 8), (16, 2), (1, 32)])
def test_reshapes(target, device, op, M, N):
    x = rand(M * N, torch.float32, device)
    out = poison(M * N, torch.float32, device)
    reshape_kernel[(1,)](x, out, OP=op, M=M, N=N)
    xs = x.cpu()
    ref = {
        "reshape": (xs.reshape(M, N) * (torch.arange(N) + 1)).reshape(-1),
        "method_reshape": xs.reshape(M, N).t().reshape(-1),
        "trans": xs.reshape(M, N).t().reshape(-1),
        "permute": xs.reshape(M, N, 1).permute(2, 1, 0).reshape(-1),
        "expand_dims": 2 * xs,
        "view": xs.reshape(M, N).sum(1)[:, None].expand(M, N).reshape(-1),
    }[op]
    check(out, ref)


@newt.jit
def transpose_tile_kernel(x_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.program_id(0) * BM + nl.arange(0, BM)
    rn = nl.program_id(1) * BN + nl.arange(0, BN)
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :],
                mask=(rm[:, None] < M) & (rn[None, :] < N))
    xt = nl.trans(x)                                  # [BN, BM]
    nl.store(out_ptr + rn[:, None] * M + rm[None, :], xt,
             mask=(rn[:, None] < N) & (rm[None, :] < M))


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.int8, torch.float64], ids=name)
def test_transpose_tiles(target, device, dt):
    M, N = 37, 70
    x = rand((M, N), dt, device)
    out = poison((N, M), dt, device)
    transpose_tile_kernel[(newt.cdiv(M, 32), newt.cdiv(N, 16))](x, out, M, N, BM=32, BN=16)
    check(out, x.cpu().t())


@newt.jit
def creation_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    a = nl.full((BLOCK,), 3, nl.int32)
    b = nl.zeros((BLOCK,), dtype=nl.float32)
    c = nl.zeros_like(x) + 1.0
    d = nl.full_like(x, 2.5)
    e = nl.arange(BLOCK, 2 * BLOCK)                  # arange with a non-zero start
    f = nl.full([2, BLOCK // 2], 7, nl.int16).reshape(BLOCK)
    nl.static_assert(x.shape[0] == BLOCK)
    nl.static_assert(len(x.shape) == 1)
    nl.store(out_ptr + offs, x * a + b + c * d + e + f)


def test_creation(target, device):
    B = 64
    x = rand(B, torch.float32, device)
    out = poison(B, torch.float32, device)
    creation_kernel[(1,)](x, out, BLOCK=B)
    check(out, x.cpu() * 3 + 2.5 + torch.arange(B, 2 * B) + 7)


@newt.jit
def broadcast_3d_kernel(x_ptr, y_ptr, out_ptr, A: nl.constexpr, B: nl.constexpr, C: nl.constexpr):
    ra = nl.arange(0, A)
    rb = nl.arange(0, B)
    rc = nl.arange(0, C)
    x = nl.load(x_ptr + ra[:, None] * B + rb[None, :])              # [A, B]
    y = nl.load(y_ptr + rc)                                        # [C]
    z = x[:, :, None] + y[None, None, :]                           # [A, B, C]
    offs = ra[:, None, None] * (B * C) + rb[None, :, None] * C + rc[None, None, :]
    nl.store(out_ptr + offs, z)


def test_broadcast_3d(target, device):
    A, B, C = 2, 4, 8
    x, y = rand((A, B), torch.float32, device), rand(C, torch.float32, device)
    out = poison((A, B, C), torch.float32, device)
    broadcast_3d_kernel[(1,)](x, y, out, A=A, B=B, C=C)
    check(out, x.cpu()[:, :, None] + y.cpu()[None, None, :])


@newt.jit
def broadcast_fn_kernel(x_ptr, y_ptr, out_ptr, BLOCK: nl.constexpr):
    r = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + r)[:, None]            # [B, 1]
    y = nl.load(y_ptr + r)[None, :]            # [1, B]
    xb, yb = nl.broadcast(x, y)                # both [B, B]
    nl.store(out_ptr + r[:, None] * BLOCK + r[None, :], xb - yb)


def test_broadcast_fn(target, device):
    B = 16
    x, y = rand(B, torch.float32, device), rand(B, torch.float32, device)
    out = poison((B, B), torch.float32, device)
    broadcast_fn_kernel[(1,)](x, y, out, BLOCK=B)
    check(out, x.cpu()[:, None] - y.cpu()[None, :])
