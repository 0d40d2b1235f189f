"""Op suite, atomics: atomic_add/max/min/xchg/and/or/xor with masks and contention across
programs (and across lanes of one program), returned old values, atomic_cas as a lock-free
counter and as a spin lock. Runs on targets interp and cuda."""
import pytest
import torch

import newt
import newt.language as nl
from ops_helpers import check, from_i64, name, poison, rand, to_i64


@newt.jit
def histogram_kernel(x_ptr, hist_ptr, n, NBINS: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=0)
    nl.atomic_add(hist_ptr + x % NBINS, 1, mask=mask)   # many lanes hit the same bin


@pytest.mark.parametrize("n", [1, 7, 1025])
def test_histogram(target, device, n):
    x = rand(n, torch.int32, device, 0, 1000)
    hist = torch.zeros(16, dtype=torch.int32, device=device)
    histogram_kernel[(newt.cdiv(n, 128),)](x, hist, n, NBINS=16, BLOCK=128)
    check(hist, torch.bincount(x.cpu() % 16, minlength=16).to(torch.int32))


@newt.jit
def rmw_kernel(x_ptr, acc_ptr, old_ptr, n, OP: nl.constexpr, BLOCK: nl.constexpr):
    """Every program combines its block into the same acc[0:BLOCK] slots."""
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    slot = acc_ptr + nl.arange(0, BLOCK)
    if OP == "add":
        old = nl.atomic_add(slot, x, mask=mask)
    elif OP == "max":
        old = nl.atomic_max(slot, x, mask=mask)
    elif OP == "min":
        old = nl.atomic_min(slot, x, mask=mask)
    elif OP == "and":
        old = nl.atomic_and(slot, x, mask=mask)
    elif OP == "or":
        old = nl.atomic_or(slot, x, mask=mask)
    elif OP == "xor":
        old = nl.atomic_xor(slot, x, mask=mask)
    else:
        nl.static_assert(OP == "xchg")
        old = nl.atomic_xchg(slot, x, mask=mask)
    nl.store(old_ptr + offs, old, mask=mask)


def _combine(op, a, b):
    return {"add": lambda: a + b, "max": lambda: torch.maximum(a, b),
            "min": lambda: torch.minimum(a, b), "and": lambda: a & b, "or": lambda: a | b,
            "xor": lambda: a ^ b}[op]()


@pytest.mark.parametrize("op", ["add", "max", "min", "and", "or", "xor"])
@pytest.mark.parametrize("dt", [torch.int32, torch.int64, torch.uint32, torch.float32,
                                torch.float64], ids=name)
def test_rmw_contention(target, device, dt, op):
    if dt.is_floating_point and op in ("and", "or", "xor"):
        pytest.skip("bitwise atomics are integer-only")
    n, block = 1000, 128
    x = rand(n, dt, device) if dt.is_floating_point else rand(n, dt, device, 0, 2 ** 20)
    if dt.is_floating_point:  # exact sums regardless of order
        x = (x * 16).round() / 16
    acc = rand(block, dt, device) if op != "add" else torch.zeros(block, dtype=dt, device=device)
    if dt.is_floating_point:
        acc = (acc * 16).round() / 16
    init = acc.clone()
    old = poison(n, dt, device)
    rmw_kernel[(newt.cdiv(n, block),)](x, acc, old, n, OP=op, BLOCK=block)
    xs = x.cpu().double() if dt.is_floating_point else to_i64(x)
    ref = init.cpu().double() if dt.is_floating_point else to_i64(init)
    for p in range(newt.cdiv(n, block)):
        chunk = xs[p * block:(p + 1) * block]
        ref[:len(chunk)] = _combine(op, ref[:len(chunk)], chunk)
    check(acc, ref.to(dt) if dt.is_floating_point else from_i64(ref, dt))
    # each returned old value, combined with the program's own value, is a state the slot held:
    # check the weakest order-free property: every old is either the initial value or a state
    # reachable by combining it with other programs' values (for add: old <= final for x >= 0)
    if op == "add" and not dt.is_floating_point:
        olds = to_i64(old)
        finals = to_i64(acc)[torch.arange(n) % block]
        assert bool((olds + xs <= finals).all()) and bool((olds >= 0).all())


@newt.jit
def ticket_kernel(counter_ptr, out_ptr):
    pid = nl.program_id(0)
    t = nl.atomic_add(counter_ptr, 1)      # scalar atomic: returns the old count
    nl.store(out_ptr + pid, t)


def test_ticket_counter_returns_old_values(target, device):
    P = 300
    counter = torch.zeros(1, dtype=torch.int32, device=device)
    out = poison(P, torch.int32, device)
    ticket_kernel[(P,)](counter, out)
    assert int(counter.item()) == P
    check(out.sort().values, torch.arange(P, dtype=torch.int32))   # a permutation of 0..P-1


@newt.jit
def cas_kernel(lock_ptr, total_ptr, fail_ptr, x_ptr):
    pid = nl.program_id(0)
    got = nl.atomic_cas(lock_ptr, 0, 1)
    tries = 0
    while (got == 1) & (tries < 10000000):      # spin (bounded: a bug fails, never hangs)
        got = nl.atomic_cas(lock_ptr, 0, 1)
        tries += 1
    if got == 0:
        v = nl.load(total_ptr)                  # critical section: a plain read-modify-write
        nl.store(total_ptr, v + nl.load(x_ptr + pid))
        nl.debug_barrier()
        nl.atomic_xchg(lock_ptr, 0)             # release
    else:
        nl.atomic_add(fail_ptr, 1)


def test_cas_spin_lock(target, device):
    P = 64
    x = rand(P, torch.int32, device, 0, 1000)
    lock = torch.zeros(1, dtype=torch.int32, device=device)
    total = torch.zeros(1, dtype=torch.int32, device=device)
    fail = torch.zeros(1, dtype=torch.int32, device=device)
    cas_kernel[(P,)](lock, total, fail, x, num_warps=1)
    assert int(fail.item()) == 0
    check(total, x.cpu().sum().reshape(1).to(torch.int32))
    assert int(lock.item()) == 0


@newt.jit
def cas_block_kernel(x_ptr, old_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    old = nl.atomic_cas(x_ptr + offs, offs % 2, offs + 100)   # swaps where x == offs % 2
    nl.store(old_ptr + offs, old)


def test_cas_block(target, device):
    B = 32
    x = rand(B, torch.int32, device, 0, 2)
    init = x.clone().cpu()
    old = poison(B, torch.int32, device)
    cas_block_kernel[(1,)](x, old, BLOCK=B)
    idx = torch.arange(B, dtype=torch.int32)
    check(old, init)
    check(x, torch.where(init == idx % 2, idx + 100, init))


@newt.jit
def masked_atomic_kernel(acc_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.atomic_add(acc_ptr + offs, offs.to(nl.float32), mask=offs < n)


def test_masked_atomic_leaves_rest(target, device):
    acc = poison(64, torch.float32, device)
    acc[:10] = 1.0
    masked_atomic_kernel[(1,)](acc, 10, BLOCK=64)
    check(acc[:10], torch.arange(10.0) + 1)
    assert bool(acc[10:].isnan().all())
