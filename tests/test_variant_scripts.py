"""The experiment scripts benchmarks/matmul_variants.py and attention_variants.py transform or
re-plan newt's kernels; these CPU checks keep their transforms matching the code newt
generates today (a transform that no longer finds its pattern would time the base kernel
under another name)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import common  # noqa: E402

import newt  # noqa: E402
import newt.codegen  # noqa: E402

_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
        "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32",
        "stride_cm": "i32", "stride_cn": "i32"}
_UNIT = ("stride_ak", "stride_bn", "stride_cn")
_SPEC = {p: dict(divisible_by_16=p not in _UNIT, equal_to_1=p in _UNIT, large=False) for p in _SIG}


@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 4), (256, 128, 64, 8, 4)],
                         ids=["128x256", "256x128"])
def test_perthread_variant_turns_the_store_tma_pass_off(monkeypatch, cfg):
    import matmul_variants as mv
    import newt.passes as P
    monkeypatch.setattr(P, "PASSES", P.PASSES)
    monkeypatch.setattr(newt.codegen, "generate", newt.codegen.generate)
    monkeypatch.setattr(mv.nlaunch.Launcher, "__init__", mv.nlaunch.Launcher.__init__)
    mv.install()
    BM, BN, BK, W, S = cfg
    ex = common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"), "mm_variants")
    for v, boxes in (("perthread", 0), ("base", BN // 64)):
        monkeypatch.setattr(mv, "CURRENT", [v])
        k = newt.compile(ex.matmul_kernel, _SIG, dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                                                      BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                                                      ACTIVATION="leaky_relu"),
                         arch="sm_90a", num_warps=W, num_stages=S, specialization=_SPEC)
        body = k.ptx[k.ptx.index(".entry"):]
        assert body.count("cp.async.bulk.tensor.2d.global.shared::cta") == boxes
        assert ("st.global.v4" in body) == (not boxes) and k.n_spills == 0


def test_matmul_cpasync_and_panels_variants(monkeypatch):
    """matmul_variants' `cpasync` keeps the ring on cp.async (no maps, not persistent);
    `panels` stores each C panel right after its writes; `base` is the generated code."""
    import matmul_variants as mv
    import newt.passes as P
    from newt.passes import store_tma
    from newt.passes import dot_tma
    monkeypatch.setattr(P, "PASSES", P.PASSES)
    monkeypatch.setattr(newt.codegen, "generate", newt.codegen.generate)
    monkeypatch.setattr(mv.nlaunch.Launcher, "__init__", mv.nlaunch.Launcher.__init__)
    monkeypatch.setattr(dot_tma, "plan_tma", dot_tma.plan_tma)
    monkeypatch.setattr(store_tma, "PIPELINE_PANELS", [False])
    mv.install()
    ex = common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"), "mm_variants")
    for v, tma, pipelined in (("cpasync", False, False), ("panels", True, True),
                              ("base", True, False)):
        monkeypatch.setattr(mv, "CURRENT", [v])
        k = newt.compile(ex.matmul_kernel, _SIG, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                                                      BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                                      ACTIVATION=""),
                         arch="sm_90a", num_warps=8, num_stages=4, specialization=_SPEC)
        assert bool(k.tma_maps) == tma and k.persistent == tma, v
        assert ("nt_boxes" in k.source) == pipelined and k.n_spills == 0, v


def test_cpasync_variant_turns_the_ring_tma_pass_off(monkeypatch):
    import attention_variants as av
    import test_attention as TA
    from newt.passes import ring_tma
    monkeypatch.setattr(ring_tma, "plan_ring_tma", av._ring_tma)
    for v, tma in (("cpasync", False), ("base", True)):
        monkeypatch.setattr(av, "CURRENT", [v])
        TA._compiled.clear()
        k = TA._compile("sm_90a", 64, False)
        assert ("tma=[" in k.ir) == tma and ("cp.async.cg" in k.ptx) != tma
    TA._compiled.clear()


def test_variant_examples_load_one_module_per_variant(monkeypatch):
    """The experiment scripts' loader: each variant gets its own module, loaded while it is the
    current variant, with its own cache folder."""
    monkeypatch.setenv("NEWT_CACHE_DIR", os.environ.get("NEWT_CACHE_DIR", ""))
    current, seen = [None], []
    root, mods = common.variant_examples("05_matmul", ["base", "perthread"], current,
                                         lambda v: seen.append((v, current[0],
                                                                os.environ["NEWT_CACHE_DIR"])))
    assert list(mods) == ["base", "perthread"] and mods["base"] is not mods["perthread"]
    assert all(hasattr(m, "matmul_kernel") for m in mods.values())
    assert seen == [(v, v, os.path.join(root, v)) for v in ("base", "perthread")]


@pytest.fixture
def nopersist(monkeypatch):
    """The hand transforms below take the non-persistent kernel (matmul_variants' nopersist)."""
    from newt.passes import persistent
    monkeypatch.setattr(persistent, "_ON", [False])


def test_hoistwu_variant_moves_the_warp_index_out_of_the_loop(nopersist):
    """hoist_wu finds today's per-k-step shuffle and leaves one at the kernel's start; the
    result still compiles (NVRTC, sm_90a) without spills."""
    import matmul_variants as mv
    from newt.runtime import nvrtc
    ex = common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"), "mm_hoist")
    k = newt.compile(ex.matmul_kernel, _SIG, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                                                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                                  ACTIVATION=""),
                     arch="sm_90a", num_warps=8, num_stages=4, specialization=_SPEC)
    body = k.source[k.source.index('extern "C" __global__'):]
    assert body.count("newt_warp_uniform()") >= 2
    src = mv.hoist_wu(k.source)
    new = src[src.index('extern "C" __global__'):]
    assert new.count("newt_warp_uniform()") == 1 and new.count("nt_wu") == body.count(
        "newt_warp_uniform()") + 1
    r = nvrtc.compile_cuda(src, "matmul_kernel", "sm_90a")
    assert nvrtc.parse_ptxas_report(r.log)["n_spills"] == 0


def test_sustained_script_averages_nvidia_smi_samples():
    import matmul_sustained as ms
    csv = "\n".join(["100.0, 1980"] * 6 + ["600.5, 1500", "bad line", "[N/A], 1400",
                                            "599.5, 1400"])
    assert ms.summarize(csv) == (600.0, 1450.0)
    assert ms.summarize("100, 1980\n" * 6) is None


def test_tie_rounds_rotates_the_order_and_reads_ratios_per_round():
    """benchmarks/tie_rounds.py: each round times every provider once in a rotated order, and
    the ratio lines pair each newt provider with its Triton namesake, round by round (a ratio
    upside down, or taken across rounds, would read a loss as a lead)."""
    import tie_rounds as tr
    order = []
    times = tr.timed_rounds({"newt": "n", "triton": "t", "torch": "c"}, 3,
                            lambda fn: order.append(fn) or len(order))
    assert order == ["n", "t", "c", "t", "c", "n", "c", "n", "t"]
    assert times == {"newt": [1, 6, 8], "triton": [2, 4, 9], "torch": [3, 5, 7]}
    # newt 2.0 ms in every round; Triton 1.9 / 2.2 / 2.1: newt ahead in 2 of 3 rounds
    ms = {"newt a": [2.0, 2.0, 2.0], "newt b": [3.0, 1.0, 3.0],
          "triton a": [1.9, 2.2, 2.1], "triton b": [4.0, 4.0, 4.0], "cuBLAS": [1.0, 1.0, 1.0]}
    lines = tr.summary(ms, "TFLOP/s", 2e9)
    assert lines[0].split()[-2:] == ["1.0", "TFLOP/s"]       # 2e9 FLOP in 2 ms
    a = next(x for x in lines if "Triton a:" in x)
    assert "median 1.0500" in a and "range 0.9500-1.1000" in a and "ahead in 2 of 3" in a
    best = next(x for x in lines if "best config" in x)
    # best per round: newt 2.0 / 1.0 / 2.0, Triton 1.9 / 2.2 / 2.1
    assert "median 1.0500" in best and "range 0.9500-2.2000" in best and "ahead in 2 of 3" in best


@pytest.mark.parametrize("stages", [4, 8])
def test_wait2_variant_keeps_two_groups_in_flight(stages, nopersist):
    """wait2 finds today's ring loop: one tile shallower, wait_group 2, the release two k-steps
    back, the drain one tile shorter; the result compiles without spills."""
    import matmul_variants as mv
    from newt.runtime import nvrtc
    ex = common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"), "mm_wait2")
    bk = 64 if stages == 4 else 32
    k = newt.compile(ex.matmul_kernel, _SIG, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                                                  BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                                                  ACTIVATION=""),
                     arch="sm_90a", num_warps=8, num_stages=stages, specialization=_SPEC)
    src = mv.wait2(k.source)
    lag = stages - 1
    assert f"const int c = ring_it1 - {lag};" in k.source
    assert f"const int c = ring_it1 - {lag - 1};" in src and "newt_wgmma_wait<2>();" in src
    assert f"((c - 2) % {stages})" in src and f"- {lag - 1} + 1, 0)" in src
    r = nvrtc.compile_cuda(src, "matmul_kernel", "sm_90a")
    assert nvrtc.parse_ptxas_report(r.log)["n_spills"] == 0


def test_persist_variant_is_the_hand_form_of_the_pass(nopersist):
    """persist_variant.py (the hand transformation measured before passes/persistent.py)
    still finds its patterns in the non-persistent kernel and compiles without spills."""
    import persist_variant as pv
    from newt.runtime import nvrtc
    ex = common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"), "mm_persist")
    k = newt.compile(ex.matmul_kernel, _SIG, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                                                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                                  ACTIVATION=""),
                     arch="sm_90a", num_warps=8, num_stages=4, specialization=_SPEC)
    assert not k.persistent
    src, extra = pv.persist_parts(k.source)
    assert "nt_total" in src and extra == 16384 + 1024
    r = nvrtc.compile_cuda(src, "matmul_kernel", "sm_90a")
    assert nvrtc.parse_ptxas_report(r.log)["n_spills"] == 0


def test_l2pf_probe_prefetches_after_the_first_copies():
    """l2pf finds the persistent kernel's parameters and its program loop: the prefetches sit
    between the prologue's copies and the loop, and the result compiles without spills."""
    import matmul_variants as mv
    from newt.runtime import nvrtc
    ex = common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"), "mm_l2pf")
    k = newt.compile(ex.matmul_kernel, _SIG, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                                                  BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                                  ACTIVATION=""),
                     arch="sm_90a", num_warps=8, num_stages=4, specialization=_SPEC)
    assert k.persistent
    src = mv.l2pf(k.source)
    body = src[src.index('extern "C" __global__'):]
    first, pf = body.index("newt_tma_load_2d("), body.index("nt_pf_2d(&nt_tmap0")
    assert first < pf < body.index("for (i32 nt_pid = ") and "nt_pf_2d(&nt_tmap1" in body
    assert "_3 + 127) / 128" in body and "(j % nm) * 128" in body   # BM, read off B's boxes
    r = nvrtc.compile_cuda(src, "matmul_kernel", "sm_90a")
    rep = nvrtc.parse_ptxas_report(r.log)
    assert rep["n_spills"] == 0 and "cp.async.bulk.prefetch.tensor.2d" in r.ptx


def test_launch_latency_kernels_compile():
    """benchmarks/launch_latency.py's empty kernels: one per parameter size, each taking its
    struct by value (the 448-byte one: the matmul's tensor maps' worth)."""
    import launch_latency as ll
    from newt.runtime import nvrtc
    r = nvrtc.compile_cuda(ll.SRC, "k64", "sm_90a")
    assert ".entry k64" in r.ptx and ".entry k448" in r.ptx
    assert ".param .align 64 .b8 k448_param_0[448]" in r.ptx


def test_softmax_occupancy_paddings_cap_residency():
    """benchmarks/softmax_occupancy.py's paddings give the residencies its labels claim: 8 CTAs
    of 256 threads per SM unpadded (thread-bound), then 7, 6, 5, 4 and 3."""
    import softmax_occupancy as so
    assert [so.resident(p * 1024) for p in so.PADS_KB] == [8, 7, 6, 5, 4, 3]
    assert so.resident(0, threads=512) == 4       # the 16-warp kernel's own residency


def test_memory_variants_compile_without_spills():
    """benchmarks/memory_variants.py's kernels compile for sm_90a with no spills and no local
    memory (a spilling variant would time the spill, not the idea), the persistent ones with
    their grid-stride loop, the bulk ones with their copy-engine instructions."""
    import memory_variants as mv
    head = mv.header()
    for group in mv.variants(head):
        for name, args, kw in group:
            r = mv.build(head, *args, **{k: v for k, v in kw.items() if k != "spec"})
            rep = r.report
            assert rep["n_spills"] == 0 and rep["local_bytes"] == 0, (name, rep)
            if name.startswith("bulk"):
                assert "cp.async.bulk.shared::cluster.global" in r.ptx, name
            if name == "bulk2":
                assert "cp.async.bulk.global.shared::cta" in r.ptx


def test_memory_variants_immediate_offsets_toggle_only_the_addressing():
    """memory_variants.py's imm / noimm pairs of newt's own kernels differ in how each access
    group's pointer is formed and in nothing else: the base-plus-offset form declares one base
    per access; without it every group's pointer comes from its index math."""
    import re

    import memory_variants as mv
    from newt.passes import accesses
    for key in ("softmax", "layernorm"):
        a = mv.generated(imm=True, spec=True, key=key).source
        b = mv.generated(imm=False, spec=True, key=key).source
        assert accesses.ADDRESSES == {"load": None, "store": None}
        assert re.search(r"\* const pb\d+ = ", a) and not re.search(r"\* const pb\d+ = ", b)
        # the same loads and stores, the same masks and arithmetic: only pointer lines differ
        strip = lambda s: [ln for ln in s.splitlines()   # noqa: E731
                           if not re.search(r"\bpb?\d+\b", ln)]
        assert len(strip(a)) == len(strip(b)), key
        assert a.count("nt_ld4(") == b.count("nt_ld4(") and a.count("nt_st4") == b.count("nt_st4")


def test_memory_variants_tested_form_keeps_the_run_time_checks():
    """The static form off: the specialized kernel's groups keep the alignment test and
    the scalar path (as the unspecialized kernel's do), and the switch is restored after."""
    import memory_variants as mv
    from newt.passes import accesses
    spec = mv.generated(spec=True).source
    tested = mv.generated(spec=True, static=False).source
    assert accesses.GROUPS == {"load": None, "store": None}
    assert "& 15) == 0" not in spec and "nt_ldp32(" not in spec
    assert "& 15) == 0" in tested and "nt_ldp32(" in tested and "nt_stp32(" in tested
    # one access kind at a time: the loads' groups tested, the stores' kept static, and back
    loads = mv.generated(spec=True, static="load").source
    stores = mv.generated(spec=True, static="store").source
    assert "nt_ldp32(" in loads and "nt_stp32(" not in loads
    assert "nt_stp32(" in stores and "nt_ldp32(" not in stores
    assert accesses.GROUPS == {"load": None, "store": None}
