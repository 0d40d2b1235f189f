"""The layout math (ir/layouts.py) and the pass decisions built on it, without NVRTC:
every valid (thread, slot) holds a distinct element and every element is held exactly once;
the C expressions agree with the Python reference; reduction plans and the shared-memory
ping-pong are what codegen relies on."""
import itertools
import re

import pytest

import newt.language as nl
from newt import dtypes as D
from newt.ir.builder import Builder
from newt.ir.printer import format_function
from newt.options import Options
from newt.passes import run_passes
from newt.ir.layouts import CyclicLayout, coords_of, flat_of
from newt.passes.smem import plan_reduce


def _c_eval(expr: str, **env) -> int:
    """Evaluate one of the generated integer C expressions (+ - * / %, parentheses and casts
    between i32 and u32 of values that are never negative)."""
    return eval(re.sub(r"\((?:u32|i32)\)", "", expr).replace("/", "//"), {}, env)


@pytest.mark.parametrize("numel,T,vec", [(1024, 128, 4), (4096, 256, 8), (64, 128, 4),
                                         (8, 32, 4), (1, 128, 4), (256, 256, 2), (32, 1024, 8)])
def test_cyclic_layout_is_a_bijection(numel, T, vec):
    lay = CyclicLayout(numel, T, vec)
    held = {}
    for t, s in itertools.product(range(T), range(lay.nslots)):
        f = lay.py_flat(t, s)
        assert _c_eval(lay.flat("tid", s), tid=t) == f
        assert _c_eval(lay.flat("tid", "s"), tid=t, s=s) == f
        valid = lay.py_valid(t, s)
        v = lay.valid("tid", s)
        assert (v is None and valid) or (v is not None and bool(_c_eval(v, tid=t)) == valid)
        if valid:
            assert f not in held, f"element {f} held twice"
            held[f] = (t, s)
    assert sorted(held) == list(range(numel))


def test_cyclic_groups_are_16_bytes_of_consecutive_elements():
    lay = CyclicLayout(4096, 256, 8)
    assert (lay.vec, lay.nslots, lay.groups) == (8, 16, 2)
    for t in range(256):
        for g in range(lay.groups):
            first = lay.py_flat(t, g * 8)
            assert first % 8 == 0
            assert [lay.py_flat(t, g * 8 + j) for j in range(8)] == list(range(first, first + 8))
    # neighbouring threads hold neighbouring groups: a warp's access is coalesced
    assert lay.py_flat(1, 0) - lay.py_flat(0, 0) == 8


def test_small_blocks_shrink_vec_so_more_threads_hold_elements():
    lay = CyclicLayout(64, 128, 4)
    assert lay.vec == 1 and lay.nslots == 1
    assert sum(lay.py_valid(t, 0) for t in range(128)) == 64


@pytest.mark.parametrize("shape", [(4, 8), (2, 1, 16), (1, 32), (8, 1)])
def test_coords_and_flat_are_inverse(shape):
    n = 1
    for d in shape:
        n *= d
    for i in range(n):
        cs = [_c_eval(c, i=i) for c in coords_of("i", shape)]
        assert _c_eval(flat_of([str(c) for c in cs], shape)) == i


def _reduce_fn(shape, axis, num_warps, dt=D.float32):
    b = Builder.for_function("k", [("x", D.pointer_type(dt)), ("o", D.pointer_type(dt))])
    x, o = b.func.body.args
    n = 1
    for d in shape:
        n *= d
    offs = b.reshape(b.arange(0, n), shape)
    v = b.load(b.addptr(b.splat(x, shape), offs))
    r = b.reduce(v, "sum", axis)
    rshape = r.type.shape
    if rshape:
        m = 1
        for d in rshape:
            m *= d
        ro = b.reshape(b.arange(0, m), rshape)
        b.store(b.addptr(b.splat(o, rshape), ro), r)
    else:
        b.store(o, r)
    fn = b.func
    run_passes(fn, Options(num_warps=num_warps))
    return fn


@pytest.mark.parametrize("shape,axis,warps,kind,cpr", [
    ((4096,), 0, 8, "full", 8),         # softmax: one value per warp
    ((4, 1024), 1, 4, "chunk", 4),      # rows spanning all warps
    ((16, 128), 1, 4, "chunk", 1),      # one warp chunk per row
    ((64, 16), 1, 4, "lanes", 1),       # rows inside a warp: 4-lane butterfly
    ((128, 2), 1, 4, "lanes", 1),       # rows inside a thread's group
])
def test_reduce_plans(shape, axis, warps, kind, cpr):
    fn = _reduce_fn(shape, axis, warps)
    op = next(o for o in fn.walk() if o.opcode == "reduce")
    plan = op.attrs["plan"]
    assert (plan.kind, plan.cpr) == (kind, cpr)
    assert plan.rows * plan.n == op.operands[0].type.numel
    assert f"plan={kind}(" in format_function(fn)


def test_reduce_over_a_leading_axis_is_permuted_last():
    fn = _reduce_fn((8, 64), 0, 4)
    ops = [o.opcode for o in fn.walk()]
    assert ops.index("permute") < ops.index("reduce")
    red = next(o for o in fn.walk() if o.opcode == "reduce")
    assert red.attrs["axis"] == 1 and red.operands[0].shape == (64, 8)
    assert plan_reduce(red.operands[0], 128).n == 8


def test_scratch_users_alternate_regions_without_leading_barriers():
    b = Builder.for_function("k", [("x", D.pointer_type(D.float32)), ("o", D.pointer_type(D.float32))])
    x, o = b.func.body.args
    v = b.load(b.addptr(b.splat(x, (1024,)), b.arange(0, 1024)))
    s1 = b.reduce(v, "max", 0)
    s2 = b.reduce(b.binary("sub", v, b.splat(s1, (1024,))), "sum", 0)
    s3 = b.reduce(v, "min", 0)
    b.store(o, b.binary("add", b.binary("add", s1, s2), s3))
    fn = b.func
    run_passes(fn, Options(num_warps=4))
    reds = [op for op in fn.walk() if op.opcode == "reduce"]
    offs = [op.attrs["smem"] for op in reds]
    assert offs[0] != offs[1] and offs[0] == offs[2]
    assert [op.attrs["sync_first"] for op in reds] == [False, False, False]
    assert fn.attrs["smem_bytes"] == 2 * 16             # 4 warps x fp32, 16-byte aligned, x2


def test_one_layout_per_size_makes_reshapes_and_casts_free():
    b = Builder.for_function("k", [("x", D.pointer_type(D.float16)), ("o", D.pointer_type(D.float32))])
    x, o = b.func.body.args
    offs = b.arange(0, 2048)
    h = b.load(b.addptr(b.splat(x, (2048,)), offs))
    f = b.reshape(b.cast(h, D.float32), (16, 128))
    b.store(b.addptr(b.splat(o, (16, 128)), b.reshape(offs, (16, 128))), f)
    fn = b.func
    run_passes(fn, Options(num_warps=4))
    text = format_function(fn)
    assert len(set(re.findall(r"layout=(cyclic\([^)]*\))", text))) == 1
    assert "vec=8" in text                    # fp16 is the narrowest access at this size
    assert "movement='none'" in text and "movement='smem'" not in text


def _facts(src_fn, sig, constexprs, spec, num_warps=4):
    """{value name: attrs} of the named block values after the passes."""
    from newt.compiler import _apply_specialization
    from newt.frontend import build_ir
    fn = build_ir(src_fn, {k: D.from_signature(v) for k, v in sig.items()}, constexprs, spec)
    _apply_specialization(fn, spec)
    run_passes(fn, Options(num_warps=num_warps))
    return {r.name: r.attrs for op in fn.walk() for r in op.results if r.name}


def _rows(x_ptr, out_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)[:, None]
    rn = nl.arange(0, BN)[None, :]
    cmask = rn < N
    rmask = rm < M
    mask = rmask & cmask
    offs = rm * N + rn
    ptrs = x_ptr + offs
    nl.store(out_ptr + offs, nl.load(ptrs, mask=mask), mask=mask)


_ROWS = {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32"}


def test_run_facts_of_masks_and_pointers():
    f = _facts(_rows, _ROWS, {"BM": 16, "BN": 64}, {})
    assert f["offs"]["contig"] == 64 and "div" not in f["offs"]     # N may be odd
    assert f["cmask"].get("prefix") == 64 and f["cmask"].get("const", 1) == 1
    assert f["rmask"].get("prefix") == 16         # [BM, 1]: broadcast along rows below
    assert f["mask"].get("prefix") == 64          # true on a prefix of each row


def test_divisible_by_16_sizes_make_masks_constant_over_16():
    spec = {p: {"divisible_by_16": True} for p in _ROWS}
    f = _facts(_rows, _ROWS, {"BM": 16, "BN": 64}, spec)
    assert f["offs"]["div"] == 16                  # row starts: multiples of N
    assert f["ptrs"]["div"] == 16                  # bytes: aligned rows
    assert f["cmask"]["const"] == 16 and f["mask"]["const"] == 16
