"""One acceptance rule, one set of results: every bad program of the catalogues is rejected by
the compiler and by the interpreter with the same CompilationError at the same line, and every
valid program of this file computes the same result on both paths, checked against torch.

Bad programs: tests/test_errors.py's catalogue (the frontend's rejections) and the cases below
(programs the interpreter used to run, or to fail on with a raw Python exception). The compiled
path is newt.compile (frontend, passes, NVRTC: no GPU); the interpreter runs with arguments of
the catalogue's signature. Valid programs run on the interpreter and through the CPU emulation
of their generated CUDA C++ (tests/test_codegen_emulator.py), and on the GPU when there is
one."""
from __future__ import annotations

import pytest
import torch

import newt
import newt.language as nl
import newt.options
import test_errors
from test_errors import _err_line, _sig
from test_runtime_launch import fake_lib_path, gpu  # noqa: F401  (fixtures: the stand-in GPU)
from test_semantics_agree import PATHS, run

CASES = []


def case(expected, constexprs=None, types=None, line_of=None):
    def deco(fn):
        CASES.append(pytest.param(fn, expected, constexprs or {}, types or {}, line_of,
                                  id=fn.__name__))
        return fn
    return deco


# ----------------------------------------------------------------------------- bad programs

@case("continue")
@newt.jit
def k_continue(x_ptr, n):
    for i in range(n):
        if i == 2:
            continue  # ERR
        nl.store(x_ptr + i, 1.0)


@case("break")
@newt.jit
def k_break_while(x_ptr, n):
    i = 0
    while i < n:
        i += 1
        break  # ERR
    nl.store(x_ptr, i)


@case(":=")
@newt.jit
def k_walrus(x_ptr, n):
    if (m := n + 1) > 3:  # ERR
        nl.store(x_ptr, m)


@case("yield")
@newt.jit
def k_yield(x_ptr):
    yield 1  # ERR
    nl.store(x_ptr, 1.0)


@case("import")
@newt.jit
def k_import(x_ptr):
    import math  # ERR
    nl.store(x_ptr, math.pi)


@case("del")
@newt.jit
def k_del(x_ptr):
    a = 1.0
    del a  # ERR
    nl.store(x_ptr, 1.0)


@case("unsupported input dtype int16", {"B": 16})
@newt.jit
def k_dot_int16(x_ptr, B: nl.constexpr):
    a = nl.zeros((B, B), nl.int16)
    c = nl.dot(a, a)  # ERR
    nl.store(x_ptr, nl.sum(c).to(nl.float32))


@case("axis 2", {"B": 16})
@newt.jit
def k_sum_axis_out_of_range(x_ptr, B: nl.constexpr):
    a = nl.zeros((B, B), nl.float32)
    nl.store(x_ptr + nl.arange(0, B), nl.sum(a, axis=2))  # ERR


@case("axis 1", {"B": 16})
@newt.jit
def k_cumsum_axis_out_of_range(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), nl.cumsum(x, axis=1))  # ERR


@case("expand_dims", {"B": 16})
@newt.jit
def k_expand_dims_out_of_range(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    y = nl.expand_dims(x, 3)  # ERR
    nl.store(x_ptr + nl.arange(0, B), nl.sum(y, axis=1))


@case("compile-time sequence cannot be indexed with a runtime value")
@newt.jit
def k_tuple_runtime_index(x_ptr, n):
    t = (1.0, 2.0, 3.0)
    nl.store(x_ptr, t[n])  # ERR


@case("elements")
@newt.jit
def k_arange_too_large(x_ptr):
    offs = nl.arange(0, 2 ** 24)  # ERR
    nl.store(x_ptr + offs, 1.0)


@case("dtype", {"B": 16})
@newt.jit
def k_full_torch_dtype(x_ptr, B: nl.constexpr):
    x = nl.full((B,), 1.0, torch.float32)  # ERR
    nl.store(x_ptr + nl.arange(0, B), x)


@case("dtype", {"B": 16})
@newt.jit
def k_cast_to_string(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), x.to("float16"))  # ERR


@case("not a permutation", {"B": 16})
@newt.jit
def k_permute_bad_dims(x_ptr, B: nl.constexpr):
    a = nl.zeros((B, B), nl.float32)
    b = nl.permute(a, (0, 1, 2))  # ERR
    nl.store(x_ptr, nl.sum(b))


@case("cannot broadcast", {"B": 16})
@newt.jit
def k_where_shapes(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    y = nl.zeros((2 * B,), nl.float32)
    nl.store(x_ptr + nl.arange(0, B), nl.where(x > 0, x, y))  # ERR


@case("pointer", {"B": 16})
@newt.jit
def k_atomic_on_value(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.atomic_add(x, 1.0)  # ERR


@case("pointer offsets must be integers", {"B": 16})
@newt.jit
def k_pointer_plus_float(x_ptr, B: nl.constexpr):
    nl.store(x_ptr + 1.5, 1.0)  # ERR


@case("can only concatenate str")
@newt.jit
def k_string_arith(x_ptr):
    nl.store(x_ptr, "a" + 1.0)  # ERR


@case("block of shape", {"B": 16})
@newt.jit
def k_while_on_block(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    while x > 0:  # ERR
        x -= 1.0
    nl.store(x_ptr + nl.arange(0, B), x)


@case("reshape", {"B": 16})
@newt.jit
def k_view_mismatch(x_ptr, B: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, B))
    nl.store(x_ptr + nl.arange(0, B), nl.reshape(x, (B, 2)))  # ERR


@case("program_id")
@newt.jit
def k_program_id_block_axis(x_ptr):
    nl.store(x_ptr, nl.program_id(-1).to(nl.float32))  # ERR


@newt.jit
def _returns_on_some_paths(v):
    r = v
    if v > 0:
        if v > 1:  # ERR
            return 1.0
        r = v * 2.0        # the path that did not return goes on after the outer `if`
    return r


@case("needs every path", line_of=_returns_on_some_paths)
@newt.jit
def k_return_on_some_paths(x_ptr):
    nl.store(x_ptr, _returns_on_some_paths(nl.load(x_ptr)))


@newt.jit
def _value_or_none(v):
    if v > 0:  # ERR
        return 1.0


@case("None on the other", line_of=_value_or_none)
@newt.jit
def k_value_or_none(x_ptr):
    nl.store(x_ptr, _value_or_none(nl.load(x_ptr)))


# a scalar parameter of a type no Python argument takes (u32) exists only in the AOT catalogue
_PYTHON_SCALARS = {"i32", "i64", "u64", "fp32", "i1"}
BAD = [c for c in test_errors.CASES
       if all(t.startswith("*") or t in _PYTHON_SCALARS for t in c.values[3].values())] + CASES


def _value(t: str):
    """An argument of a catalogue signature's type: random tensors, an int that is neither 1
    nor a multiple of 16 (the specialization the catalogue compiles with)."""
    if t.startswith("*"):
        dt = newt.dtypes.from_signature(t[1:]).to_torch()
        if dt.is_floating_point and dt.itemsize > 1:
            return torch.randn(256).to(dt)
        return torch.randint(1, 50, (256,)).to(dt)
    return {"i32": 7, "i64": 2 ** 40 + 7, "u32": 7, "u64": 2 ** 63 + 7, "fp32": 1.5,
            "i1": True}[t]


def _interpreted_error(fn, sig, constexprs):
    args = {k: _value(t) for k, t in sig.items()}
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        fn[(1,)](**args, **constexprs)
    except newt.CompilationError as e:
        return e
    finally:
        newt.options.flags.interpret = old
    raise AssertionError(f"the interpreter ran {fn.__name__}")


@pytest.mark.parametrize("fn, expected, constexprs, types, line_of", BAD)
def test_both_paths_reject_at_the_same_line(fn, expected, constexprs, types, line_of):
    sig = _sig(fn, **types)
    with pytest.raises(newt.CompilationError) as compiled:
        newt.compile(fn, sig, constexprs, arch="sm_90a")
    e = compiled.value
    assert expected in e.msg, str(e)
    assert e.loc is not None and e.loc.line == _err_line(line_of or fn), str(e)
    i = _interpreted_error(fn, sig, constexprs)
    assert (i.loc.file, i.loc.line, i.msg) == (e.loc.file, e.loc.line, e.msg), f"{i}\n{e}"


def test_the_catalogue_is_large():
    assert len(BAD) >= 70


# ----------------------------------------------------------------------------- valid programs

@newt.jit
def v_logical_blocks(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=1.0)
    y = nl.load(y_ptr + offs, mask=offs < n, other=1.0)
    a = (x > 0) and (y > 0)
    o = (x > 0) or (y < -0.5)
    t = not (x > 0.5)
    m = x and 0.0 < 1      # a block and a compile-time true: the block's truth value
    r = a.to(nl.float32) + 2 * o.to(nl.float32) + 4 * t.to(nl.float32) + 8 * m.to(nl.float32)
    nl.store(out_ptr + offs, r, mask=offs < n)


def _logical_ref(x, y, n):
    return ((x > 0) & (y > 0)).float() + 2 * ((x > 0) | (y < -0.5)).float() + \
        4 * (~(x > 0.5)).float() + 8 * (x != 0).float()


@newt.jit
def v_scalar_logic(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if not (pid > 0) or n < 0:
        x = x * 2.0
    if pid > 0 and n > BLOCK + 3:
        x = x + 1.0
    nl.store(out_ptr + offs, x, mask=offs < n)


def _scalar_logic_ref(x, n):
    r = x.clone()
    r[:16] *= 2.0
    r[16:] += 1.0
    return r


@newt.jit
def v_keyword_only(x_ptr, out_ptr, n, *, SCALE: nl.constexpr, BLOCK: nl.constexpr = 32):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)


@newt.jit
def v_carried_python_numbers(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    h = nl.load(x_ptr + offs, mask=offs < n, other=0.0).to(nl.float16)
    i = 0
    acc = 0.0          # carried: an fp32 scalar, so acc + fp16 sums in fp32
    while i < n:
        acc += nl.sum(h.to(nl.float32)) * i.to(nl.float32)
        i += 1
    s = 0
    for j in range(0, 3):
        s = s + j
    nl.store(out_ptr + offs, acc + s.to(nl.float32) + h, mask=offs < n)


def _carried_ref(x, n):
    h = x.half().float()
    acc = torch.tensor(0.0)
    for i in range(n):
        acc = acc + h.sum() * i
    return acc + 3.0 + h


@newt.jit
def _both_positive(a, b):
    return a > 0 and b > 0


@newt.jit
def v_logic_in_callee(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = nl.load(y_ptr + offs, mask=offs < n, other=0.0)
    nl.store(out_ptr + offs, nl.where(_both_positive(x, y), x, y), mask=offs < n)


@newt.jit
def v_tuple_constant_index(x_ptr, out_ptr, n, BLOCK: nl.constexpr, K: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    t = (1.5, -2.0, 3.25)
    x = nl.load(x_ptr + offs, mask=offs < n)
    nl.store(out_ptr + offs, x * t[K] + t[K - 1], mask=offs < n)


@newt.jit
def v_countdown(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    acc = nl.zeros((BLOCK,), dtype=nl.float32)
    for i in range(n - 1, -1, -3):                   # runtime start, constant negative step
        acc = acc * 0.5 + nl.load(x_ptr + i) + x     # the order matters: acc halves each step
    for j in nl.range(7, 2, -2):                     # constant bounds counting down
        acc = acc * 0.25 + j
    nl.store(out_ptr + offs, acc, mask=offs < n)


def _countdown_ref(x, n):
    acc = torch.zeros_like(x)
    for i in range(n - 1, -1, -3):
        acc = acc * 0.5 + x[i] + x
    for j in range(7, 2, -2):
        acc = acc * 0.25 + j
    return acc


@newt.jit
def v_pointer_addresses(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    addr = (x_ptr + offs).to(nl.int64)               # pointers to integer addresses and back
    x = nl.load(addr.to(nl.pointer_type(nl.float32)), mask=offs < n)
    first = nl.load(x_ptr.to(nl.uint64).to(nl.pointer_type(nl.float32)))
    step = ((addr - x_ptr.to(nl.int64)) // 4).to(nl.float32)
    nl.store(out_ptr + offs, x * 2 + step + first, mask=offs < n)


@newt.jit
def v_chained_comparison(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    r = nl.where(-0.5 < x <= 1.0, x, 0.0)            # on a block: elementwise and
    if 0 < n < BLOCK:                                # on runtime scalars
        r = r + 10.0
    if 0 <= n < 5:
        r = r + 100.0
    nl.store(out_ptr + offs, r, mask=offs < n)


@newt.jit
def _classify(v, t):
    if v > t:
        if v > 2 * t:
            return 2, v * 2.0
        return 1, v
    elif v < -t:
        return -1, -v
    return 0, v * 0.0


@newt.jit
def _store_if_positive(p, v):
    if v < 0:
        return
    nl.store(p, v + 0.5)


@newt.jit
def _scaled_or_relu(x, s):
    if s > 0:
        return x * s
    return nl.where(x > 0, x, 0.0)


@newt.jit
def v_early_returns(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    """`return` inside runtime `if`s of @jit helpers (each path returns, or falls off the end)."""
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    y = _scaled_or_relu(x, nl.load(x_ptr) - 0.25)
    for i in range(n):
        c, v = _classify(nl.load(x_ptr + i), 0.5)
        y += nl.where(offs == i, v + c.to(nl.float32), 0.0)
    nl.store(out_ptr + offs, y, mask=offs < n)
    for i in range(n):
        _store_if_positive(out_ptr + i, nl.load(out_ptr + i))


def _early_returns_ref(x):
    s = x[0] - 0.25
    y = x * s if s > 0 else x.clamp(min=0.0)
    v = torch.where(x > 0.5, torch.where(x > 1.0, x * 2.0 + 2, x + 1), torch.where(
        x < -0.5, -x - 1, 0.0))
    y = y + v
    return torch.where(y < 0, y, y + 0.5)


@newt.jit
def v_if_yields_numbers(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    """Python numbers assigned in the branches of a runtime `if`, or chosen by `a if c else b`,
    are typed scalars after it (the compiler's `if` yields them), in the interpreter too."""
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    if nl.load(x_ptr) > 0:
        c = 1
        t = (2.5, 3)
    else:
        c = 3
        t = (0.5, 4)
    e = 10 if nl.load(x_ptr + 1) > 0 else 20          # `x if c else y` on a runtime c too
    y = x * c.to(nl.float32) + t[0].to(nl.float32) * t[1].to(nl.float32) + e.to(nl.float32)
    nl.store(out_ptr + offs, y, mask=offs < n)


def _if_yields_ref(x):
    return (x * 1 + 7.5 if x[0] > 0 else x * 3 + 2.0) + (10.0 if x[1] > 0 else 20.0)


N = 29
VALID = [
    pytest.param(v_logical_blocks, 2, 1, dict(BLOCK=32), lambda x, y: _logical_ref(x, y, N),
                 id="and_or_not_on_blocks"),
    pytest.param(v_scalar_logic, 1, 2, dict(BLOCK=16), lambda x: _scalar_logic_ref(x, N),
                 id="and_or_not_on_scalars"),
    pytest.param(v_keyword_only, 1, 1, dict(SCALE=3), lambda x: x * 3, id="keyword_only_constexpr"),
    pytest.param(v_carried_python_numbers, 1, 1, dict(BLOCK=32), lambda x: _carried_ref(x, N),
                 id="loop_carried_python_numbers"),
    pytest.param(v_logic_in_callee, 2, 1, dict(BLOCK=32),
                 lambda x, y: torch.where((x > 0) & (y > 0), x, y), id="logic_in_a_callee"),
    pytest.param(v_countdown, 1, 1, dict(BLOCK=32), lambda x: _countdown_ref(x, N),
                 id="range_with_a_negative_step"),
    pytest.param(v_pointer_addresses, 1, 1, dict(BLOCK=32),
                 lambda x: x * 2 + torch.arange(N) + x[0], id="pointer_to_address_and_back"),
    pytest.param(v_chained_comparison, 1, 1, dict(BLOCK=32),
                 lambda x: torch.where((x > -0.5) & (x <= 1.0), x, 0.0) + 10.0,
                 id="chained_comparison"),
    pytest.param(v_early_returns, 1, 1, dict(BLOCK=32), _early_returns_ref,
                 id="return_inside_runtime_if_of_a_helper"),
    pytest.param(v_if_yields_numbers, 1, 1, dict(BLOCK=32), _if_yields_ref,
                 id="runtime_if_yields_python_numbers"),
    pytest.param(v_tuple_constant_index, 1, 1, dict(BLOCK=32, K=2), lambda x: x * 3.25 - 2.0,
                 id="tuple_constant_index"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kernel, n_in, programs, constexprs, ref", VALID)
def test_valid_programs_agree_with_torch(path, kernel, n_in, programs, constexprs, ref):
    ins = [torch.randn(N) for _ in range(n_in)]
    out = torch.full((N,), float("nan"))
    run(path, kernel, (programs,), *ins, out, N, **constexprs)
    torch.testing.assert_close(out, ref(*ins), rtol=1e-5, atol=1e-5)


@newt.jit
def _other_from_index_math(x_ptr, h_ptr, out_ptr, hout_ptr, M, N, BM: nl.constexpr,
                           BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    fill = rn[None, :].to(nl.float32) * -1.0 - rm[:, None]   # index math, broadcast
    x = nl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=m, other=fill)
    nl.store(out_ptr + rm[:, None] * BN + rn[None, :], x)
    h = nl.load(h_ptr + rn, mask=rn < N, other=(rn + 100).to(nl.float16), volatile=True)
    nl.store(hout_ptr + rn, h)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("BM", [2, 8])
def test_load_other_computed_from_indices(path, BM):
    """A load's `other` that is index math (never held in an array: the generated code computes
    it where it is used) on the one-slot-per-thread path: the generated C++ named an array it
    never declared."""
    M, N, BN = BM - 1, 11, 16
    x, h = torch.randn(M, N), torch.randn(N).half()
    out = torch.full((BM, BN), float("nan"))
    hout = torch.full((BN,), float("nan"), dtype=torch.float16)
    run(path, _other_from_index_math, (1,), x, h, out, hout, M, N, BM=BM, BN=BN)
    want = -torch.arange(BN).float()[None, :] - torch.arange(BM).float()[:, None]
    want[:M, :N] = x
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(hout, torch.cat([h, torch.arange(N, BN).half() + 100]))


# ----------------------------------------------------------------------------- bad launches

@newt.jit
def _launched(x_ptr, out_ptr, n, s, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=offs < n) * s, mask=offs < n)


def _bad_launches(x):
    """(name, a call of `_launched` that must raise a LaunchError naming its own line)."""
    k = _launched
    return [
        ("too_many_arguments", lambda: k[(1,)](x, x, 8, 2.0, 16, 3)),
        ("missing_argument", lambda: k[(1,)](x, x, 8, BLOCK=16)),
        ("unknown_keyword", lambda: k[(1,)](x, x, 8, 2.0, BLOCK=16, BLK=3)),
        ("tensor_constexpr", lambda: k[(1,)](x, x, 8, 2.0, BLOCK=x)),
        ("unhashable_constexpr", lambda: k[(1,)](x, x, 8, 2.0, BLOCK=[16])),
        ("string_argument", lambda: k[(1,)](x, x, "8", 2.0, BLOCK=16)),
        ("complex_tensor", lambda: k[(1,)](x.to(torch.complex64), x, 8, 2.0, BLOCK=16)),
        ("float_beyond_fp32", lambda: k[(1,)](x, x, 8, 1e39, BLOCK=16)),
        ("int_beyond_64_bits", lambda: k[(1,)](x, x, 2 ** 70, 2.0, BLOCK=16)),
        ("negative_grid", lambda: k[(-1,)](x, x, 8, 2.0, BLOCK=16)),
        ("four_dimensional_grid", lambda: k[(1, 1, 1, 1)](x, x, 8, 2.0, BLOCK=16)),
        ("bad_num_warps", lambda: k[(1,)](x, x, 8, 2.0, BLOCK=16, num_warps=3)),
        ("bad_num_stages", lambda: k[(1,)](x, x, 8, 2.0, BLOCK=16, num_stages=0)),
    ]


_BAD_LAUNCH_NAMES = [name for name, _ in _bad_launches(None)]


def _launch_error(call):
    with pytest.raises(newt.LaunchError) as e:
        call()
    msg = str(e.value)
    assert "launched at" in msg and "test_agreement.py" in msg, msg
    return msg


@pytest.mark.parametrize("name", _BAD_LAUNCH_NAMES)
def test_bad_launches_are_launch_errors_on_both_paths(gpu, name):
    """Every bad launch is a LaunchError that names the launching line, on the compiled path
    (a stand-in driver: tests/test_runtime_launch.py) and on the interpreter."""
    x = torch.randn(16)
    call = dict(_bad_launches(x))[name]
    _launch_error(call)
    newt.options.flags.interpret = True
    try:
        _launch_error(call)
    finally:
        newt.options.flags.interpret = False



def test_an_argument_given_twice_names_the_kernel_and_the_parameter(gpu):
    """Positionally and by keyword: on the compiled path Python reports it before any newt code
    runs (as for a Triton kernel), with the kernel's name; the interpreter binds the arguments
    itself and says the same in a LaunchError."""
    x = torch.randn(16)
    for _ in range(2):   # the first launch (generating the launch function) and a later one
        with pytest.raises(TypeError, match=r"^_launched\(\) got multiple values for argument "
                                            r"'BLOCK'"):
            _launched[(1,)](x, x, 8, 2.0, 16, BLOCK=16)
        _launched[(1,)](x, x, 8, 2.0, BLOCK=16)
    newt.options.flags.interpret = True
    try:
        msg = _launch_error(lambda: _launched[(1,)](x, x, 8, 2.0, 16, BLOCK=16))
        assert "multiple values for argument 'BLOCK'" in msg and "_launched" in msg
    finally:
        newt.options.flags.interpret = False
