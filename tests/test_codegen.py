"""Codegen structure per hardware concern (AOT through newt.compiler.compile, no GPU):
atomics pick native PTX or a CAS loop per dtype and arch, control flow keeps carried values in
registers, device print/assert reach printf/__assertfail, scans and random numbers compile
without local memory. Numeric behaviour is checked by test_codegen_emulator.py (on the CPU)
and by the op suite on the GPU."""
import re

import pytest

import newt
import newt.language as nl
from newt import compiler

ARCHS = ["sm_80", "sm_90a"]


@newt.jit
def atomic_kernel(ptr, val_ptr, n, KIND: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    v = nl.load(val_ptr + offs, mask=offs < n)
    if KIND == 0:
        nl.atomic_add(ptr + offs % 7, v, mask=offs < n)
    elif KIND == 1:
        nl.atomic_max(ptr + offs % 7, v, mask=offs < n)
    else:
        nl.atomic_xchg(ptr + offs % 7, v, mask=offs < n)


@newt.jit
def counter_kernel(count_ptr, out_ptr):
    old = nl.atomic_add(count_ptr, 1)
    nl.store(out_ptr + nl.program_id(0), old)


@newt.jit
def loops_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    acc = nl.zeros([BLOCK], dtype=nl.float32)
    i = 0
    while i < n:
        x = nl.load(x_ptr + i + offs, mask=i + offs < n, other=0.0)
        if i % 2 == 0:
            acc += x
        else:
            acc -= x
        i += BLOCK
    if n == 0:
        return
    nl.store(out_ptr + offs, nl.cumsum(acc, axis=0))


@newt.jit
def debug_kernel(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=1.0)
    nl.device_print("x", x)
    nl.device_assert(x > 0, "x must be positive")


@newt.jit
def rand_kernel(out_ptr, seed, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.rand(seed, offs), mask=offs < n)


@newt.jit
def mixed_kernel(a_ptr, b_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    a = nl.load(a_ptr + offs)
    b = nl.load(b_ptr + offs)
    r = (a // 3 + a % 5) << 1
    r = r ^ (b.to(nl.int64) >> 2).to(nl.int8)
    nl.store(out_ptr + offs, r)


def _atomic_helpers(k):
    return re.findall(r"static __device__ __forceinline__ \S+ (nt_atom_\w+)", k.source)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", ["fp32", "fp16", "bf16", "i32", "u64"])
def test_atomic_add_is_one_instruction_or_a_cas_loop(arch, dt):
    k = compiler.compile(atomic_kernel, {"ptr": f"*{dt}", "val_ptr": f"*{dt}", "n": "i32"},
                         {"KIND": 0, "BLOCK": 128}, arch=arch)
    assert k.n_spills == 0 and k.local_bytes == 0
    native = not (dt == "bf16" and arch == "sm_80")
    assert ("atom.acq_rel.gpu.global.cas" in k.ptx) != native
    if native:
        assert re.search(r"atom\.acq_rel\.gpu\.global\.add", k.ptx)


@pytest.mark.parametrize("dt,native", [("fp32", False), ("i32", True), ("u64", True)])
def test_atomic_max_floats_use_compare_and_swap(dt, native):
    k = compiler.compile(atomic_kernel, {"ptr": f"*{dt}", "val_ptr": f"*{dt}", "n": "i32"},
                         {"KIND": 1, "BLOCK": 128})
    assert bool(re.search(r"atom\.acq_rel\.gpu\.global\.max", k.ptx)) == native
    assert ("global.cas" in k.ptx) != native


def test_atomic_xchg_of_floats_moves_bits():
    k = compiler.compile(atomic_kernel, {"ptr": "*fp32", "val_ptr": "*fp32", "n": "i32"},
                         {"KIND": 2, "BLOCK": 64})
    assert "atom.acq_rel.gpu.global.exch.b32" in k.ptx


def test_scalar_atomic_runs_once_per_program_and_broadcasts():
    k = compiler.compile(counter_kernel, {"count_ptr": "*i32", "out_ptr": "*i32"}, {})
    assert k.ptx.count("atom.acq_rel.gpu.global.add.u32") == 1
    assert "tid == 0" in k.source and k.shared_bytes >= 8 and "bar.sync" in k.ptx


@pytest.mark.parametrize("arch", ARCHS)
def test_while_if_return_and_scan(arch):
    k = compiler.compile(loops_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                         {"BLOCK": 256}, arch=arch, num_warps=4)
    assert k.n_spills == 0 and k.local_bytes == 0
    assert "while (true)" in k.source and "break;" in k.source and "return;" in k.source
    assert "acc" in k.source                      # carried values keep the user's names
    assert "bar.sync" in k.ptx                    # the scan exchanges through shared memory


def test_print_and_assert():
    k = compiler.compile(debug_kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    assert "vprintf" in k.ptx
    assert "__assertfail" in k.ptx
    assert '"x must be positive"' in k.source
    assert re.search(r'__assertfail\("x must be positive", "[^"]*test_codegen\.py", \d+,', k.source)


@pytest.mark.parametrize("arch", ARCHS)
def test_random_numbers_compile_clean(arch):
    k = compiler.compile(rand_kernel, {"out_ptr": "*fp32", "seed": "i32", "n": "i32"},
                         {"BLOCK": 1024}, arch=arch)
    assert k.n_spills == 0 and k.local_bytes == 0
    assert "mul.hi.u32" in k.ptx


def test_integer_semantics_in_c():
    k = compiler.compile(mixed_kernel, {"a_ptr": "*i8", "b_ptr": "*i32", "out_ptr": "*i8"},
                         {"BLOCK": 2048})
    assert k.n_spills == 0 and k.local_bytes == 0
    # int8 math runs in 32 bits and is truncated back; 16 int8 per 128-bit access
    assert "(i8)((i32)" in k.source and "(i8)nt_div((i32)" in k.source
    assert "layout=cyclic(vec=16" in k.ir and "ld.global.v4" in k.ptx


# --------------------------------------------------------------------------- memory accesses

@newt.jit
def rows_kernel(x_ptr, y_ptr, stride, n, BLOCK: nl.constexpr):
    cols = nl.arange(0, BLOCK)
    mask = cols < n
    x = nl.load(x_ptr + nl.program_id(0) * stride + cols, mask=mask, other=0.0)
    nl.store(y_ptr + nl.program_id(0) * stride + cols, x * 2, mask=mask)


def _body(k):
    return k.source.split('extern "C"')[1]


_ROWS_SIG = {"x_ptr": "*fp16", "y_ptr": "*fp16", "stride": "i32", "n": "i32"}
_DIV16 = {p: {"divisible_by_16": True} for p in _ROWS_SIG}


def test_divisible_by_16_gives_static_vector_groups():
    """Pointers, row stride and size specialized as divisible by 16 (the JIT does it, as
    Triton does): every 16-byte group is aligned and under one mask bit, so each is one
    predicated vector access with no run-time test and no scalar path."""
    k = compiler.compile(rows_kernel, _ROWS_SIG, {"BLOCK": 2048}, num_warps=4,
                         specialization=_DIV16)
    assert re.search(r"binary\.lt .*const=16", k.ir)   # n divisible by 16: one bit per 16
    assert "div=16" in k.ir
    body = _body(k)
    assert "nt_ldp" not in body and "nt_stp" not in body
    assert "& 15) == 0" not in body                           # no alignment test
    assert len(re.findall(r"ld\.global\.v4\.b32", k.ptx)) == 2   # 2 groups of 8 halves
    assert k.n_spills == 0


def test_unknown_alignment_keeps_the_run_time_test_and_the_scalar_path():
    k = compiler.compile(rows_kernel, _ROWS_SIG, {"BLOCK": 2048}, num_warps=4)
    body = _body(k)
    assert "nt_ldp16(" in body and "nt_stp16(" in body and "& 15) == 0" in body
    # one pointer per group, no per-element pointer arrays read by the accesses
    assert not re.search(r"nt_(ld|st)p\d+\(\w+\[", body)
    # contiguous over the whole block: groups address from one base with immediate offsets
    assert re.search(r"\* const pb\d+ = ", body)


def test_narrow_loads_stay_packed_until_used():
    k = compiler.compile(rows_kernel, _ROWS_SIG, {"BLOCK": 2048}, num_warps=4)
    assert re.search(r"u32 raw\d+\[8\];", _body(k))   # 16 halves per thread in 8 words


@newt.jit
def _weak_literal_kernel(h_ptr, b_ptr, out_h_ptr, out_b_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_h_ptr + offs, nl.load(h_ptr + offs) * 0.1)
    nl.store(out_b_ptr + offs, nl.load(b_ptr + offs) * 0.1)


def test_float_literals_hold_the_value_of_their_type():
    """A weak `h * 0.1` on fp16 multiplies by fp16(0.1) (Triton's and the interpreter's
    semantics): the literal in the C++ is the rounded value, not the fp32 0.1f."""
    import torch
    k = newt.compile(_weak_literal_kernel, {"h_ptr": "*fp16", "b_ptr": "*bf16",
                                            "out_h_ptr": "*fp16", "out_b_ptr": "*bf16"},
                     {"BLOCK": 128}, arch="sm_90a", num_warps=4)
    for dt in (torch.float16, torch.bfloat16):
        rounded = torch.tensor(0.1, dtype=dt).item()
        assert rounded != 0.1 and f"{rounded!r}f" in k.source, dt
    assert "0.1f" not in k.source


@newt.jit
def _exp_kernel(x_ptr, y_ptr, z_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    nl.store(y_ptr + offs, nl.exp(x))
    nl.store(z_ptr + offs, nl.exp2(x))


def test_exp_and_exp2_are_tritons_instructions():
    """fp32 nl.exp is ex2.approx.f32 of x * log2(e) and nl.exp2 is ex2.approx.ftz.f32, the
    instructions Triton 3.x emits for tl.exp and tl.exp2 (the ftz form is one MUFU op)."""
    k = newt.compile(_exp_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32"},
                     {"BLOCK": 128}, arch="sm_90a", num_warps=4)
    ex2 = [line.split()[0] for line in k.ptx.splitlines() if "ex2.approx" in line]
    assert sorted(set(ex2)) == ["ex2.approx.f32", "ex2.approx.ftz.f32"], ex2
