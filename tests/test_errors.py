"""Catalogue of bad kernels: each must raise newt.CompilationError whose location is the exact
offending line (marked `# ERR` below) and whose message names the problem.

Runs the frontend only (newt.frontend.build_ir): no GPU, no NVRTC.
"""
import inspect

import pytest

import newt
import newt.language as nl
from newt.frontend import build_ir


def _sig(fn, **types):
    """Parameters ending in _ptr are *fp32 pointers, others i32, unless given in `types`."""
    sig = {}
    for name, p in inspect.signature(fn.fn).parameters.items():
        if fn.constexpr_names and name in fn.constexpr_names:
            continue
        sig[name] = types.get(name, "*fp32" if name.endswith("_ptr") else "i32")
    return sig


def _err_line(fn):
    lines, first = inspect.getsourcelines(fn.fn)
    for i, ln in enumerate(lines):
        if "# ERR" in ln:
            return first + i
    raise AssertionError("no # ERR marker")


CASES = []


def case(expected, constexprs=None, types=None, line_of=None):
    def deco(fn):
        CASES.append(pytest.param(fn, expected, constexprs or {}, types or {}, line_of,
                                  id=fn.__name__))
        return fn
    return deco


# ----------------------------------------------------------------------------- unsupported syntax

@case("lambda")
@newt.jit
def k_lambda(x_ptr):
    f = lambda v: v + 1  # ERR  # noqa: E731
    nl.store(x_ptr, f(1.0))


@case("list comprehension")
@newt.jit
def k_listcomp(x_ptr):
    a = [i for i in range(3)]  # ERR
    nl.store(x_ptr, a[0])


@case("generator expression")
@newt.jit
def k_genexp(x_ptr):
    a = sum(i for i in range(3))  # ERR
    nl.store(x_ptr, a)


@case("try/except")
@newt.jit
def k_try(x_ptr):
    try:  # ERR
        nl.store(x_ptr, 1.0)
    except Exception:
        pass


@case("with statement")
@newt.jit
def k_with(x_ptr):
    with open("f"):  # ERR
        pass


@case("nested function definition")
@newt.jit
def k_nested_def(x_ptr):
    def g(v):  # ERR
        return v
    nl.store(x_ptr, 1.0)


@case("global statement")
@newt.jit
def k_global(x_ptr):
    global CASES  # ERR
    nl.store(x_ptr, 1.0)


@case("break")
@newt.jit
def k_break(x_ptr, n):
    for i in range(n):
        break  # ERR


@case("class definition")
@newt.jit
def k_class(x_ptr):
    class A:  # ERR
        pass


@case("undefined name `foo`")
@newt.jit
def k_undefined(x_ptr):
    nl.store(x_ptr, foo)  # ERR  # noqa: F821


@case("immutable", {"BLOCK": 16})
@newt.jit
def k_setitem(x_ptr, BLOCK: nl.constexpr):
    x = nl.zeros((BLOCK,), nl.float32)
    x[0] = 1.0  # ERR
    nl.store(x_ptr + nl.arange(0, BLOCK), x)


@case("None and :", {"BLOCK": 16})
@newt.jit
def k_int_index(x_ptr, BLOCK: nl.constexpr):
    x = nl.zeros((BLOCK,), nl.float32)
    nl.store(x_ptr, x[0])  # ERR


@case("nl.dot", {"B": 16})
@newt.jit
def k_matmul_op(x_ptr, B: nl.constexpr):
    a = nl.zeros((B, B), nl.float16)
    c = a @ a  # ERR
    nl.store(x_ptr, nl.sum(c))


@case("**", {"B": 16})
@newt.jit
def k_pow(x_ptr, B: nl.constexpr):
    a = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), a ** 2)  # ERR


# ----------------------------------------------------------------------------- shapes, constexprs

@case("power of two", {"BLOCK": 100})
@newt.jit
def k_arange_pow2(x_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)  # ERR
    nl.store(x_ptr + offs, 1.0)


@case("compile-time constant")
@newt.jit
def k_arange_runtime(x_ptr, n):
    offs = nl.arange(0, n)  # ERR
    nl.store(x_ptr + offs, 1.0)


@case("compile-time constant")
@newt.jit
def k_zeros_runtime_shape(x_ptr, n):
    z = nl.zeros((n,), nl.float32)  # ERR
    nl.store(x_ptr, z)


@case("power of two")
@newt.jit
def k_full_pow2(x_ptr):
    z = nl.full((4, 6), 1.0, nl.float32)  # ERR
    nl.store(x_ptr, nl.sum(z))


@case("cannot reshape", {"B": 16})
@newt.jit
def k_reshape(x_ptr, B: nl.constexpr):
    a = nl.zeros((B, B), nl.float32)
    c = nl.reshape(a, (B, 8))  # ERR
    nl.store(x_ptr, nl.sum(c))


@case("cannot broadcast")
@newt.jit
def k_broadcast(x_ptr):
    a = nl.arange(0, 64)
    c = nl.arange(0, 32)
    d = a + c  # ERR
    nl.store(x_ptr + d, 1.0)


@case("static_assert failed: B too small", {"B": 8})
@newt.jit
def k_static_assert(x_ptr, B: nl.constexpr):
    nl.static_assert(B >= 16, "B too small")  # ERR


@case("axis must be")
@newt.jit
def k_program_id_axis(x_ptr):
    p = nl.program_id(3)  # ERR
    nl.store(x_ptr, p)


# ----------------------------------------------------------------------------- types

@case("bitwise operator &", {"B": 16})
@newt.jit
def k_bitwise_float(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    y = x & 1  # ERR
    nl.store(x_ptr + nl.arange(0, B), y)


@case("~ (bitwise not)", {"B": 16})
@newt.jit
def k_invert_float(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), ~x)  # ERR


@case("cannot add two pointers")
@newt.jit
def k_ptr_plus_ptr(x_ptr, y_ptr):
    z = x_ptr + y_ptr  # ERR
    nl.store(z, 1.0)


@case("pointer offsets must be integers")
@newt.jit
def k_ptr_plus_float(x_ptr):
    nl.store(x_ptr + 1.5, 1.0)  # ERR


@case("//", {"B": 16})
@newt.jit
def k_floordiv_float(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), x // 2.0)  # ERR


@case("signedness", types={"u": "u32"})
@newt.jit
def k_div_signedness(x_ptr, n, u):
    nl.store(x_ptr, n // u)  # ERR


@case("is not a reduction inside a kernel", {"B": 16})
@newt.jit
def k_python_max_block(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr, max(x))  # ERR


# ----------------------------------------------------------------------------- control flow

@case("must be a scalar", {"B": 16})
@newt.jit
def k_block_if(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    if x > 0:  # ERR
        nl.store(x_ptr, 1.0)


@case("while condition")
@newt.jit
def k_while_const(x_ptr):
    while True:  # ERR
        nl.store(x_ptr, 1.0)


@case("loop-carried variable `acc`", {"B": 16})
@newt.jit
def k_carried_type(x_ptr, n, B: nl.constexpr):
    acc = 0
    for i in range(n):  # ERR
        acc += nl.load(x_ptr + i)
    nl.store(x_ptr, acc)


@case("defined inside the loop")
@newt.jit
def k_loop_local(x_ptr, n):
    for i in range(n):
        t = nl.load(x_ptr + i)
    nl.store(x_ptr, t)  # ERR


@case("only one branch")
@newt.jit
def k_branch_local(x_ptr, n):
    if n > 0:
        t = 1.0
    nl.store(x_ptr, t)  # ERR


@case("then branch but")
@newt.jit
def k_branch_types(x_ptr, y_ptr, n):
    v = nl.load(x_ptr)
    if n > 0:  # ERR
        v = nl.load(y_ptr.to(nl.pointer_type(nl.int32)))
    nl.store(x_ptr, v)


@case("cannot return a value")
@newt.jit
def k_return_value(x_ptr):
    return 1  # ERR


@case("return inside a loop")
@newt.jit
def k_return_in_loop(x_ptr, n):
    for i in range(n):
        return  # ERR


@case("range step is 0")
@newt.jit
def k_range_zero_step(x_ptr, n):
    for i in range(n, 0, 0):  # ERR
        nl.store(x_ptr + i, 1.0)


@case("must be an integer")
@newt.jit
def k_range_float(x_ptr, n):
    for i in range(0, 2.5):  # ERR
        nl.store(x_ptr, 1.0)


# ----------------------------------------------------------------------------- calls

@newt.jit
def _recursive(x):
    return _recursive(x)  # ERR


@case("recursion", line_of=_recursive)
@newt.jit
def k_recursion(x_ptr):
    nl.store(x_ptr, _recursive(1.0))


def _plain(v):
    return v * 2


@case("plain Python function `_plain`", {"B": 16})
@newt.jit
def k_plain_call(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), _plain(x))  # ERR


@newt.jit
def _bad_helper(x):
    return x & 1  # ERR


@case("bitwise", line_of=_bad_helper)
@newt.jit
def k_error_in_callee(x_ptr):
    nl.store(x_ptr, _bad_helper(nl.load(x_ptr)))


@case("has no attribute `nope`")
@newt.jit
def k_bad_attribute(x_ptr):
    nl.store(x_ptr, nl.nope(1.0))  # ERR


# ----------------------------------------------------------------------------- memory, dot, atomics

@case("scalar pointer", {"B": 16})
@newt.jit
def k_store_block_scalar_ptr(x_ptr, B: nl.constexpr):
    nl.store(x_ptr, nl.zeros((B,), nl.float32))  # ERR


@case("mask must be a boolean", {"B": 16})
@newt.jit
def k_mask_not_bool(x_ptr, B: nl.constexpr):
    offs = nl.arange(0, B)
    nl.store(x_ptr + offs, 1.0, mask=offs)  # ERR


@case("needs a `mask`", {"B": 16})
@newt.jit
def k_other_without_mask(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B), other=0.0)  # ERR
    nl.store(x_ptr + nl.arange(0, B), x)


@case("needs a pointer")
@newt.jit
def k_load_non_pointer(x_ptr, n):
    x = nl.load(n)  # ERR
    nl.store(x_ptr, x)


@case("M, N and K >= 16")
@newt.jit
def k_dot_small(x_ptr):
    a = nl.zeros((16, 8), nl.float16)
    b = nl.zeros((8, 16), nl.float16)
    c = nl.dot(a, b)  # ERR
    nl.store(x_ptr, nl.sum(c))


@case("one dtype")
@newt.jit
def k_dot_dtypes(x_ptr):
    a = nl.zeros((16, 16), nl.float16)
    b = nl.zeros((16, 16), nl.float32)
    c = nl.dot(a, b)  # ERR
    nl.store(x_ptr, nl.sum(c))


@case("2-D block")
@newt.jit
def k_dot_rank(x_ptr):
    a = nl.zeros((16,), nl.float16)
    c = nl.dot(a, a)  # ERR
    nl.store(x_ptr, nl.sum(c))


@case("integer pointee")
@newt.jit
def k_atomic_and_float(x_ptr):
    nl.atomic_and(x_ptr, 1.0)  # ERR


@case("bitcast needs types of equal width")
@newt.jit
def k_bitcast_width(x_ptr):
    v = nl.load(x_ptr)
    nl.store(x_ptr, v.to(nl.float16, bitcast=True))  # ERR


@case("cast them to nl.float16 or nl.float32 first", types={"x_ptr": "*fp8e4nv"})
@newt.jit
def k_fp8_arith(x_ptr):
    v = nl.load(x_ptr)
    nl.store(x_ptr, v * 2.0)  # ERR


@pytest.mark.parametrize("fn, expected, constexprs, types, line_of", CASES)
def test_error_points_at_line(fn, expected, constexprs, types, line_of):
    with pytest.raises(newt.CompilationError) as info:
        build_ir(fn, _sig(fn, **types), constexprs)
    e = info.value
    assert expected in e.msg, e.msg
    assert e.loc is not None
    assert e.loc.line == _err_line(line_of or fn), str(e)
    assert e.loc.file == __file__
    assert "# ERR" in e.loc.source_line
    # the formatted message shows file:line:col, the line and a caret
    text = str(e)
    assert f"{__file__}:{e.loc.line}:" in text and "^" in text


def test_catalogue_is_large():
    assert len(CASES) >= 40


def test_star_args_kernel():
    def k(*args):
        pass
    with pytest.raises(newt.CompilationError, match=r"\*args"):
        build_ir(newt.jit(k), {}, {})


def test_missing_signature_entry():
    @newt.jit
    def k(x_ptr, n):
        nl.store(x_ptr, n)
    with pytest.raises(newt.CompilationError, match="neither in the signature"):
        build_ir(k, {"x_ptr": "*fp32"}, {})


# ----------------------------------------------------------------------------- whole-kernel limits

@newt.jit
def k_big_transpose(x_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr):
    r = nl.arange(0, M)[:, None]
    c = nl.arange(0, N)[None, :]
    nl.store(out_ptr + c * M + r, nl.trans(nl.load(x_ptr + r * N + c)).trans())


def test_shared_memory_above_the_arch_limit_is_a_compile_error():
    """A 256x128 fp32 transpose goes through 128 KB of shared memory: above sm_86's 99 KB
    (101376 bytes) opt-in maximum, so newt.compile refuses it for that arch, pointing at the
    kernel; sm_90a (227 KB) takes it."""
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32"}
    with pytest.raises(newt.CompilationError) as info:
        newt.compile(k_big_transpose, sig, {"M": 256, "N": 128}, arch="sm_86", num_warps=4)
    e = info.value
    assert "shared memory" in e.msg and "101376" in e.msg and "k_big_transpose" in e.msg
    lines, first = inspect.getsourcelines(k_big_transpose.fn)
    assert e.loc is not None and e.loc.file == __file__
    assert first <= e.loc.line < first + len(lines)


@pytest.mark.parametrize("arch, limit", [("sm_90a", 232448), ("sm_80", 166912),
                                         ("sm_86", 101376), ("sm_89", 101376)])
def test_static_plus_dynamic_shared_memory_checked_per_arch(arch, limit):
    """The compiler's last check adds the static `__shared__` bytes of the ptxas report to
    newt's dynamic arena and compares with the arch's opt-in maximum."""
    import types
    from newt.compiler import _check_shared_memory
    from newt.ir.core import Loc
    from newt.options import Options
    fn = types.SimpleNamespace(name="kern", attrs={"smem_bytes": 4096},
                               loc=Loc(__file__, 7, 0, "def kern():"))
    _check_shared_memory(fn, Options(arch=arch), {"shared_bytes": limit - 4096})   # fits exactly
    with pytest.raises(newt.CompilationError) as info:
        _check_shared_memory(fn, Options(arch=arch), {"shared_bytes": limit - 4095})
    assert f"at most {limit} bytes" in info.value.msg and "4096 dynamic" in info.value.msg
    assert info.value.loc.line == 7


def test_runtime_value_where_a_constexpr_is_needed_points_at_the_line():
    """A runtime int used as a block shape is a CompilationError at the user's line (see the
    k_arange_runtime case above); through the JIT it surfaces at the first launch."""
    @newt.jit
    def k(x_ptr, n):
        nl.store(x_ptr + nl.arange(0, n), 1.0)  # ERR
    with pytest.raises(newt.CompilationError) as info:
        build_ir(k, {"x_ptr": "*fp32", "n": "i32"}, {})
    assert "compile-time constant" in info.value.msg
    assert info.value.loc.line == _err_line(k)


def test_none_is_a_constexpr_none_everywhere():
    """None passed to a parameter that is not annotated constexpr: the frontend sees the
    constexpr None (as the interpreter and Triton do), so `is None` branches are pruned."""
    @newt.jit
    def k(x_ptr, b_ptr, B: nl.constexpr):
        offs = nl.arange(0, B)
        x = nl.load(x_ptr + offs)
        if b_ptr is not None:
            x += nl.load(b_ptr + offs)
        nl.store(x_ptr + offs, x)
    ir_none = build_ir(k, {"x_ptr": "*fp32"}, {"b_ptr": None, "B": 16})
    assert [p.name for p in ir_none.params] == ["x_ptr"]
