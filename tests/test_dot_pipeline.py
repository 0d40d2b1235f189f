"""CPU tests of the newt-compiled tutorial matmul's pipeline (newt/codegen/tc/dot_ring.py,
dot_epilogue.py, dot_masks.py): the benchmark's configs compile for sm_90a and sm_80 with zero
spills and no local memory, the copy loop steps one pointer by a constant distance, the epilogue
stores per group from index math, and the Python model of the swizzled tile (used to prove the
shared-memory side linear) agrees with the C expression. GPU correctness and speed:
benchmarks/bench_matmul.py."""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


def _compile(arch, cfg, dt="fp16", n=4096, act="leaky_relu"):
    import bench_matmul as bm
    import newt
    ex = bm.example()
    sig = {p: "i32" for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                              "stride_cm", "stride_cn")}
    fp8 = dt.startswith("fp8")
    sig.update(a_ptr="*" + dt, b_ptr="*" + dt, c_ptr="*" + ("fp16" if fp8 else dt))
    # what the launcher derives for row-major operands of size n (n % 16 == 0 or not); fp8's
    # B is the transpose of a row-major [N, K] matrix (the benchmark's)
    bk, bn = ("stride_bn", "stride_bk") if fp8 else ("stride_bk", "stride_bn")
    spec = {p: {"divisible_by_16": True} for p in ("a_ptr", "b_ptr", "c_ptr")}
    spec.update({p: {"divisible_by_16": n % 16 == 0} for p in ("M", "N", "K", "stride_am",
                                                              bk, "stride_cm")})
    spec.update({p: {"equal_to_1": True} for p in ("stride_ak", bn, "stride_cn")})
    BM, BN, BK, W, S = cfg
    return newt.compile(ex.matmul_kernel, sig, dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                        BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION=act), arch=arch,
                        num_warps=W, num_stages=S, specialization=spec)


def _bench_rows():
    """Every (dtype, config) benchmarks/bench_matmul.py runs on the H200, at its sizes."""
    import torch

    import bench_matmul as bm
    rows = []
    for dt, tdt, n in (("fp16", torch.float16, 4096), ("bf16", torch.bfloat16, 4096),
                       ("fp32", torch.float32, 8192)):
        rows += [("sm_90a", cfg, dt, n) for cfg in bm.CONFIGS if bm._fits(tdt, cfg)]
    return rows + [("sm_90a", cfg, "fp8e4nv", 4096) for cfg in bm.FP8_CONFIGS]


def test_config_over_the_shared_memory_limit_is_a_compilation_error():
    """256x128x64 in 4 stages of 48 KB is 196608 B of ring, over sm_80's 166912 B per block:
    an error at compile time, naming the limit, not a failed launch later."""
    from newt.errors import CompilationError
    with pytest.raises(CompilationError, match="166912"):
        _compile("sm_80", (256, 128, 64, 8, 4), "bf16", 4096)


@pytest.mark.parametrize("arch,cfg,dt,n", _bench_rows() + [
    ("sm_90a", (256, 128, 64, 8, 4), "bf16", 777),     # odd sizes: nothing divisible by 16
    ("sm_80", (128, 128, 64, 8, 4), "fp16", 777),
], ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple) else str(x))
def test_bench_configs_compile_without_spills(arch, cfg, dt, n):
    k = _compile(arch, cfg, dt, n)
    assert k.n_spills == 0 and k.local_bytes == 0, (k.n_regs, k.n_spills, k.local_bytes)
    assert 0 < k.n_regs <= 255
    assert ("wgmma.mma_async" if arch == "sm_90a" else "mma.sync") in k.ptx
    # ptxas kept the wgmma pipeline as written: no wait injected, nothing serialized (C7514,
    # C7515: serialized; C7517, C7519: a wait / arrive injected, e.g. one per K iteration)
    assert not re.search(r"\(C75\d\d\)", k.log), k.log
    src = k.source
    tma = arch == "sm_90a" and n % 16 == 0
    if tma:
        # tiles of 16-byte aligned rows on sm_90a: TMA boxes, one map per operand
        # (passes/tc/dot_tma.py), no per-thread copy loop; tf32 computed swapped (C^T = B^T A^T,
        # B^T's fragments read from B's N-major box with 8-byte loads)
        loads = [r for r in k.tma_maps if not r.get("optional")]
        assert "cp.async.bulk.tensor" in k.ptx and len(loads) == 2
        # a 16-bit tile leaves by TMA boxes, its activation computed in the fragment
        # (passes/tc/store_tma.py; fp32 results of the swapped tf32 dot by per-thread stores)
        assert len(k.tma_maps) - len(loads) == (dt != "fp32")
        assert ("cp.async.bulk.tensor.2d.global.shared::cta" in k.ptx) == (dt != "fp32")
        # every map prefetched by thread 0 at entry, before any index math
        assert k.ptx.count("prefetch.tensormap") == len(k.tma_maps)
        assert src.index("newt_tma_prefetch(&nt_tmap1)") < src.index("blockIdx.x")
        assert "q0 + g * dist" not in src and "ring(S=" in k.ir and ", tma)" in k.ir
        assert (" swapped" in k.ir) == (dt == "fp32")
        # fp8: 8-bit wgmma, B's boxes transposed into its K-major tile (passes/tc/dot_fp8.py)
        assert ("k32.f32.e4m3.e4m3" in k.ptx) == (dt == "fp8e4nv")
        if dt == "fp32":
            assert "ld.shared.v2.b32" in k.ptx and "k8.f32.tf32.tf32" in k.ptx
    else:
        # the copy loop: one pointer per operand stepped by a constant distance, and the tile
        # side stepped by a constant too (no per-group swizzle math in the loop)
        assert "cp.async" in k.ptx and not k.tma_maps
        assert "q0 + g * dist" in src and "dst0 + (u32)g *" in src
    # the epilogue's store is the per-group one (the generic store's all-groups check is not)
    assert "vok" not in src


def test_plain_epilogue_also_stores_per_group():
    k = _compile("sm_90a", (128, 128, 64, 8, 4), act="")
    assert "vok" not in k.source and k.n_spills == 0


def _epilogue(src):
    """The generated code after the key loop's drain: the accumulator's way out."""
    return src[src.rindex("wait<0>();"):]


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_aligned_epilogue_on_hopper_stores_tma_boxes(dt):
    """On sm_90a the same tile goes to shared memory in the box format and leaves as one TMA
    box per 64-column panel (passes/tc/store_tma.py), after a run-time test of the coordinates;
    no read-back of the staging tile, no vector stores."""
    epi = _epilogue(_compile("sm_90a", (128, 256, 64, 8, 4), dt).source)
    assert epi.count("newt_tma_store_2d(&nt_tmap2") == 4 and "newt_bulk_wait_read();" in epi
    assert "accb" not in epi and "nt_st4p(" not in epi
    assert f"newt_frag_pack_{dict(fp16='f16', bf16='bf16')[dt]}(" in epi


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_aligned_epilogue_stores_the_staged_bits_without_a_fallback(dt):
    """Specialized as divisible by 16 (what the launcher derives for contiguous operands of a
    multiple-of-16 size), every output group is proven aligned and under one mask bit: one
    predicated 16-byte store per group, no run-time test, no scalar path. The stored words are
    the bits read back from the staging tile, not the fp32 register form rounded again, and the
    fragment's pairs go to the staging tile packed by one conversion."""
    epi = _epilogue(_compile("sm_80", (128, 256, 64, 8, 3), dt, act="").source)
    assert "nt_st4p(" in epi and "nt_stp16(" not in epi and "& 15) == 0" not in epi
    assert "accb" in epi and "nt_f2h(" not in epi and "nt_f2b(" not in epi
    assert f"newt_frag_pack_{dict(fp16='f16', bf16='bf16')[dt]}(" in epi


def test_unaligned_epilogue_keeps_the_run_time_test():
    """N = 777: rows of C are not 16-byte aligned in general, so each group is tested at run
    time and falls back to predicated scalar stores (tests/test_dot_emulated.py runs both)."""
    epi = _epilogue(_compile("sm_90a", (128, 128, 64, 8, 4), "fp16", 777).source)
    assert "& 15) == 0" in epi and "nt_stp16(" in epi


@pytest.mark.parametrize("rows,cols,esize", [(128, 64, 2), (64, 256, 2), (128, 32, 4),
                                             (64, 32, 2)])
def test_tile_python_model_matches_c(rows, cols, esize):
    from newt.codegen.tc.dot import Tile
    t = Tile(rows, cols, esize, "0")
    expr = t.chunk_addr("r", "c").replace("(u32)", "").replace("u ", " ").replace("u)", ")")
    expr = expr.replace("/", "//")
    seen = set()
    for r in range(rows):
        for c in range(cols * esize // 16):
            off = t.py_chunk_off(r, c)
            assert eval(expr, {"r": r, "c": c}) == off
            seen.add(off)
    assert seen == {16 * i for i in range(rows * cols * esize // 16)}   # a bijection


def test_dst_step_detects_linearity():
    from newt.codegen.tc.dot import Tile
    from newt.codegen.tc.dot_ring import _dst_step
    from newt.ir.layouts import CyclicLayout
    # A tile 128x64 fp16, 256 threads, 8 elements per group: rows r, r+32, ...: 32*128 bytes
    assert _dst_step(CyclicLayout(128 * 64, 256, 8), Tile(128, 64, 2, "0"), 64, 8) == 4096
    # B tile 64x256 fp16 (two 128-byte panels): rows k, k+8, ...: 8*128 bytes
    assert _dst_step(CyclicLayout(64 * 256, 256, 8), Tile(64, 256, 2, "0"), 256, 8) == 1024


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 4), (256, 128, 64, 8, 4), (128, 128, 64, 8, 4)],
                         ids=lambda c: "x".join(map(str, c)))
def test_timed_matmul_keeps_wgmma_asynchronous(cfg, dt):
    """The benchmark's timed kernels (no activation: the accumulator's cast is the whole
    epilogue) on sm_90a: ptxas keeps the K loop's wgmma in flight across iterations, no wait
    injected and nothing serialized (an fp16 epilogue that rounded twice once serialized every
    wgmma: 0.8x of Triton)."""
    k = _compile("sm_90a", cfg, dt, 4096, act="")
    assert not re.search(r"\(C75\d\d\)", k.log), k.log
    assert k.n_spills == 0


@pytest.mark.parametrize("cfg", [(256, 128, 32, 8, 4), (128, 256, 32, 8, 3), (64, 64, 16, 4, 3)],
                         ids=["256x128x32", "128x256x32", "64x64x16"])
def test_swapped_tf32_loads_fragments_only_after_their_wgmma_retired(cfg):
    """An in-flight wgmma reads its A registers until it completes (codegen/tc/dot_swap.py): every
    group of fragment loads must follow a wgmma wait, never directly a wgmma that may still
    read the registers being loaded (loading first and waiting after computed wrong results on
    the H200)."""
    k = _compile("sm_90a", cfg, "fp32", 4096, act="")
    assert " swapped" in k.ir
    lines = k.source.split("\n")
    loads = [i for i, line in enumerate(lines) if "newt_lds64(" in line and "NEWT_DEV" not in line]
    assert loads
    for i in loads:
        j = i - 1
        while "newt_lds64(" in lines[j] or not any(
                s in lines[j] for s in ("newt_wgmma_wait<", "newt_wgmma_rs_", "newt_wgmma_fence")):
            j -= 1
        assert "newt_wgmma_wait<" in lines[j], "\n".join(lines[j:i + 1])


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_trans_benchmark_kernel_compiles_like_strided_wt(dt):
    """benchmarks/matmul_trans.py's kernel, `nl.dot(a, nl.trans(w))` over a row-major W
    [N, K], at each of its configs: the transposed load becomes the K-major ring of the strided
    x @ W.T (passes/tc/trans_loads.py), TMA boxes on sm_90a, no spills."""
    import torch

    import matmul_trans as bt
    import newt
    from newt.runtime import specialize
    n = 4096
    t = torch.empty(n, n, dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[dt])
    for BM, BN, BK, W, S in bt.CFGS:
        # the specialization the launcher derives for the benchmark's operands (bt.launch)
        args = (t, t, t, n, n, n, *t.stride(), *t.stride(), *t.stride())
        kw = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                  num_warps=W, num_stages=S)
        arguments, nw, ns = specialize.bind(bt.matmul_t_kernel, args, kw)
        sig, cx, spec, _ = specialize.specialize(bt.matmul_t_kernel, arguments, allow_cpu=True)
        k = newt.compile(bt.matmul_t_kernel, sig, cx, arch="sm_90a", num_warps=nw,
                         num_stages=ns, specialization=spec)
        assert k.n_spills == 0 and k.local_bytes == 0 and 0 < k.n_regs <= 255
        assert not re.search(r"\(C75\d\d\)", k.log), k.log
        assert " trans " not in k.ir and "tma)" in k.ir
        # maps of A and B, and of C (the epilogue's tile stored by boxes)
        assert "cp.async.bulk.tensor" in k.ptx and len(k.tma_maps) == 3
        # B's tile is K-major: every wgmma reads it without the transpose flag (imm-trans-b 0)
        wg = re.findall(r"wgmma\.mma_async[^;]*;", k.ptx)
        assert wg and all(w.endswith(", 0, 0;") for w in wg), wg[:2]
