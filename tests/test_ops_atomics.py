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


@newt.jit
def cas_values_kernel(x_ptr, cmp_ptr, val_ptr, old_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    old = nl.atomic_cas(x_ptr + offs, nl.load(cmp_ptr + offs), nl.load(val_ptr + offs))
    nl.store(old_ptr + offs, old)


@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.float16], ids=name)
def test_cas_of_floats_compares_bits_and_returns_the_old_value(target, device, dt):
    """atom.cas compares bits: -0.0 is not 0.0, a NaN matches its own bits. The old values come
    back even where the swap wrote (the interpreter once returned the new value there)."""
    B = 16
    x = rand(B, dt, device)
    cmp = x.clone()
    cmp[1::3] = rand(len(cmp[1::3]), dt, device) + 8        # these do not match
    x[2], cmp[2] = -0.0, 0.0
    x[5], cmp[5] = 0.0, -0.0
    x[8], cmp[8] = float("nan"), float("nan")
    kind = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    # 16-bit floats pass through fp32 registers (docs/language.md): a NaN operand or old value
    # is the canonical NaN, bits 0x7FFF, and matches only those bits in memory
    canon = torch.tensor(0x7FFF, dtype=torch.int16).view(dt) if kind == torch.int16 else None
    if canon is not None:
        x[11], cmp[11] = canon, float("nan")
    val = rand(B, dt, device)
    init = x.clone().cpu()
    old = poison(B, dt, device)
    cas_values_kernel[(1,)](x, cmp, val, old, BLOCK=B)
    reg = (lambda t: torch.where(t.isnan(), canon, t)) if canon is not None else (lambda t: t)
    same = init.view(kind) == reg(cmp.cpu()).view(kind)
    assert bool(same[8]) == (canon is None) and not bool(same[2]) and not bool(same[5])
    assert canon is None or bool(same[11])
    assert torch.equal(old.cpu().view(kind), reg(init).view(kind))
    assert torch.equal(x.cpu().view(kind), torch.where(same, val.cpu(), init).view(kind))


@newt.jit
def held_lock_kernel(lock_ptr, total_ptr, HOW: nl.constexpr, LEAVE: nl.constexpr = 0):
    if HOW == "cas":
        while nl.atomic_cas(lock_ptr, 0, 1, sem="acquire") == 1:
            pass
    elif HOW == "xchg":
        while nl.atomic_xchg(lock_ptr, 1, sem="acquire", scope="gpu") == 1:
            pass
    else:
        while nl.load(lock_ptr, volatile=True) != 0:
            pass
    nl.store(total_ptr, nl.load(total_ptr) + 1)
    nl.atomic_xchg(lock_ptr, LEAVE, sem="release")      # LEAVE=1: never released


@pytest.mark.parametrize("how", ["cas", "xchg", "flag"])
def test_interpreter_stops_a_spin_on_a_lock_no_program_can_release(how):
    """Programs run one at a time in the interpreter: a lock held when the kernel starts (or by a
    program that ended without releasing it) can never be released, so the spin raises an
    error naming its line instead of hanging."""
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        lock = torch.ones(1, dtype=torch.int32)
        total = torch.zeros(1, dtype=torch.int32)
        with pytest.raises(newt.KernelError, match="never end") as e:
            held_lock_kernel[(3,)](lock, total, HOW=how)
        assert "test_ops_atomics.py" in str(e.value) and "while nl." in str(e.value)
        assert int(total.item()) == 0
        # a lock released by each program before the next: every program gets it
        lock.zero_()
        held_lock_kernel[(5,)](lock, total, HOW=how)
        assert int(total.item()) == 5 and int(lock.item()) == 0
    finally:
        newt.options.flags.interpret = old


def test_interpreter_stops_a_spin_on_a_lock_left_held_by_an_earlier_program():
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        lock = torch.zeros(1, dtype=torch.int32)
        total = torch.zeros(1, dtype=torch.int32)
        with pytest.raises(newt.KernelError, match=r"program id \(1, 0, 0\)"):
            held_lock_kernel[(4,)](lock, total, HOW="cas", LEAVE=1)
        assert int(total.item()) == 1
    finally:
        newt.options.flags.interpret = old


@newt.jit
def sem_kernel(lock_ptr, x_ptr, old_ptr, SEM: nl.constexpr, SCOPE: nl.constexpr,
               BLOCK: nl.constexpr):
    got = nl.atomic_cas(lock_ptr, 0, 5, SEM, SCOPE)            # sem, scope by position
    offs = nl.arange(0, BLOCK)
    old = nl.atomic_xchg(x_ptr + offs, offs + got, mask=offs < BLOCK - 1, sem=SEM, scope=SCOPE)
    nl.store(old_ptr + offs, old)


_SEMS = ["acquire", "release", "acq_rel", "relaxed"]


@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
@pytest.mark.parametrize("sem", _SEMS)
def test_cas_and_xchg_take_every_sem_and_scope(target, device, sem, scope):
    B = 64
    lock = torch.zeros(1, dtype=torch.int32, device=device)
    x = rand(B, torch.int32, device)
    init = x.clone().cpu()
    old = poison(B, torch.int32, device)
    sem_kernel[(1,)](lock, x, old, sem, scope, BLOCK=B)
    assert int(lock.item()) == 5
    check(old, torch.where(torch.arange(B) < B - 1, init, 0))
    check(x, torch.where(torch.arange(B) < B - 1, torch.arange(B, dtype=torch.int32), init))


@pytest.mark.parametrize("sem", _SEMS)
def test_sem_and_scope_reach_the_ptx(sem):
    k = newt.compile(sem_kernel, {"lock_ptr": "*i32", "x_ptr": "*i32", "old_ptr": "*i32"},
                     {"SEM": sem, "SCOPE": "cta", "BLOCK": 64})
    assert f"atom.{sem}.cta.global.cas.b32" in k.ptx
    assert f"atom.{sem}.cta.global.exch.b32" in k.ptx


def test_unknown_sem_is_rejected_at_its_line_on_both_paths():
    """The compiler (here through newt.compile: no GPU needed) and the interpreter reject it
    with the same CompilationError at the same line."""
    sig = {"lock_ptr": "*i32", "x_ptr": "*i32", "old_ptr": "*i32"}
    with pytest.raises(newt.CompilationError, match="sem must be one of") as compiled:
        newt.compile(sem_kernel, sig, {"SEM": "seq_cst", "SCOPE": "gpu", "BLOCK": 64})
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        x = torch.zeros(64, dtype=torch.int32)
        with pytest.raises(newt.CompilationError, match="sem must be one of") as interpreted:
            sem_kernel[(1,)](x, x, x, "seq_cst", "gpu", BLOCK=64)
    finally:
        newt.options.flags.interpret = old
    for e in (compiled, interpreted):
        assert "nl.atomic_cas(lock_ptr, 0, 5, SEM, SCOPE)" in str(e.value)


@newt.jit
def xchg_spin_kernel(lock_ptr, out_ptr, n):
    # a scalar exchange that changes the lock each time, then one that finds it taken: the
    # first kind is progress, so only a long run of the second would be a spin
    for i in range(n):
        nl.atomic_xchg(lock_ptr, i + 1)
    nl.store(out_ptr, nl.atomic_xchg(lock_ptr, n))


def test_interpreter_counts_a_changing_scalar_exchange_as_progress():
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        lock = torch.zeros(1, dtype=torch.int32)
        out = torch.full((1,), -1, dtype=torch.int32)
        xchg_spin_kernel[(2,)](lock, out, 1500)
        assert int(lock.item()) == 1500 and int(out.item()) == 1500
    finally:
        newt.options.flags.interpret = old
