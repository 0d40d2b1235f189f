"""In-kernel random numbers (nl.rand / randn / randint / randint4x / rand4x / randn4x and the
conversions uint_to_uniform_float / pair_uniform_to_normal): the Philox4x32 stream checked
bit for bit against an independent reference written here (Triton's algorithm: counter =
(offset, 0, 0, 0), key = the 64-bit seed's halves, 10 rounds), statistics (mean, variance,
kept fraction), seeds (same seed: same stream; another seed: another stream), the interpreter
against the compiled kernel (target cuda), and, where `triton` imports and a GPU is present,
against Triton's own tl.rand on the same kernel source (nl -> tl)."""
import math
import os
import sys

import pytest
import torch

import newt
import newt.language as nl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py: the Triton twin of a kernel)

HAS_CUDA = torch.cuda.is_available()
N = 3001  # odd: the last block is masked


@newt.jit
def rand_kernel(out_ptr, seed, n, KIND: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    if KIND == "rand":
        nl.store(out_ptr + offs, nl.rand(seed, offs), mask=mask)
    elif KIND == "randn":
        nl.store(out_ptr + offs, nl.randn(seed, offs), mask=mask)
    elif KIND == "randint":
        nl.store(out_ptr + offs, nl.randint(seed, offs), mask=mask)
    else:
        r0, r1, r2, r3 = nl.randint4x(seed, offs)
        nl.store(out_ptr + offs, r0, mask=mask)
        nl.store(out_ptr + n + offs, r1, mask=mask)
        nl.store(out_ptr + 2 * n + offs, r2, mask=mask)
        nl.store(out_ptr + 3 * n + offs, r3, mask=mask)


def run(kind, seed, n=N, device="cpu", kernel=rand_kernel, block=256):
    """Draw n values; ints come back as int64 holding the uint32 pattern."""
    words = 4 if kind == "randint4x" else 1
    if kind in ("rand", "randn"):
        out = torch.full((n,), float("nan"), device=device)
    else:
        out = torch.full((words * n,), -7, dtype=torch.int32, device=device)  # a sentinel
    kernel[(newt.cdiv(n, block),)](out, seed, n, KIND=kind, BLOCK=block)
    out = out.cpu()
    return out.long() & 0xFFFFFFFF if out.dtype == torch.int32 else out


# ----------------------------------------------------------------------------- reference

_M32 = 0xFFFFFFFF


def philox_ref(seed: int, offsets, n_rounds=10):
    """Philox4x32-n on int64 tensors, written from the algorithm (not from the interpreter)."""
    c0 = torch.as_tensor(offsets, dtype=torch.int64) & _M32
    c1 = torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    seed &= (1 << 64) - 1
    k0, k1 = seed & _M32, (seed >> 32) & _M32
    for _ in range(n_rounds):
        # 32x32 -> 64 products, split into halves; int64 holds them without overflow after
        # splitting the multiplier into 16-bit pieces
        hi_b, lo_b = _mul_wide(0xCD9E8D57, c2)
        hi_a, lo_a = _mul_wide(0xD2511F53, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0 = (k0 + 0x9E3779B9) & _M32
        k1 = (k1 + 0xBB67AE85) & _M32
    return c0, c1, c2, c3


def _mul_wide(const: int, x: torch.Tensor):
    lo16, hi16 = const & 0xFFFF, const >> 16
    p_lo = x * lo16             # < 2**48
    p_hi = x * hi16             # < 2**48
    total_lo = p_lo + ((p_hi & 0xFFFF) << 16)  # < 2**49
    lo = total_lo & _M32
    hi = ((p_hi >> 16) + (total_lo >> 32)) & _M32
    return hi, lo


def uniform_ref(u: torch.Tensor) -> torch.Tensor:
    x = torch.where(u >= 1 << 31, u - (1 << 32), u)   # read as int32
    x = torch.where(x < 0, -x - 1, x)
    return x.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def test_mul_wide_reference():
    x = torch.tensor([0, 1, _M32, 0x12345678, 0x9ABCDEF0])
    for const in (0xCD9E8D57, 0xD2511F53):
        hi, lo = _mul_wide(const, x)
        for i, v in enumerate(x.tolist()):
            assert (hi[i].item() << 32) | lo[i].item() == v * const


# ----------------------------------------------------------------------------- bit-exact streams

@pytest.mark.parametrize("seed", [0, 12345, 2**31 + 7, 2**40 + 3])
def test_randint_matches_reference(target, device, seed):
    got = run("randint", seed, device=device)
    ref = philox_ref(seed, torch.arange(N))[0]
    assert torch.equal(got, ref)


def test_randint4x_matches_reference(target, device):
    got = run("randint4x", 97, device=device).view(4, N)
    ref = philox_ref(97, torch.arange(N))
    for i in range(4):
        assert torch.equal(got[i], ref[i]), f"word {i}"


def test_rand_matches_reference(target, device):
    got = run("rand", 2024, device=device)
    ref = uniform_ref(philox_ref(2024, torch.arange(N))[0])
    assert torch.equal(got, ref)


def test_randn_matches_reference(target, device):
    got = run("randn", 7, device=device)
    w = philox_ref(7, torch.arange(N))
    u1 = torch.clamp(uniform_ref(w[0]), min=1e-7).double()
    u2 = uniform_ref(w[1]).double()
    ref = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2 * math.pi * u2)
    # log/cos are libm's here and the GPU's fast paths there: a few ulp apart at most
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- statistics

def test_rand_statistics(target, device):
    n = 20001
    u = run("rand", 42, n=n, device=device, block=1024)
    assert torch.isfinite(u).all()
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    # mean 1/2, variance 1/12: 6 standard errors of margin
    assert abs(float(u.mean()) - 0.5) < 6 * math.sqrt(1 / 12 / n)
    assert abs(float(u.var()) - 1 / 12) < 6 * math.sqrt(1 / 180 / n)
    for p in (0.1, 0.5, 0.9):
        kept = float((u > p).float().mean())
        assert abs(kept - (1 - p)) < 6 * math.sqrt(p * (1 - p) / n), p
    # no bucket of a 10-bin histogram is far from n/10
    hist = torch.histc(u, bins=10, min=0.0, max=1.0)
    assert float((hist - n / 10).abs().max()) < 6 * math.sqrt(n / 10)


def test_randn_statistics(target, device):
    n = 20001
    z = run("randn", 43, n=n, device=device, block=1024)
    assert torch.isfinite(z).all()
    assert abs(float(z.mean())) < 6 / math.sqrt(n)
    assert abs(float(z.var()) - 1.0) < 6 * math.sqrt(2 / n)
    # tails: |z| > 2 has probability 4.55 %
    tail = float((z.abs() > 2).float().mean())
    assert abs(tail - 0.0455) < 6 * math.sqrt(0.0455 * 0.9545 / n)


def test_randint_statistics(target, device):
    n = 20001
    r = run("randint", 44, n=n, device=device, block=1024)
    assert int(r.min()) >= 0 and int(r.max()) <= _M32
    # each of the 32 bits is set about half the time
    for bit in (0, 7, 15, 16, 31):
        frac = float(((r >> bit) & 1).float().mean())
        assert abs(frac - 0.5) < 6 * math.sqrt(0.25 / n), bit
    assert r.unique().numel() > n - 5  # 32-bit values: collisions are rare


# ----------------------------------------------------------------------------- seeds

@pytest.mark.parametrize("kind", ["rand", "randn", "randint"])
def test_same_seed_same_stream_other_seed_other_stream(target, device, kind):
    a = run(kind, 1234, device=device)
    b = run(kind, 1234, device=device)
    c = run(kind, 1235, device=device)
    assert torch.equal(a, b)
    assert float((a == c).float().mean()) < 0.01


def test_stream_does_not_depend_on_the_block_size(target, device):
    """Values are a function of (seed, offset) only: a 64-wide and a 1024-wide grid agree."""
    assert torch.equal(run("rand", 5, device=device, block=64),
                       run("rand", 5, device=device, block=1024))


def test_seed_high_bits_matter(target, device):
    """The seed is 64-bit: seeds differing only above bit 32 give other streams."""
    a = run("randint", 3, device=device)
    b = run("randint", 3 + 2**33, device=device)
    assert float((a == b).float().mean()) < 0.01


# ----------------------------------------------------------------------------- cross-target

@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["rand", "randn", "randint", "randint4x"])
def test_interpreter_stream_equals_compiled(kind, monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", False)
    gpu = run(kind, 31337, device="cuda")
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    cpu = run(kind, 31337, device="cpu")
    if kind == "randn":  # the GPU's log/cos may differ from libm's by an ulp or so
        torch.testing.assert_close(gpu, cpu, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(gpu, cpu)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["rand", "randn", "randint", "randint4x"])
def test_equals_triton(kind, monkeypatch):
    pytest.importorskip("triton")
    twin = common.triton_twin(rand_kernel)  # the same source with nl -> tl
    monkeypatch.setattr(newt.options.flags, "interpret", False)
    ours = run(kind, 99, device="cuda")
    theirs = run(kind, 99, device="cuda", kernel=twin)
    if kind == "randn":
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(ours, theirs)


@newt.jit
def rand2d_kernel(out_ptr, seed, n_rows, n_cols, stride, ROUNDS: nl.constexpr,
                  R: nl.constexpr, C: nl.constexpr):
    rows = nl.program_id(0) * R + nl.arange(0, R)
    cols = nl.arange(0, C)
    offs = rows[:, None] * stride + cols[None, :]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    nl.store(out_ptr + offs, nl.randint(seed, offs, ROUNDS), mask=mask)


@pytest.mark.parametrize("rounds", [10, 7])
def test_randint_2d_offsets_and_rounds(target, device, rounds):
    """A 2-D block of offsets (a matrix's linear indices) and n_rounds other than 10."""
    n_rows, n_cols = 13, 37
    out = torch.full((n_rows, n_cols), -7, dtype=torch.int32, device=device)
    rand2d_kernel[(newt.cdiv(n_rows, 4),)](out, 555, n_rows, n_cols, out.stride(0),
                                           ROUNDS=rounds, R=4, C=64)
    ref = philox_ref(555, torch.arange(n_rows * n_cols), n_rounds=rounds)[0]
    assert torch.equal(out.cpu().long().flatten() & _M32, ref)
    if rounds != 10:  # the rounds matter
        assert not torch.equal(ref, philox_ref(555, torch.arange(n_rows * n_cols))[0])


@newt.jit
def rand4x_kernel(out_ptr, bits_ptr, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    u = nl.rand4x(seed, offs)
    z = nl.randn4x(seed, offs, 7)
    w = nl.load(bits_ptr + offs, mask=mask)                     # 64-bit random bits
    pair = nl.pair_uniform_to_normal(u[2], u[3])
    outs = u + z + pair + (nl.uint_to_uniform_float(w), nl.uint_to_uniform_float(w.to(nl.int32)))
    for i in nl.static_range(len(outs)):
        nl.store(out_ptr + i * n + offs, outs[i], mask=mask)


def _box_muller(a, b):
    u1 = torch.clamp(a, min=1e-7).double()
    r, th = torch.sqrt(-2.0 * torch.log(u1)), 2 * math.pi * b.double()
    return r * torch.cos(th), r * torch.sin(th)


@pytest.mark.parametrize("path", ["interp", "emulated", "cuda"])
def test_rand4x_randn4x_and_the_conversions(path):
    """Triton's nl.rand4x / randn4x / uint_to_uniform_float / pair_uniform_to_normal against
    the reference stream (randn4x with 7 rounds), 64-bit bits as well as 32-bit."""
    from test_semantics_agree import run as run_on
    from test_codegen_emulator import HAS_CXX
    if path == "emulated" and not HAS_CXX:
        pytest.skip("no host C++ compiler")
    if path == "cuda" and not HAS_CUDA:
        pytest.skip("needs a CUDA device")
    n = 301
    bits = torch.randint(-2**63, 2**63 - 1, (n,), dtype=torch.int64)
    out = torch.full((14 * n,), float("nan"))
    run_on(path, rand4x_kernel, (newt.cdiv(n, 128),), out, bits, 1234, n, BLOCK=128)
    got = out.view(14, n).double()
    w, w7 = philox_ref(1234, torch.arange(n)), philox_ref(1234, torch.arange(n), 7)
    u = [uniform_ref(x) for x in w]
    u7 = [uniform_ref(x) for x in w7]
    folded = torch.where(bits < 0, -(bits + 1), bits)
    b32 = bits & 0xFFFFFFFF
    ref = u + [*_box_muller(u7[0], u7[1]), *_box_muller(u7[2], u7[3])] + \
        [*_box_muller(u[2], u[3])] + \
        [folded.to(torch.float32) * torch.tensor(1.0842020432385337e-19), uniform_ref(b32)]
    for i, r in enumerate(ref):
        torch.testing.assert_close(got[i], r.double(), rtol=1e-5, atol=1e-5, msg=f"output {i}")
