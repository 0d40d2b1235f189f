"""The ways people write a matmul loop take the path of the canonical one (newt/passes/tc/
canonical.py), on the CPU: `acc += nl.dot(a, b)` and its spellings generate the same CUDA C++
as `nl.dot(a, b, acc)`; pointers recomputed from the induction variable (and tensor descriptors,
which lower to them) get the tutorial's ring and TMA decision; every form of benchmarks/
matmul_forms.py compiles without spills and matches torch on the interpreter. GPU speed:
`python benchmarks/matmul_forms.py`."""
import inspect
import os
import re
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

CFG = dict(BM=128, BN=128, BK=64)


@newt.jit
def mm_spelled(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
               stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
               HOW: nl.constexpr, ACC: nl.constexpr = nl.float32):
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = nl.zeros((BM, BN), dtype=ACC)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BK),
                    other=0)
        b = nl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_n[None, :] < N),
                    other=0)
        if HOW == "fused":
            acc = nl.dot(a, b, acc)
        elif HOW == "+=":
            acc += nl.dot(a, b)
        elif HOW == "scaled":
            acc += nl.dot(a, b) * 2.0
        elif HOW == "acc + dot":
            acc = acc + nl.dot(a, b)
        else:
            acc = nl.dot(a, b) + acc
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(nl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@newt.jit
def mm_descriptor(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    pid_m, pid_n = nl.program_id(0), nl.program_id(1)
    ad = nl.make_tensor_descriptor(a_ptr, [M, K], [stride_am, stride_ak], [BM, BK])
    bd = nl.make_tensor_descriptor(b_ptr, [K, N], [stride_bk, stride_bn], [BK, BN])
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        acc += nl.dot(ad.load([pid_m * BM, k * BK]), bd.load([k * BK, pid_n * BN]))
    offs_m = pid_m * BM + nl.arange(0, BM)
    offs_n = pid_n * BN + nl.arange(0, BN)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(nl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@newt.jit
def mm_range_k(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
               stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
               WRAP_K: nl.constexpr):
    """Masks on every axis, pointers from `k + arange` over range(0, K, BK); WRAP_K reads K
    through `% K`, which is not affine in k: the pointer keeps its form and says why."""
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        offs_k = k + nl.arange(0, BK)
        if WRAP_K:
            offs_k = offs_k % K
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = nl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += nl.dot(a, b)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(nl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@newt.jit
def mm_nl_range(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    """nl.range with its own stage count, pointers from `k * BK + arange`, M/N/K masks."""
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in nl.range(0, nl.cdiv(K, BK), num_stages=3):
        offs_k = k * BK + nl.arange(0, BK)
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = nl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = nl.dot(a, b) + acc
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(nl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _compile(kernel, arch="sm_90a", dt="fp16", b_colmajor=False, cfg=CFG, loose=(), **cx):
    """Compiled as the launcher specializes row-major operands of sizes divisible by 16 (the
    parameters in `loose`: of no special value)."""
    units = {"stride_ak", "stride_cn", "stride_bk" if b_colmajor else "stride_bn"}
    sig, spec = {}, {}
    for p in inspect.signature(kernel.fn).parameters:
        if p in cfg or p in cx or p in ("HOW", "WRAP_K", "GROUP_M", "ACC", "CLAMP"):
            continue
        if p.endswith("ptr"):
            out32 = p == "c_ptr" and kernel.__name__ == "mm_splitk"
            out16 = p == "c_ptr" and dt.startswith("fp8")      # (the benchmark's fp8 row)
            sig[p] = "*" + ("fp32" if out32 else "fp16" if out16 else dt)
            spec[p] = {"divisible_by_16": p not in loose}
        else:
            sig[p] = "i32"
            spec[p] = {"equal_to_1": True} if p in units else {"divisible_by_16": p not in loose}
    if "GROUP_M" in inspect.signature(kernel.fn).parameters:
        cx.setdefault("GROUP_M", 8)
    return newt.compile(kernel, sig, dict(cfg, **cx), arch=arch, num_warps=8, num_stages=4,
                        specialization=spec)


def _ring(ck):
    m = re.search(r"ring=(ring\([^)]*\))", ck.ir)
    return m.group(1) if m else "no ring"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_every_acc_spelling_generates_the_fused_dots_code(arch):
    want = _compile(mm_spelled, arch, HOW="fused")
    for how in ("+=", "acc + dot", "dot + acc"):
        got = _compile(mm_spelled, arch, HOW=how)
        assert got.source == want.source, how
        assert _ring(got) == _ring(want)
    assert _ring(want) == ("ring(S=4, D=3, tma)" if arch == "sm_90a" else "ring(S=4, D=3)")


def test_int8_acc_spelling_generates_the_fused_dots_code():
    """int8 operands into an int32 accumulator: the same rewrite (exact in integers)."""
    want = _compile(mm_spelled, "sm_80", "int8", HOW="fused", ACC=nl.int32)
    got = _compile(mm_spelled, "sm_80", "int8", HOW="+=", ACC=nl.int32)
    assert got.source == want.source and _ring(got) == "ring(S=4, D=3)"


def test_recomputed_pointers_and_descriptors_take_the_tutorial_path():
    """The tutorial form (incremented pointers) against pointers recomputed from k over
    range(0, cdiv(K, BK)) and range(0, K, BK), and a tensor descriptor loaded at k * BK."""
    import matmul_forms as mf
    want = _ring(_compile(mf.mm_tutorial))
    assert want == "ring(S=4, D=3, tma)"
    for k, cx in ((mf.mm_masked, {}), (mm_descriptor, {}), (mm_range_k, {"WRAP_K": False}),
                  (mf.mm_splitk, {}), (mf.mm_tutorial, {"CLAMP": True})):
        ck = _compile(k, **cx)
        assert _ring(ck) == want, k.__name__
        assert ck.source.count("cp.async.bulk.tensor") or "newt_tma_load_2d" in ck.source
    assert _ring(_compile(mm_nl_range)) == "ring(S=3, D=2, tma)"


def test_a_dot_left_without_a_ring_says_why():
    """`acc += 2 * dot(a, b)` is not `dot(a, b, acc)` (its products are scaled): it keeps its
    form, and the dot says which of the ring's facts it lacks."""
    ck = _compile(mm_spelled, "sm_80", HOW="scaled")
    assert _ring(ck) == "no ring"
    assert "ring_why='the accumulator is not a value the loop carries'" in ck.ir


def test_a_pointer_that_is_not_affine_in_the_loop_index_says_why():
    ck = _compile(mm_range_k, WRAP_K=True)
    assert "canon_why='`mod` of the induction variable is not a constant step'" in ck.ir
    assert "cp.async: a pointer does not advance by a loop-invariant step" in ck.ir


def _forms():
    import matmul_forms as mf
    return [(f[0], f[1], f[2], f[3]) for f in mf.FORMS]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_every_form_compiles_without_spills_and_takes_a_ring(arch):
    """Every form takes the ring; on sm_90a every one of them by TMA boxes (the unmasked forms'
    extents come from the launch, the batch becomes an outer map dimension)."""
    import matmul_forms as mf

    from newt.dtypes import from_torch
    for name, k, dt, bt in _forms():
        cfg = {x: mf.sweep(dt)[0][x] for x in CFG}
        ck = _compile(k, arch, from_torch(dt).short, bt, cfg)
        assert ck.n_spills == 0 and ck.local_bytes == 0, (name, ck.n_spills, ck.local_bytes)
        want = "ring(S=4, D=3, tma)" if arch == "sm_90a" else "ring(S=4, D=3)"
        if arch == "sm_80" and dt.itemsize == 1:
            # no 8-bit tensor cores: the tiles are widened to fp16 between load and dot
            want = "no ring"
            assert "ring_why='operand a is not a load in the loop body'" in ck.ir
        assert _ring(ck) == want, (name, _ring(ck))


def _boxes(ck):
    """The ring loads' map extents, as the printed IR states them."""
    return re.findall(r"dot_ring_load .*tma_box='([^']*)'", ck.ir)


def test_unmasked_axes_take_their_extent_from_the_launch():
    """No mask on an axis: the map's rows reach 2^31-1 and its contiguous columns the row
    stride (the recipe reads the stride parameter at launch); the printed IR says which."""
    import matmul_forms as mf
    from newt.passes.tc.tma_terms import BIG
    ck = _compile(mf.mm_plain)
    assert _boxes(ck) == ["rows < 2^31-1 (no mask), cols < stride_am (no mask: the row stride)",
                          "rows < 2^31-1 (no mask), cols < stride_bk (no mask: the row stride)"]
    ra, rb, rc = ck.tma_maps
    assert ra["rows"] == ("const", BIG) and ra["cols"] == ra["row_stride"] == \
        ("param", 6, "stride_am") and rb["cols"] == rb["row_stride"] == ("param", 8, "stride_bk")
    # the unmasked store leaves by TMA boxes too (extents the same way), so the kernel runs
    # persistent as the tutorial does
    assert rc["optional"] and rc["rows"] == ("const", BIG) and \
        rc["cols"] == rc["row_stride"] == ("param", 10, "stride_cm")
    assert "tma_store_why" not in ck.ir and ck.persistent
    assert re.search(r"tma_store .*tma_box='rows < 2\^31-1 \(no mask\), cols < stride_cm \(no "
                     r"mask: the row stride\)'", ck.ir)
    # x @ W.T: B's contiguous axis is K, its row stride stride_bn
    ck = _compile(mf.mm_plain, b_colmajor=True)
    assert _boxes(ck)[1] == "rows < 2^31-1 (no mask), cols < stride_bn (no mask: the row stride)"
    # K masked, M / N not (the tutorial without wraps): one extent of each kind per operand
    assert _boxes(_compile(mf.mm_nowrap)) == [
        "rows < 2^31-1 (no mask), cols < K (mask)",
        "rows < K (mask), cols < stride_bk (no mask: the row stride)"]
    # the masked tutorial keeps its extents
    assert _boxes(_compile(mf.mm_tutorial)) == ["rows < M (wrap), cols < K (mask)",
                                               "rows < K (mask), cols < N (wrap)"]


def test_a_batch_offset_becomes_an_outer_map_dimension():
    """`a_ptr + z * stride_az` with z = program_id(2): a rank-3 map whose third coordinate is
    z; its stride must be a multiple of 16 bytes, or the ring says why it stays on cp.async."""
    import matmul_forms as mf
    ck = _compile(mf.mm_batched)
    assert _ring(ck) == "ring(S=4, D=3, tma)"
    assert _boxes(ck)[0] == ("rows < M (mask), cols < K (mask), then a dimension of stride "
                             "stride_az at a z index")
    # A, B and the epilogue's store of C (its batch slice by rank-3 boxes too)
    assert [r["outer"] for r in ck.tma_maps] == [
        [{"extent": ["const", (1 << 31) - 1], "stride": ["param", 6, "stride_az"]}],
        [{"extent": ["const", (1 << 31) - 1], "stride": ["param", 9, "stride_bz"]}],
        [{"extent": ["const", (1 << 31) - 1], "stride": ["param", 12, "stride_cz"]}]]
    # A's box and B's two panels, issued where the persistent ring starts and runs on
    assert ck.source.count("newt_tma_load_3d(st + ") == 6 and "newt_tma_load_2d(st" not in \
        ck.source
    assert ck.source.count("newt_tma_store_3d(&nt_tmap2") == 2  # C's two panels
    assert "tma_store_why" not in ck.ir and ck.persistent
    assert "tma_store=box(map=2, 128x128, rank 3)" in ck.ir
    ck = _compile(mf.mm_batched, loose=("stride_az",))
    assert _ring(ck) == ("ring(S=4, D=3, cp.async: a term of the base pointer's offset has no "
                         "stride that is a parameter divisible by 16 or a constant)")
    ck = _compile(mf.mm_batched, loose=("a_ptr",))
    assert "cp.async: the base pointer is not a 16-byte aligned parameter" in _ring(ck)


def test_forms_benchmark_check_only_on_the_interpreter(monkeypatch, capsys):
    """The benchmark's correctness pass (every form against torch at odd small sizes, NaN-
    poisoned outputs) runs on the interpreter: a broken form fails here, not on the GPU."""
    import matmul_forms as mf
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mf.main(["--check-only"])
    assert "every form matches torch" in capsys.readouterr().out


def _emulated_case(monkeypatch, arch, kernel, M, N, K, cx, extra=(), dt=torch.float16):
    """The generated code of `kernel` run on the CPU (tests/test_dot_emulated.py's emulator),
    64x64x32 tiles, 4 warps, 3 stages, on a NaN-poisoned output; returns how many of its TMA
    maps feed the ring."""
    from test_dot_emulated import _STAGES, _emulator, _load_maps
    E = _emulator(monkeypatch, arch)
    _STAGES[0] = 3
    torch.manual_seed(0)
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    # (split-K adds into C: zeros, and every element must receive its sum)
    c = torch.full((M, N), 0.0 if extra else float("nan"), dtype=dt)
    grid = (-(-M // 64), -(-N // 64), -(-K // extra[0]) if extra else 1)
    E.emulate(kernel, grid, a, b, c, M, N, K, a.stride(0), a.stride(1),
              b.stride(0), b.stride(1), c.stride(0), c.stride(1), *extra, BM=64, BN=64, BK=32,
              num_warps=4, num_stages=3, **cx)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=2e-3)
    return _load_maps(E.build.last_maps)


@pytest.mark.skipif(__import__("shutil").which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("arch,bt,dt", [("sm_90a", False, torch.float16),
                                         ("sm_90a", True, torch.float16),
                                         ("sm_80", False, torch.float16),
                                         ("sm_90a", True, torch.float8_e4m3fn),
                                         ("sm_90a", False, torch.float32)])
def test_unmasked_form_emulated(monkeypatch, arch, bt, dt):
    """The 2-D form without masks (shapes divide the 64x64x32 tiles, B row- or column-major;
    fp16, fp8 e4m3 into fp16, tf32 into fp32: the benchmark's rows) on the CPU emulator: its
    boxes read through maps whose extents came from the launch."""
    import matmul_forms as mf
    from test_dot_emulated import _STAGES, _emulator, _load_maps
    E = _emulator(monkeypatch, arch)
    _STAGES[0] = 3
    torch.manual_seed(1)
    M, N, K = 128, 64, 96
    a = torch.randn(M, K).to(dt)
    b = torch.randn(N, K).to(dt).t() if bt else torch.randn(K, N).to(dt)
    c = torch.full((M, N), float("nan"), dtype=mf.out_dtype("2d", dt))
    E.emulate(mf.mm_plain, (M // 64, N // 64), a, b, c, M, N, K, a.stride(0), a.stride(1),
              b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM=64, BN=64, BK=32,
              num_warps=4, num_stages=3)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    tol = dict(atol=3e-2, rtol=3e-3) if dt == torch.float32 else dict(atol=1e-2, rtol=2e-3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), **tol)
    assert _load_maps(E.build.last_maps) == (2 if arch == "sm_90a" else 0)


@pytest.mark.skipif(__import__("shutil").which("g++") is None, reason="no host C++ compiler")
def test_unmasked_form_runs_persistent_emulated(monkeypatch):
    """The benchmark's first tile (128x128x64, 8 warps, 4 stages) of the unmasked 2-D form: its
    store leaves by TMA boxes, so it runs persistent; 3x2 programs, 3 k-steps each, on the
    emulator's SMs, against torch on a NaN-poisoned output."""
    import matmul_forms as mf
    from test_dot_emulated import _STAGES, _emulator
    E = _emulator(monkeypatch, "sm_90a")
    _STAGES[0] = 4
    torch.manual_seed(4)
    M, N, K = 384, 256, 192
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    E.emulate(mf.mm_plain, (M // 128, N // 128), a, b, c, M, N, K, a.stride(0), a.stride(1),
              b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM=128, BN=128, BK=64,
              num_warps=8, num_stages=4)
    assert E.build.last_persistent and len(E.build.last_maps) == 3
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=2e-3)


@pytest.mark.skipif(__import__("shutil").which("g++") is None, reason="no host C++ compiler")
def test_batched_form_emulated(monkeypatch):
    """The batched form (z = program_id(2), masks on M, N, K) at odd M / K on the CPU
    emulator: rank-3 boxes, each batch's result against torch on a NaN-poisoned output."""
    import matmul_forms as mf
    from test_dot_emulated import _STAGES, _emulator, _load_maps, _store_maps
    E = _emulator(monkeypatch, "sm_90a")
    _STAGES[0] = 3
    torch.manual_seed(2)
    B, M, N, K = 2, 100, 80, 144
    a = torch.randn(B, M, K).half()
    b = torch.randn(B, K, N).half()
    c = torch.full((B, M, N), float("nan"), dtype=torch.float16)
    E.emulate(mf.mm_batched, (-(-M // 64), -(-N // 64), B), a, b, c, M, N, K, *a.stride(),
              *b.stride(), *c.stride(), BM=64, BN=64, BK=32, num_warps=4, num_stages=3)
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=2e-3)
    assert _load_maps(E.build.last_maps) == 2 and _store_maps(E.build.last_maps) == 1
    assert "newt_tma_store_3d(" in E.build.last_source


@pytest.mark.skipif(__import__("shutil").which("g++") is None, reason="no host C++ compiler")
def test_batched_form_runs_persistent_emulated(monkeypatch):
    """The batched form at the benchmark's first tile: rank-3 boxes in and out, persistent over
    grid axis 0 (4 programs per batch on the emulator's 3 SMs: one CTA runs two), M masked."""
    import matmul_forms as mf
    from test_dot_emulated import _STAGES, _emulator
    E = _emulator(monkeypatch, "sm_90a")
    _STAGES[0] = 4
    torch.manual_seed(5)
    B, M, N, K = 2, 500, 128, 128
    a, b = torch.randn(B, M, K).half(), torch.randn(B, K, N).half()
    c = torch.full((B, M, N), float("nan"), dtype=torch.float16)
    E.emulate(mf.mm_batched, (-(-M // 128), N // 128, B), a, b, c, M, N, K, *a.stride(),
              *b.stride(), *c.stride(), BM=128, BN=128, BK=64, num_warps=8, num_stages=4)
    assert E.build.last_persistent and len(E.build.last_maps) == 3
    assert torch.isfinite(c).all(), int((~torch.isfinite(c)).sum())
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-2, rtol=2e-3)


@pytest.mark.skipif(__import__("shutil").which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("arch,form,M,N,K", [
    # rows 16-byte aligned, M and K not multiples of the tiles: TMA boxes on sm_90a
    ("sm_90a", "masked", 100, 80, 144),
    ("sm_90a", "descriptor", 100, 80, 144),
    # odd row strides: the cp.async ring's gathers; mma.sync on sm_80
    ("sm_90a", "masked", 70, 45, 77),
    ("sm_80", "masked", 70, 45, 77),
    ("sm_80", "+=", 70, 45, 77),
    # split-K: K slices of 64 on grid axis 2, recomputed from k0 + k + arange, atomic adds
    ("sm_90a", "split-K", 100, 80, 208),
])
def test_rewritten_forms_emulated(monkeypatch, arch, form, M, N, K):
    import matmul_forms as mf
    kernel, cx = {"masked": (mf.mm_masked, {}), "descriptor": (mm_descriptor, {}),
                  "+=": (mm_spelled, {"HOW": "+="}), "split-K": (mf.mm_splitk, {})}[form]
    extra = ((64,), torch.float32) if form == "split-K" else ((), torch.float16)
    tma = _emulated_case(monkeypatch, arch, kernel, M, N, K, cx, *extra)
    assert tma == (2 if arch == "sm_90a" and K % 16 == 0 else 0)
    if form == "split-K":       # N = 80: rows 16-byte aligned, C added by vector reductions
        import test_codegen_emulator as E
        assert "nt_red_add_v4_f32(" in E.build.last_source


def table_rows(monkeypatch, capsys, no_tma=False):
    """The benchmark's table rows on the interpreter at small sizes, with a fake timer that
    runs each call once, and the number of calls it timed."""
    import matmul_forms as mf
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    monkeypatch.setattr(mf, "CONFIGS", [mf.SMALL])
    calls = []

    def one_call(fn):
        fn()
        calls.append(1)
        return 1.0
    sizes = {kind: (2 if kind == "batched" else 1, 64, 32, 64) for *_, kind, _ in mf.FORMS}
    mf.table("cpu", {}, one_call, sizes, no_tma=no_tma)
    return capsys.readouterr().out.strip().splitlines()[1:], len(calls)


def test_forms_benchmark_table_logic_on_the_interpreter(monkeypatch, capsys):
    """The timed part of the benchmark (sweep, cuBLAS column, table) with a fake timer that
    runs each call once: a typo there must not cost a GPU run to find."""
    import matmul_forms as mf
    rows, calls = table_rows(monkeypatch, capsys)
    assert [r[:36].strip() for r in rows] == [f[0] for f in mf.FORMS]
    assert calls == 2 * len(mf.FORMS)      # newt's one config and cuBLAS, per form
    # the Triton twins are the same source with nl -> tl: it must parse and name no newt
    import ast

    import common
    for _, k, *_ in mf.FORMS:
        src = common.swap_to_triton(common.kernel_source(k))
        ast.parse(src)
        assert "nl." not in src and "newt" not in src, k.__name__


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_every_form_on_the_gpu():
    """Every form at the benchmark's tiles on the GPU: odd sizes (1000x1500x777) for the forms
    that mask, NaN-poisoned outputs, against torch."""
    import matmul_forms as mf
    mf.check("cuda", small=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_unmasked_and_batched_forms_on_padded_views_gpu():
    """The extents that come from the launch, on views whose row and batch strides are not
    their widths: A and C padded rows, B column-major, batches one apart in a larger buffer."""
    import matmul_forms as mf
    torch.manual_seed(7)
    M, N, K = 512, 384, 256
    cfg = dict(mf.CONFIGS[0])
    a = torch.randn(M, K + 64, device="cuda").half()[:, :K]
    b = torch.randn(N, K, device="cuda").half().t()
    cbuf = torch.full((M, N + 128), float("nan"), device="cuda", dtype=torch.float16)
    c = cbuf[:, :N]
    mf.launch("2d", mf.mm_plain, a[None], b[None], c[None], cfg)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=5e-2, rtol=2e-2)
    assert torch.isnan(cbuf[:, N:]).all()
    B, M, N, K = 3, 1000, 1496, 784      # (rows 16-byte aligned: TMA boxes, M / N clipped)
    a = torch.randn(2 * B, M, K, device="cuda").half()[::2]
    b = torch.randn(B, K, N, device="cuda").half()
    c = torch.full((B, M, N), float("nan"), device="cuda", dtype=torch.float16)
    mf.launch("batched", mf.mm_batched, a, b, c, cfg)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=5e-2, rtol=2e-2)

