"""Op suite, the rest: random numbers (Triton's Philox4x32 stream, bit-exact, checked against an
independent Python-int implementation and the Random123 known answer), compiler hints,
static_assert / static_print / device_print / debug_barrier. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import check, poison, rand

M32 = 0xFFFFFFFF


def philox_ref(seed, offset, rounds=10):
    """Philox4x32 on Python ints: counter (offset lo, offset hi, 0, 0), key (seed lo, seed hi)."""
    seed &= (1 << 64) - 1
    offset &= (1 << 64) - 1 if offset < 0 or offset >= 1 << 32 else M32
    c = [offset & M32, offset >> 32, 0, 0]
    k0, k1 = seed & M32, seed >> 32
    for _ in range(rounds):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def uniform_ref(u):
    v = u - (1 << 32) if u >= 1 << 31 else u      # as int32
    v = -v - 1 if v < 0 else v
    return (torch.tensor(float(v), dtype=torch.float32)
            * torch.tensor(4.6566127342e-10, dtype=torch.float32)).item()


@newt.jit
def random_kernel(ri_ptr, r4_ptr, u_ptr, g_ptr, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(ri_ptr + offs, nl.randint(seed, offs), mask=mask)
    a, b, c, d = nl.randint4x(seed, offs)
    nl.store(r4_ptr + offs * 4 + 0, a, mask=mask)
    nl.store(r4_ptr + offs * 4 + 1, b, mask=mask)
    nl.store(r4_ptr + offs * 4 + 2, c, mask=mask)
    nl.store(r4_ptr + offs * 4 + 3, d, mask=mask)
    nl.store(u_ptr + offs, nl.rand(seed, offs), mask=mask)
    nl.store(g_ptr + offs, nl.randn(seed, offs), mask=mask)


@pytest.mark.parametrize("seed", [0, 42, 2 ** 31 - 1, -7])
def test_philox_stream(target, device, seed):
    n = 300
    ri, r4 = poison(n, torch.int64, device), poison(4 * n, torch.int64, device)
    u, g = poison(n, torch.float32, device), poison(n, torch.float32, device)
    random_kernel[(newt.cdiv(n, 128),)](ri, r4, u, g, seed, n, BLOCK=128)
    ref4 = [philox_ref(seed, i) for i in range(n)]
    check(ri, torch.tensor([w[0] for w in ref4]))
    check(r4, torch.tensor([x for w in ref4 for x in w]))
    check(u, torch.tensor([uniform_ref(w[0]) for w in ref4]), rtol=0, atol=0)
    u1 = torch.tensor([max(uniform_ref(w[0]), 1e-7) for w in ref4], dtype=torch.float64)
    u2 = torch.tensor([uniform_ref(w[1]) for w in ref4], dtype=torch.float64)
    normal = torch.sqrt(-2 * torch.log(u1)) * torch.cos(2 * torch.pi * u2)
    check(g, normal.float(), rtol=1e-4, atol=1e-4)
    assert 0.0 <= float(u.min()) and float(u.max()) < 1.0


def test_philox_known_answer(target, device):
    """Random123's known answer for Philox4x32-10 with counter 0 and key 0."""
    r4 = poison(4, torch.int64, device)
    scratch = [poison(1, torch.int64, device), poison(1, torch.float32, device),
               poison(1, torch.float32, device)]
    random_kernel[(1,)](scratch[0], r4, scratch[1], scratch[2], 0, 1, BLOCK=1)
    check(r4, torch.tensor([0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]))


@newt.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    keep = nl.rand(seed, offs) > p
    nl.store(out_ptr + offs, nl.where(keep, x / (1 - p), 0.0), mask=mask)


def test_seeded_dropout(target, device):
    n = 2000
    x = rand(n, torch.float32, device)
    out1, out2 = poison(n, torch.float32, device), poison(n, torch.float32, device)
    dropout_kernel[(newt.cdiv(n, 256),)](x, out1, n, 0.5, 123, BLOCK=256)
    dropout_kernel[(newt.cdiv(n, 256),)](x, out2, n, 0.5, 123, BLOCK=256)
    check(out1, out2)                                    # same seed, same mask
    kept = out1.cpu() != 0
    assert 0.4 < kept.float().mean() < 0.6
    check(out1.cpu()[kept], x.cpu()[kept] * 2)
    ref_keep = torch.tensor([uniform_ref(philox_ref(123, i)[0]) > 0.5 for i in range(n)])
    assert torch.equal(kept, ref_keep)


@newt.jit
def hints_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    offs = nl.max_contiguous(nl.multiple_of(offs, BLOCK), BLOCK)
    offs = nl.max_constancy(offs, 1)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    nl.debug_barrier()
    nl.store(out_ptr + offs, x + 1, mask=mask)


def test_hints_are_transparent(target, device):
    n = 1000
    x = rand(n, torch.float32, device)
    out = poison(n, torch.float32, device)
    hints_kernel[(newt.cdiv(n, 128),)](x, out, n, BLOCK=128)
    check(out, x.cpu() + 1)


@newt.jit
def static_checks_kernel(out_ptr, B: nl.constexpr):
    nl.static_assert(B % 2 == 0, "B must be even")
    nl.static_print("B is", B)
    nl.store(out_ptr + nl.arange(0, B), nl.arange(0, B))


def test_static_assert(target, device):
    out = poison(8, torch.int32, device)
    static_checks_kernel[(1,)](out, B=8)
    check(out, torch.arange(8, dtype=torch.int32))
    with pytest.raises(newt.CompilationError, match="B must be even"):
        static_checks_kernel[(1,)](out, B=1)


@newt.jit
def print_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    nl.device_print("x=", x)
    nl.store(out_ptr + offs, x)


def test_device_print(target, device, capfd):
    x = torch.arange(4, dtype=torch.int32, device=device) + 70
    out = poison(4, torch.int32, device)
    print_kernel[(1,)](x, out, BLOCK=4)
    if target == "cuda":
        torch.cuda.synchronize()
    check(out, x)
    text = capfd.readouterr().out
    assert "x=" in text and all(str(v) in text for v in (70, 71, 72, 73)), text
