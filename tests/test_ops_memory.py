"""Op suite, memory: masked load/store of every dtype, `other`, scalar pointers, strided 2-D tiles
(`offs_m[:, None] * stride + offs_n[None, :]`), 1-3-D grids, num_warps 1..32, pointer offsets
beyond 2**31 elements (cuda only). Masked-off lanes must leave the poisoned output untouched."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import ALL, SIZES, check, check_untouched, name, poison, rand


@newt.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask), mask=mask)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dt", ALL, ids=name)
def test_masked_copy(target, device, dt, n):
    x = rand(n, dt, device)
    out = poison(n + 5, dt, device)  # the tail past n must stay poisoned
    copy_kernel[(newt.cdiv(n, 128),)](x, out, n, BLOCK=128)
    check(out[:n], x)
    check_untouched(out[n:])


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16, 32])
def test_num_warps(target, device, num_warps):
    n = 3000
    x = rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    copy_kernel[(newt.cdiv(n, 1024),)](x, out, n, BLOCK=1024, num_warps=num_warps)
    check(out, x)


@newt.jit
def load_other_kernel(x_ptr, out_ptr, n, OTHER: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    nl.store(out_ptr + offs, x)  # unmasked: out has room for the whole last block


@pytest.mark.parametrize("dt,other", [(torch.float32, -1.5), (torch.float16, 2.0),
                                      (torch.int32, -7), (torch.uint8, 200), (torch.int64, 3)],
                         ids=lambda v: str(v))
def test_load_other(target, device, dt, other):
    n, block = 100, 64
    x = rand(n, dt, device)
    out = poison(128, dt, device)
    load_other_kernel[(2,)](x, out, n, OTHER=other, BLOCK=block)
    check(out[:n], x)
    check(out[n:], torch.full((128 - n,), other).to(dt))


@newt.jit
def scalar_kernel(x_ptr, out_ptr, k, VALUE: nl.constexpr):
    pid = nl.program_id(0)
    v = nl.load(x_ptr + k)           # a scalar load
    nl.store(out_ptr + pid, v + pid)  # a scalar store
    nl.store(out_ptr + 4 + pid, VALUE)  # a Python number, cast to the pointee type


def test_scalar_load_store(target, device):
    x = rand(10, torch.float32, device)
    out = poison(8, torch.float32, device)
    scalar_kernel[(4,)](x, out, 3, VALUE=2.5)
    check(out, torch.cat([x[3].cpu() + torch.arange(4.0), torch.full((4,), 2.5)]))


@newt.jit
def tile_copy_kernel(x_ptr, out_ptr, M, N, sxm, sxn, som, son,
                     BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr):
    offs_m = nl.program_id(0) * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = nl.program_id(1) * BLOCK_N + nl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = nl.load(x_ptr + offs_m[:, None] * sxm + offs_n[None, :] * sxn, mask=mask)
    nl.store(out_ptr + offs_m[:, None] * som + offs_n[None, :] * son, x * 2, mask=mask)


@pytest.mark.parametrize("M,N", [(1, 1), (7, 13), (33, 65), (100, 37)])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.int16], ids=name)
def test_strided_tiles(target, device, dt, M, N, transposed):
    x = rand((N, M), dt, device).t() if transposed else rand((M, N), dt, device)
    out = poison((M, N), dt, device)
    grid = (newt.cdiv(M, 16), newt.cdiv(N, 32))
    tile_copy_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                           BLOCK_M=16, BLOCK_N=32)
    check(out, (x.cpu().to(torch.float64) * 2).to(dt))


@newt.jit
def grid3d_kernel(out_ptr, BLOCK: nl.constexpr):
    x, y, z = nl.program_id(0), nl.program_id(1), nl.program_id(2)
    nx, ny, nz = nl.num_programs(0), nl.num_programs(1), nl.num_programs(2)
    flat = (z * ny + y) * nx + x
    offs = flat * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, x * 10000 + y * 100 + z + nl.arange(0, BLOCK) * 0)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4), (1, 1, 7)])
def test_grids(target, device, grid):
    g = tuple(grid) + (1,) * (3 - len(grid))
    out = poison(g[0] * g[1] * g[2] * 4, torch.int32, device)
    grid3d_kernel[grid](out, BLOCK=4)
    z, y, x = torch.meshgrid(torch.arange(g[2]), torch.arange(g[1]), torch.arange(g[0]),
                             indexing="ij")
    ref = (x * 10000 + y * 100 + z).reshape(-1).repeat_interleave(4).to(torch.int32)
    check(out, ref)


def test_grid_callable(target, device):
    n = 1000
    x = rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (newt.cdiv(meta["n"], meta["BLOCK"]),)
    copy_kernel[grid](x, out, n, BLOCK=128)
    check(out, x)
    assert seen["BLOCK"] == 128 and seen["n"] == n


@newt.jit
def int64_offsets_kernel(x_ptr, out_ptr, base, n, BLOCK: nl.constexpr):
    offs = base + nl.program_id(0).to(nl.int64) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


def test_int64_offsets(target, device):
    n = 1000
    x = rand(n, torch.int32, device, -1000, 1000)
    out = poison(n, torch.int32, device)
    int64_offsets_kernel[(newt.cdiv(n, 128),)](x, out, 0, n, BLOCK=128)
    check(out, x.cpu() + 1)


@pytest.mark.parametrize("dt", [torch.float32], ids=name)
def test_offsets_past_2_31_elements(target, device, dt):
    """A tensor of more than 2**31 elements: offsets must be 64-bit (nano-triton overflowed)."""
    if target != "cuda":
        pytest.skip("needs ~8.6 GB of device memory; cuda only")
    n = 2 ** 31 + 4096
    if torch.cuda.mem_get_info()[0] < n * 4 * 1.2:
        pytest.skip("not enough free GPU memory")
    big = torch.zeros(n, dtype=dt, device=device)
    base = 2 ** 31 + 100
    big[base:base + 1000] = torch.arange(1000, dtype=dt, device=device)
    int64_offsets_kernel[(8,)](big, big, base, base + 1000, BLOCK=128)  # in place
    check(big[base:base + 1000], torch.arange(1000, dtype=dt) + 1)
    assert int(torch.count_nonzero(big[:base])) == 0  # nothing written below: no wrapped offsets
    del big
    torch.cuda.empty_cache()


@newt.jit
def pattern_kernel(x_ptr, out_ptr, n, PATTERN: nl.constexpr, BLOCK: nl.constexpr):
    """Access patterns that must fall off the vector path of the runtime contiguity check:
    reversed, strided, holes in the mask, and (through the arguments) misaligned bases."""
    base = nl.program_id(0) * BLOCK
    r = nl.arange(0, BLOCK)
    if PATTERN == "reversed":
        offs = base + (BLOCK - 1 - r)
        mask = offs < n
    elif PATTERN == "strided":
        offs = base + (r % 2) * (BLOCK // 2) + r // 2     # interleave the two halves
        mask = offs < n
    elif PATTERN == "holes":
        offs = base + r
        mask = (offs < n) & (offs % 3 != 1)
    else:
        nl.static_assert(PATTERN == "contiguous")
        offs = base + r
        mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


@pytest.mark.parametrize("shift", [0, 1, 3])
@pytest.mark.parametrize("pattern", ["contiguous", "reversed", "strided", "holes"])
@pytest.mark.parametrize("dt", [torch.float16, torch.float32, torch.int8, torch.float64], ids=name)
def test_access_patterns_and_misaligned_bases(target, device, dt, pattern, shift):
    n = 1000
    xbig = rand(n + 8, dt, device)
    outbig = poison(n + 8, dt, device)
    x, out = xbig[shift:shift + n], outbig[shift:shift + n]   # bases off the 16-byte grid
    pattern_kernel[(newt.cdiv(n, 256),)](x, out, n, PATTERN=pattern, BLOCK=256)
    ref = (x.cpu().to(torch.float64) + 1).to(dt)
    if pattern == "holes":
        keep = torch.arange(n) % 3 != 1
        check(out.cpu()[keep], ref[keep])
        check_untouched(out.cpu()[~keep])
    else:
        check(out, ref)
    check_untouched(outbig[:shift])
    check_untouched(outbig[shift + n:])
