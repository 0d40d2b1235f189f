"""Interpreter-only behaviour: clear errors (out-of-bounds accesses naming the kernel, line,
argument and program; non-CPU tensors; bad launches; blocks used as truth values), the
language coverage of the interpreter, sequential program order, unsigned arithmetic details,
and the error a CPU tensor gets without NEWT_INTERPRET."""
import pytest
import torch

import newt
import newt.language as nl
import newt.options
from newt.language import arange as ar, load as ld  # names imported from the language
from ops_helpers import check, poison

GLOBAL_SCALE = nl.constexpr(3)


@pytest.fixture(autouse=True)
def interpret():
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    yield
    newt.options.flags.interpret = old


@newt.jit
def oob_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    nl.store(out_ptr + offs, x)  # unmasked: past the end of out for the last program


def test_out_of_bounds_store_is_reported():
    x, out = torch.randn(100), torch.empty(100)
    with pytest.raises(IndexError) as e:
        oob_kernel[(2,)](x, out, 100, BLOCK=64)
    msg = str(e.value)
    for part in ("oob_kernel", "program id (1, 0, 0)", "out_ptr", "[0, 100)",
                 "test_interpreter.py", "nl.store(out_ptr + offs, x)"):
        assert part in msg, msg


def test_out_of_bounds_load_and_negative_offsets():
    @newt.jit
    def neg_kernel(x_ptr, BLOCK: nl.constexpr):
        nl.load(x_ptr - 1 + nl.arange(0, BLOCK))

    with pytest.raises(IndexError, match="element offset -1"):
        neg_kernel[(1,)](torch.randn(8), BLOCK=8)


def test_masked_off_lanes_never_touch_memory():
    @newt.jit
    def far_kernel(x_ptr, out_ptr, BLOCK: nl.constexpr):
        offs = nl.arange(0, BLOCK) * 1000000           # absurd offsets, all masked but lane 0
        x = nl.load(x_ptr + offs, mask=offs == 0, other=5.0)
        nl.store(out_ptr + nl.arange(0, BLOCK), x)
        nl.store(out_ptr + offs, x, mask=offs < 0)       # all masked off

    out = poison(16, torch.float32, "cpu")
    far_kernel[(1,)](torch.full((4,), 2.0), out, BLOCK=16)
    check(out, torch.tensor([2.0] + [5.0] * 15))


def test_non_cpu_tensor_is_a_clear_error():
    meta = torch.empty(16, device="meta")
    with pytest.raises(newt.LaunchError, match="NEWT_INTERPRET"):
        oob_kernel[(1,)](meta, meta, 16, BLOCK=16)


def test_bad_launches():
    x = torch.randn(16)
    with pytest.raises(newt.LaunchError):
        oob_kernel[(1,)](x, x, BLOCK=16)               # missing n
    with pytest.raises(newt.LaunchError, match="1 to 3"):
        oob_kernel[(1, 1, 1, 1)](x, x, 16, BLOCK=16)
    with pytest.raises(newt.LaunchError, match="num_warps"):
        oob_kernel[(1,)](x, x, 16, BLOCK=16, num_warps=3)


def test_block_truth_value_and_float_floordiv_are_errors():
    @newt.jit
    def if_block(x_ptr, BLOCK: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, BLOCK))
        if x > 0:
            pass

    @newt.jit
    def float_floordiv(x_ptr, BLOCK: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, BLOCK))
        nl.store(x_ptr + nl.arange(0, BLOCK), x // 2.0)

    @newt.jit
    def float_and(x_ptr, BLOCK: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, BLOCK))
        nl.store(x_ptr + nl.arange(0, BLOCK), x & 1)

    x = torch.randn(8)     # rejected by the frontend, as the compiler rejects them
    with pytest.raises(newt.CompilationError, match="must be a scalar"):
        if_block[(1,)](x, BLOCK=8)
    with pytest.raises(newt.CompilationError, match=r"(?s)x // 2\.0"):
        float_floordiv[(1,)](x, BLOCK=8)
    with pytest.raises(newt.CompilationError, match=r"(?s)x & 1"):
        float_and[(1,)](x, BLOCK=8)


def test_assert_names_the_program():
    @newt.jit
    def third_fails(x_ptr):
        pid = nl.program_id(0)
        assert pid != 2, "program two"

    @newt.jit
    def block_assert(x_ptr, BLOCK: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, BLOCK))
        assert x > 0, "positive"                     # a block condition: every element

    with pytest.raises(AssertionError, match=r"(?s)program two.*program id \(2, 0, 0\)"):
        third_fails[(4,)](torch.zeros(1))
    block_assert[(1,)](torch.ones(8), BLOCK=8)
    with pytest.raises(AssertionError, match="positive"):
        block_assert[(1,)](torch.tensor([1.0] * 7 + [-1.0]), BLOCK=8)


def test_constexpr_errors_point_at_the_line():
    @newt.jit
    def bad_arange(x_ptr):
        nl.store(x_ptr + nl.arange(0, 6), 1.0)

    @newt.jit
    def small_dot(x_ptr):
        a = nl.load(x_ptr + nl.arange(0, 8)[:, None] * 8 + nl.arange(0, 8)[None, :])
        nl.dot(a, a)

    with pytest.raises(newt.CompilationError, match="power of two") as e:
        bad_arange[(1,)](torch.zeros(8))
    assert "nl.arange(0, 6)" in str(e.value) and "test_interpreter.py" in str(e.value)
    with pytest.raises(newt.CompilationError, match=">= 16"):
        small_dot[(1,)](torch.zeros(64))


def test_language_stubs_raise_outside_kernels():
    with pytest.raises(RuntimeError, match="NEWT_INTERPRET"):
        nl.program_id(0)


def test_every_builtin_is_implemented():
    from newt.interpreter.launch import NL
    for name in nl.BUILTINS:
        impl = getattr(NL, name)
        assert getattr(impl, "__newt_builtin__", None) is None, name


def test_programs_run_in_order_x_fastest():
    @newt.jit
    def order_kernel(counter_ptr, out_ptr):
        pid = (nl.program_id(2) * nl.num_programs(1) + nl.program_id(1)) * nl.num_programs(0) \
            + nl.program_id(0)
        nl.store(out_ptr + pid, nl.atomic_add(counter_ptr, 1))

    counter, out = torch.zeros(1, dtype=torch.int32), poison(24, torch.int32, "cpu")
    order_kernel[(2, 3, 4)](counter, out)
    check(out, torch.arange(24, dtype=torch.int32))


def test_imported_names_globals_and_meta():
    @newt.jit
    def imported(x_ptr, out_ptr, BLOCK: nl.constexpr):
        offs = ar(0, BLOCK)
        nl.store(out_ptr + offs, ld(x_ptr + offs) * GLOBAL_SCALE)

    seen = {}

    def grid(meta):
        seen.update(meta)
        return (1,)
    x, out = torch.randn(8), poison(8, torch.float32, "cpu")
    imported[grid](x, out, BLOCK=8, num_warps=2)
    check(out, x * 3)
    assert seen["num_warps"] == 2 and seen["BLOCK"] == 8


def test_unsigned_semantics():
    @newt.jit
    def unsigned_kernel(a_ptr, out_ptr):
        a = nl.load(a_ptr + nl.arange(0, 4))         # uint32
        nl.store(out_ptr + nl.arange(0, 4), a - 1)   # 0 - 1 wraps to 2**32 - 1
        nl.store(out_ptr + 4 + nl.arange(0, 4), a >> 1)
        nl.store(out_ptr + 8 + nl.arange(0, 4), (a > 1).to(nl.uint32))
        nl.store(out_ptr + 12 + nl.arange(0, 4), a // 3)

    a = torch.tensor([0, 1, 2 ** 32 - 1, 2 ** 31], dtype=torch.int64).to(torch.uint32)
    out = poison(16, torch.int64, "cpu")
    unsigned_kernel[(1,)](a, out.view(torch.int64))
    check(out, torch.tensor([2 ** 32 - 1, 0, 2 ** 32 - 2, 2 ** 31 - 1,
                             0, 0, 2 ** 31 - 1, 2 ** 30,
                             0, 0, 1, 1,
                             0, 0, (2 ** 32 - 1) // 3, 2 ** 31 // 3]))


def test_cpu_tensor_without_interpret_names_the_switch():
    newt.options.flags.interpret = False
    x = torch.randn(16)
    with pytest.raises(newt.NewtError, match="NEWT_INTERPRET"):
        oob_kernel[(1,)](x, x, 16, BLOCK=16)


def test_newt_language_through_the_package():
    @newt.jit
    def spelled_out(x_ptr, B: newt.language.constexpr):
        offs = newt.language.arange(0, B)
        newt.language.store(x_ptr + offs, offs * nl.constexpr(2) + newt.cdiv(B, 3))

    x = poison(8, torch.int32, "cpu")
    spelled_out[(1,)](x, B=8)
    check(x, torch.arange(8, dtype=torch.int32) * 2 + 3)


@newt.jit
def _kw_only(x_ptr, out_ptr, *, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n, other=0.0) * 2.0, mask=offs < n)


def test_keyword_only_parameters():
    x = torch.randn(20)
    out = poison(20, torch.float32, "cpu")
    _kw_only[(1,)](x, out, n=20, BLOCK=32)
    check(out, x * 2.0)


def test_launch_errors_name_the_launching_line():
    """Every launch error of the interpreter ends with the user's launching line, as on the GPU;
    a float beyond fp32's range names the argument and its type."""
    x = torch.randn(20)
    with pytest.raises(newt.LaunchError) as e:
        _kw_only[(-1,)](x, x, n=20, BLOCK=32)
    assert "launched at" in str(e.value) and "_kw_only[(-1,)](x, x, n=20" in str(e.value)

    @newt.jit
    def scaled(out_ptr, s):
        nl.store(out_ptr, s)
    with pytest.raises(newt.LaunchError) as e:
        scaled[(1,)](x, -1e39)
    msg = str(e.value)
    assert "`s`" in msg and "fp32" in msg and "scaled[(1,)](x, -1e39)" in msg, msg
    scaled[(1,)](x, 3.0e38)
    assert x[0].item() == pytest.approx(3.0e38, rel=1e-6)


def test_runtime_errors_are_newt_errors_at_the_kernel_line():
    """A kernel line that fails at run time (a zero range step known only at launch) raises a
    newt.KernelError naming the kernel, the program and the line; an out-of-bounds access is an
    OutOfBoundsError, a KernelError and an IndexError."""
    @newt.jit
    def stepped(x_ptr, s):
        for i in range(0, 4, s):
            nl.store(x_ptr + i, 1.0)

    with pytest.raises(newt.KernelError) as e:
        stepped[(2,)](torch.randn(8), 0)
    msg = str(e.value)
    assert "ValueError" in msg and "stepped" in msg and "for i in range(0, 4, s)" in msg, msg
    with pytest.raises(newt.OutOfBoundsError) as e:
        oob_kernel[(2,)](torch.randn(100), torch.randn(100), 100, BLOCK=64)
    assert isinstance(e.value, IndexError) and isinstance(e.value, newt.NewtError)
