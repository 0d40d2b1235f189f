"""Frontend: build_ir on a range of kernels; the IR verifies and has the expected ops and types.

No GPU and no NVRTC: only Python AST -> IR (newt.frontend) and the IR checks (newt.ir).
"""
import inspect

import pytest
import torch

import newt
import newt.language as nl
from newt import dtypes as D
from newt.frontend import build_ir
from newt.ir import format_function, verify


def build(fn, constexprs=None, spec=None, **types):
    sig = {}
    for name in inspect.signature(fn.fn).parameters:
        if name in fn.constexpr_names or (constexprs and name in constexprs):
            continue
        sig[name] = types.get(name, "*fp32" if name.endswith("_ptr") else "i32")
    f = build_ir(fn, sig, constexprs or {}, spec)
    verify(f)
    return f


def ops(f, opcode=None, **attrs):
    return [op for op in f.walk() if (opcode is None or op.opcode == opcode)
            and all(op.attrs.get(k) == v for k, v in attrs.items())]


# ----------------------------------------------------------------------------- basic kernels

@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x + y, mask=mask)


def test_add_kernel():
    f = build(add_kernel, {"BLOCK": 1024}, {"x_ptr": {"divisible_by_16": True}})
    text = format_function(f)
    assert [p.name for p in f.params] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert [p.index for p in f.params] == [0, 1, 2, 3]
    assert f.params[0].divisible_by_16 and f.params[0].value.attrs["divisible_by_16"]
    assert "arange {start=0, end=1024} : i32[1024]" in text
    assert len(ops(f, "addptr")) == 3
    (ld,) = ops(f, "load")[:1]
    assert ld.attrs["has_mask"] and ld.result.type.shape == (1024,)
    st = ops(f, "store")[0]
    assert st.operands[1].dtype is D.float32 and st.attrs["has_mask"]
    assert st.loc.line == inspect.getsourcelines(add_kernel.fn)[1] + 7


@newt.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK)
    mask = cols < n_cols
    x = nl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - nl.max(x, axis=0)
    num = nl.exp(x)
    nl.store(out_ptr + row * out_stride + cols, num / nl.sum(num, axis=0), mask=mask)


def test_softmax_kernel():
    f = build(softmax_kernel, {"BLOCK": 2048})
    assert ops(f, "reduce", kind="max") and ops(f, "reduce", kind="sum")
    assert ops(f, "unary", op="exp") and ops(f, "binary", op="div")
    ld = ops(f, "load")[0]
    assert ld.attrs["has_other"] and ld.operands[2].type.shape == (2048,)


# ----------------------------------------------------------------------------- promotion

@newt.jit
def binop_kernel(x_ptr, y_ptr, o_ptr, OP: nl.constexpr):
    offs = nl.arange(0, 16)
    x = nl.load(x_ptr + offs)
    y = nl.load(y_ptr + offs)
    if OP == "add":
        z = x + y
    elif OP == "mul":
        z = x * y
    elif OP == "div":
        z = x / y
    elif OP == "xs":
        z = x * 2.0
    else:
        z = x + 1
    nl.store(o_ptr + offs, z)


def _result_dtype(f):
    return ops(f, "store")[0].operands[0].dtype.element_ty, \
        next(op for op in f.walk() if op.opcode == "binary").result.dtype


PAIRS = [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"), ("i8", "i32"), ("i32", "i64"),
         ("i32", "fp16"), ("u8", "u8"), ("i16", "fp32"), ("fp32", "fp64"), ("u8", "i16"),
         ("i1", "i32"), ("i8", "fp16")]


# Where Triton 3.6's promotion and PyTorch's differ (checked against Triton's frontend):
# fp16 + bf16 is fp16 in Triton (fp32 in PyTorch), bf16 + an integer block is fp32 (bf16).
TRITON_NOT_TORCH = {("fp16", "bf16"): "fp16", ("bf16", "fp16"): "fp16", ("bf16", "i32"): "fp32",
                    ("i8", "bf16"): "fp32", ("bf16", "u8"): "fp32"}


@pytest.mark.parametrize("a,b", PAIRS + list(TRITON_NOT_TORCH))
def test_promotion_matches_triton(a, b):
    """Triton's result type: PyTorch's, except for the pairs of TRITON_NOT_TORCH."""
    f = build(binop_kernel, {"OP": "add"}, x_ptr="*" + a, y_ptr="*" + b, o_ptr="*fp32")
    add = ops(f, "binary", op="add")[0]
    ta, tb = D.from_signature(a).to_torch(), D.from_signature(b).to_torch()
    want = torch.result_type(torch.ones(2, dtype=ta), torch.ones(2, dtype=tb))
    if (a, b) in TRITON_NOT_TORCH:
        want = D.from_signature(TRITON_NOT_TORCH[a, b]).to_torch()
    assert add.result.dtype.to_torch() == want


@pytest.mark.parametrize("a", ["fp16", "bf16", "i8", "i32", "u8"])
def test_weak_python_numbers(a):
    dt = D.from_signature(a)
    f = build(binop_kernel, {"OP": "xs"}, x_ptr="*" + a, y_ptr="*" + a, o_ptr="*fp32")
    mul = ops(f, "binary", op="mul")[0]
    want = torch.result_type(torch.ones(2, dtype=dt.to_torch()), 2.0)
    assert mul.result.dtype.to_torch() == want
    f = build(binop_kernel, {"OP": "inc"}, x_ptr="*" + a, y_ptr="*" + a, o_ptr="*fp32")
    add = ops(f, "binary", op="add")[0]
    assert add.result.dtype is dt   # int8 + 1 stays int8, fp16 + 1 stays fp16


def test_true_division_of_ints_is_fp32():
    f = build(binop_kernel, {"OP": "div"}, x_ptr="*i32", y_ptr="*i32", o_ptr="*fp32")
    div = ops(f, "binary", op="div")[0]
    assert div.result.dtype is D.float32
    assert all(c.result.dtype is D.float32 for c in ops(f, "cast"))


@newt.jit
def int_ops_kernel(x_ptr, o_ptr):
    offs = nl.arange(0, 16)
    x = nl.load(x_ptr + offs)
    nl.store(o_ptr + offs, (x // 3) + (x % 3) + (x << 1) + (x >> 1) + (x & 7) + (x | 1) + (x ^ 2)
             + (~x) + (-x))


def test_integer_operators():
    f = build(int_ops_kernel, x_ptr="*i32", o_ptr="*i32")
    for op in ("idiv", "mod", "shl", "shr", "and", "or", "xor"):
        assert ops(f, "binary", op=op), op
    assert ops(f, "unary", op="invert") and ops(f, "unary", op="neg")


# ----------------------------------------------------------------------------- Python min/max/abs

@newt.jit
def minmax_kernel(x_ptr, v, B: nl.constexpr):
    n = min(B, 64)
    offs = nl.arange(0, n)
    m = max(v, 0)
    a = abs(v)
    nl.store(x_ptr + offs, m + a + max(B, 3))


def test_python_min_max_abs():
    f = build(minmax_kernel, {"B": 128})
    text = format_function(f)
    assert "arange {start=0, end=64}" in text   # min(B, 64) folded with B=128
    assert ops(f, "binary", op="maximum")       # max(v, 0) on a runtime scalar
    assert ops(f, "unary", op="abs")
    assert not ops(f, "binary", op="gt") and not ops(f, "select")
    assert any(op.attrs.get("value") == 128 for op in ops(f, "constant"))


# ----------------------------------------------------------------------------- assert, debugging

@newt.jit
def assert_kernel(x_ptr, n):
    assert n > 0, "n must be positive"
    v = nl.load(x_ptr)
    nl.device_assert(v == v)
    nl.device_print("v=", v)
    nl.debug_barrier()
    nl.store(x_ptr, v)


def test_assert_is_kept():
    f = build(assert_kernel)
    a = ops(f, "assert")
    assert len(a) == 2 and a[0].attrs["msg"] == "n must be positive"
    assert a[0].attrs["line"] == inspect.getsourcelines(assert_kernel.fn)[1] + 2
    assert ops(f, "print")[0].attrs["prefix"] == "v="
    assert ops(f, "barrier")


# ----------------------------------------------------------------------------- specialization

@newt.jit
def stride_kernel(x_ptr, stride, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs * stride, 1.0, mask=offs < n)


def test_equal_to_1_specialization():
    f = build(stride_kernel, {"BLOCK": 32}, {"stride": {"equal_to_1": True},
                                             "n": {"large": True}})
    assert [p.name for p in f.params] == ["x_ptr", "n"]
    assert [p.index for p in f.params] == [0, 2]
    assert f.params[1].large
    # stride is the constant 1 of its own type (i32), not a weak Python 1: the kernel means the
    # same whatever the argument's value (NVRTC folds the multiplication)
    ones = [o for o in ops(f, "constant") if o.attrs["value"] == 1]
    assert any(str(o.result.type) == "i32" for o in ones)


# ----------------------------------------------------------------------------- control flow

@newt.jit
def loops_kernel(x_ptr, o_ptr, n, BLOCK: nl.constexpr, UNROLL: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    acc = nl.zeros((BLOCK,), nl.float32)
    best = -float("inf")
    for i in nl.range(0, n, BLOCK, num_stages=2):
        v = nl.load(x_ptr + i + offs, mask=i + offs < n, other=0.0)
        acc += v
        best = max(best, nl.max(v, axis=0))
    for k in nl.static_range(UNROLL):
        acc = acc * 2
    k = 0
    while k < n:
        k += 3
    if n > 5:
        acc = acc + 1
        extra = 1.0
    else:
        extra = 2
    nl.store(o_ptr + offs, acc + best + extra + k)


def test_loops_and_ifs():
    f = build(loops_kernel, {"BLOCK": 128, "UNROLL": 3})
    (loop,) = ops(f, "for")
    assert loop.attrs["num_stages"] == 2
    assert [str(r.type) for r in loop.results] == ["fp32[128]", "fp32"]
    assert len(ops(f, "binary", op="mul")) == 3      # static_range unrolled
    (w,) = ops(f, "while")
    assert [str(r.type) for r in w.results] == ["i32"]
    (cond,) = ops(f, "if")
    assert [str(r.type) for r in cond.results] == ["fp32[128]", "fp32"]


@newt.jit
def prune_kernel(x_ptr, MODE: nl.constexpr):
    if MODE == 0:
        nl.store(x_ptr, 1.0)
    else:
        undefined_function_never_visited(x_ptr)  # noqa: F821


def test_constexpr_if_is_pruned():
    f = build(prune_kernel, {"MODE": 0})
    assert not ops(f, "if") and len(ops(f, "store")) == 1


@newt.jit
def early_return_kernel(x_ptr, n):
    pid = nl.program_id(0)
    if pid >= n:
        return
    v = nl.load(x_ptr + pid)
    nl.store(x_ptr + pid, v + 1)


def test_early_return():
    f = build(early_return_kernel)
    (cond,) = ops(f, "if")
    then, other = cond.regions
    assert [op.opcode for op in then.ops] == ["return", "yield"]
    assert "store" in [op.opcode for op in other.ops]
    assert f.body.ops[-1] is cond   # the rest of the kernel lives in the else region


# ----------------------------------------------------------------------------- inlining, tuples

@newt.jit
def _helper(x, y, SCALE: nl.constexpr):
    return x * SCALE, y + SCALE


@newt.jit
def inline_kernel(x_ptr, y_ptr):
    a, b = _helper(nl.load(x_ptr), nl.load(y_ptr), 3)
    t = (a, b)
    nl.store(x_ptr, t[0] + t[1])


def test_inlined_call_and_tuples():
    f = build(inline_kernel)
    assert ops(f, "binary", op="mul") and ops(f, "binary", op="add")
    assert any(op.attrs.get("value") == 3.0 for op in ops(f, "constant"))


# ----------------------------------------------------------------------------- shapes, reductions

@newt.jit
def tile_kernel(x_ptr, o_ptr, stride, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    x = nl.load(x_ptr + rm[:, None] * stride + rn[None, :])
    s_all = nl.sum(x)
    s_row = nl.sum(x, axis=1, keep_dims=True)
    t = nl.trans(x)
    m, idx = nl.max(x, axis=0, return_indices=True)
    nl.store(o_ptr + rm[:, None] * stride + rn[None, :], x / s_row + s_all)
    nl.store(o_ptr + rn[:, None] + rm[None, :], t)
    nl.store(o_ptr + rn, m + idx)
    nl.store(o_ptr + rn, nl.cumsum(rn, axis=0).to(nl.float32))


def test_shapes_and_reductions():
    f = build(tile_kernel, {"BM": 32, "BN": 64})
    reshapes = [op.result.type.shape for op in ops(f, "reshape")]
    assert (32, 1) in reshapes and (1, 64) in reshapes and (2048,) in reshapes
    assert ops(f, "broadcast")
    assert ops(f, "permute")[0].attrs["order"] == (1, 0)
    kinds = [op.attrs["kind"] for op in ops(f, "reduce")]
    assert kinds.count("sum") == 2 and "max" in kinds and "argmax" in kinds
    assert ops(f, "scan")


@newt.jit
def sum_dtype_kernel(x_ptr, o_ptr):
    offs = nl.arange(0, 16)
    nl.store(o_ptr, nl.sum(nl.load(x_ptr + offs)))


@pytest.mark.parametrize("dt, acc, out", [("i8", "i32", "i32"), ("fp16", "fp32", "fp16"),
                                          ("fp32", "fp32", "fp32"), ("u8", "u32", "u32")])
def test_sum_accumulator_types(dt, acc, out):
    f = build(sum_dtype_kernel, x_ptr="*" + dt, o_ptr="*fp32")
    (r,) = ops(f, "reduce")
    assert r.operands[0].dtype.short == acc
    stored = ops(f, "store")[0].operands[1]
    src = stored.owner.operands[0] if stored.owner.opcode == "cast" else stored
    assert src.dtype.short == out


@newt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, K, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    rk = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        a = nl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = nl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += nl.dot(a, b)
    nl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(nl.float16))


@pytest.mark.parametrize("dt, prec", [("fp16", "tf32"), ("fp32", "tf32"), ("bf16", "tf32")])
def test_dot(dt, prec):
    f = build(dot_kernel, {"BM": 64, "BN": 32, "BK": 16}, a_ptr="*" + dt, b_ptr="*" + dt,
              c_ptr="*fp16")
    (d,) = ops(f, "dot")
    assert d.result.type.shape == (64, 32) and d.result.dtype is D.float32
    assert d.attrs["input_precision"] == prec
    acc = d.operands[2]
    assert acc.owner.opcode == "splat"   # the zeros accumulator created for `nl.dot(a, b)`


# ----------------------------------------------------------------------------- atomics, hints, misc

@newt.jit
def misc_kernel(x_ptr, i_ptr, n):
    offs = nl.multiple_of(nl.arange(0, 32), 16)
    offs = nl.max_contiguous(offs, 32)
    mask = offs < n
    old = nl.atomic_add(x_ptr + offs, 1.0, mask=mask, sem="relaxed")
    nl.atomic_cas(i_ptr, 0, 1)
    nl.atomic_max(i_ptr + offs, offs, mask=mask)
    v = nl.where(mask, old, 0)
    w = nl.fma(v, v, v) + nl.clamp(v, 0.0, 1.0) + nl.exp(offs) + nl.sqrt(v)
    nl.store(x_ptr + offs, w, mask=mask)


def test_atomics_hints_math():
    f = build(misc_kernel, i_ptr="*i32")
    ar = ops(f, "arange")[0].result
    assert ar.attrs["multiple_of"] == 16 and ar.attrs["max_contiguous"] == 32
    add = ops(f, "atomic", kind="add")[0]
    assert add.attrs["has_mask"] and add.attrs["sem"] == "relaxed" and add.attrs["scope"] == "gpu"
    assert ops(f, "atomic", kind="cas") and ops(f, "atomic", kind="max")
    assert ops(f, "select") and ops(f, "fma")
    exp = ops(f, "unary", op="exp")[0]
    assert exp.operands[0].dtype is D.float32   # int input cast to fp32 first


def test_printer_shows_value_attrs():
    f = build(misc_kernel, i_ptr="*i32")
    ops(f, "load") and None
    ops(f, "arange")[0].result.attrs["layout"] = "group_cyclic(vec=4)"
    assert "layout='group_cyclic(vec=4)'" in format_function(f)


# ----------------------------------------------------------------------------- random

@newt.jit
def rand_kernel(o_ptr, seed, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    r = nl.rand(seed, offs)
    z = nl.randn(seed, offs)
    i = nl.randint(seed, offs, n_rounds=7)
    a, b, c, d = nl.randint4x(seed, offs)
    nl.store(o_ptr + offs, r + z + i.to(nl.float32) + (a ^ b ^ c ^ d).to(nl.float32))


def test_random_uses_philox():
    f = build(rand_kernel, {"BLOCK": 64})
    ph = ops(f, "philox")
    assert len(ph) == 4 and ph[2].attrs["n_rounds"] == 7 and ph[0].attrs["n_rounds"] == 10
    assert ph[0].operands[0].dtype is D.uint64 and ph[0].operands[1].dtype is D.uint32
    assert all(str(r.type) == "u32[64]" for r in ph[0].results)
    assert ops(f, "unary", op="cos") and ops(f, "unary", op="log")


# ----------------------------------------------------------------------------- harder control flow

@newt.jit
def nested_return_kernel(x_ptr, n, m, STEPS: nl.constexpr):
    acc = nl.load(x_ptr)
    if n > 0:
        if m > 0:
            return
        acc = acc + 1.0
        fresh = acc * 2
    else:
        fresh = acc
    for s in nl.static_range(STEPS):
        if acc > 100.0:
            return
        acc = acc * 3
    pair = (acc, fresh)
    for i in range(n):
        pair = (pair[1], pair[0] + i)
    nl.store(x_ptr, pair[0] + pair[1])


def test_nested_early_returns_and_tuple_carries():
    f = build(nested_return_kernel, {"STEPS": 2})
    assert len(ops(f, "return")) == 3
    (loop,) = ops(f, "for")
    assert [str(r.type) for r in loop.results] == ["fp32", "fp32"]
    outer = next(op for op in f.body.ops if op.opcode == "if")
    assert [str(r.type) for r in outer.results] == ["fp32", "fp32"]


@newt.jit
def nested_loops_kernel(x_ptr, n, m):
    total = 0.0
    for i in range(n):
        row = 0.0
        for j in range(m):
            v = nl.load(x_ptr + i * m + j)
            if v > 0:
                row += v
        total += row
    nl.store(x_ptr, total)


def test_nested_loops():
    f = build(nested_loops_kernel)
    outer, inner = ops(f, "for")
    assert [str(r.type) for r in outer.results] == ["fp32"]
    assert [str(r.type) for r in inner.results] == ["fp32"]
    assert inner.parent.parent is outer


def test_every_language_builtin_has_a_frontend_rule():
    from newt.frontend.builtins import IMPLS
    classes = {"range", "static_range"}
    missing = [n for n in nl.BUILTINS if n not in IMPLS and n not in classes]
    assert not missing, missing


@newt.jit
def methods_kernel(x_ptr, o_ptr, B: nl.constexpr):
    r = nl.arange(0, B)
    x = nl.load(x_ptr + r[:, None] * B + r[None, :])
    y = x.trans().reshape(B * B).view(B, B).expand_dims(0).broadcast_to(2, B, B)
    z = y.permute(1, 2, 0).sum(axis=2).exp().to(nl.float16).to(nl.float32)
    a, c = nl.broadcast(r[:, None], r[None, :])
    w = x.T.max(1) + x.argmax(0).to(nl.float32) + x.cumsum(1).min(axis=1) + x.abs().sum(1)
    nl.static_print("shape", z.shape, z.dtype)
    nl.store(o_ptr + a * B + c, z + w[:, None])


def test_block_methods(capsys):
    f = build(methods_kernel, {"B": 16})
    assert "shape (16, 16) nl.float32" in capsys.readouterr().out
    for opcode in ("permute", "reshape", "broadcast", "scan", "cast"):
        assert ops(f, opcode), opcode
    assert {op.attrs["kind"] for op in ops(f, "reduce")} == {"sum", "max", "argmax", "min"}


@newt.heuristics({"SCALE": lambda args: 2})
@newt.jit
def _scaled(x, SCALE: nl.constexpr):
    return x * SCALE


@newt.jit
def calls_wrapped_kernel(x_ptr):
    nl.store(x_ptr, _scaled(nl.load(x_ptr), 3))


def test_wrapped_jit_functions():
    f = build(calls_wrapped_kernel)
    assert ops(f, "binary", op="mul")
    wrapped = newt.heuristics({"B": lambda a: 16})(add_kernel)
    assert [p.name for p in build_ir(wrapped, {"x_ptr": "*fp32", "y_ptr": "*fp32",
                                              "out_ptr": "*fp32", "n": "i32"},
                                     {"BLOCK": 16}).params] == ["x_ptr", "y_ptr", "out_ptr", "n"]


@newt.jit
def temp_kernel(x_ptr, o_ptr, n, B: nl.constexpr):
    offs = nl.arange(0, B)
    x = nl.load(x_ptr + offs)                 # fp16 before the loop ...
    acc = x.to(nl.float32)
    for i in range(n):
        x = nl.load(x_ptr + i * B + offs).to(nl.float32)   # ... a fp32 temporary inside it
        acc += x
    nl.store(o_ptr + offs, acc)


def test_loop_temporaries_are_not_carried():
    f = build(temp_kernel, {"B": 32}, x_ptr="*fp16")
    (loop,) = ops(f, "for")
    assert [str(r.type) for r in loop.results] == ["fp32[32]"]   # only acc
