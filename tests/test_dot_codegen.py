"""Tensor-core dot codegen without a GPU: newt-compiled tutorial matmuls build with NVRTC for
sm_90a and sm_80 without spills, their PTX holds the instructions the path promises, and the
accumulator layout is a bijection that matches the PTX ISA fragment tables. (GPU correctness
and speed: benchmarks/bench_matmul.py.)"""
import pytest

from newt.ir.layouts import AccLayout, SwappedAccLayout

@pytest.mark.parametrize("M,N,T", [(64, 64, 128), (128, 256, 256), (256, 128, 256), (16, 128, 256)])
def test_swapped_acc_layout(M, N, T):
    """C = A B computed as C^T (codegen/tc/dot_swap.py): a bijection; each thread's fragment rows
    g, g + 8 of C^T are two adjacent columns of C (one 8-byte load of B each k); the C form
    agrees with the Python one."""
    lay = SwappedAccLayout(M, N, T)
    assert {lay.py_flat(t, s) for t in range(T) for s in range(lay.nslots)} == set(range(M * N))
    for t in (0, 37, T - 1):
        for s in range(0, lay.nslots, 4):     # slots s, s + 2: rows g, g + 8 of C^T
            assert lay.py_flat(t, s + 2) == lay.py_flat(t, s) + 1
            assert lay.py_flat(t, s) % 2 == 0
    # a half-warp's pairs (lanes 0..15: g = 0..3, t = 0..3) fall in chunks {0, 4} (+ 2 for odd
    # warps) of a 32-column panel: after the swizzle c ^ t, 8 distinct chunks, no bank conflict
    for w in range(4):
        chunks = {(SwappedAccLayout.py_perm(w, g, 0) % 32) // 4 ^ t for g in range(4)
                  for t in range(4)}
        assert len(chunks) == 8
    expr = lay.flat("t", "s")
    for t in (0, 33, T - 1):
        for s in (0, 1, 2, lay.nslots - 1):
            assert eval(expr.replace("/", "//").replace("t", str(t)).replace("s", str(s))) \
                == lay.py_flat(t, s)


@pytest.mark.parametrize("M,N,T", [(64, 32, 128), (128, 256, 256), (32, 64, 64), (128, 64, 128)])
def test_acc_layout_bijection_and_fragment_table(M, N, T):
    lay = AccLayout(M, N, T)
    seen = set()
    for t in range(T):
        for s in range(lay.nslots):
            seen.add(lay.py_flat(t, s))
    assert seen == set(range(M * N))
    # mma.m16n8 C fragment: lane l holds (l/4, 2*(l%4)) and (l/4, 2*(l%4)+1) in c0, c1 and the
    # same columns 8 rows below in c2, c3
    for lane in (0, 5, 31):
        f = [lay.py_flat(lane, s) for s in range(4)]
        r, c = lane // 4, 2 * (lane % 4)
        assert f == [r * N + c, r * N + c + 1, (r + 8) * N + c, (r + 8) * N + c + 1]
    # the C expression agrees with the Python one
    expr = lay.flat("t", "s")
    for t in (0, 33, T - 1):
        for s in (0, 1, lay.nslots - 1):
            assert eval(expr.replace("/", "//").replace("t", str(t)).replace("s", str(s))) \
                == lay.py_flat(t, s)


def _tutorial_compile(arch, cfg, dt="fp16"):
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import bench_matmul as bm
    import newt
    ex = bm.example()
    sig = {n: "i32" for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                              "stride_cm", "stride_cn")}
    sig.update(a_ptr="*" + dt, b_ptr="*" + dt, c_ptr="*" + dt)
    spec = {n: {"divisible_by_16": True} for n in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K",
                                                   "stride_am", "stride_bk", "stride_cm")}
    spec.update({n: {"equal_to_1": True} for n in ("stride_ak", "stride_bn", "stride_cn")})
    BM, BN, BK, Wn, S = cfg
    return newt.compile(ex.matmul_kernel, sig, dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                        BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION="leaky_relu"), arch=arch,
                        num_warps=Wn, num_stages=S, specialization=spec)


@pytest.mark.parametrize("arch,marker", [("sm_90a", "wgmma.mma_async"), ("sm_80", "mma.sync")])
def test_tutorial_matmul_uses_tensor_cores(arch, marker):
    k = _tutorial_compile(arch, (64, 64, 32, 4, 3))
    assert marker in k.ptx and "cp.async" in k.ptx
    assert k.n_spills == 0, (k.n_regs, k.n_spills)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dt,ieee,marker", [
    ("fp16", False, "mma"), ("bf16", False, "mma"), ("fp32", False, "mma"),
    ("fp32", True, None), ("i8", False, "mma"), ("fp64", False, None)])
@pytest.mark.parametrize("M,N,K,warps", [(64, 32, 64, 4), (128, 64, 32, 8), (16, 16, 16, 4)])
def test_every_dot_kind_compiles(arch, dt, ieee, marker, M, N, K, warps):
    """Every input kind on both archs, tensor-core and exact (fma) engines, with an acc."""
    import newt
    import newt.language as nl

    @newt.jit
    def k_dot(a_ptr, b_ptr, c_ptr, out_ptr, M: nl.constexpr, N: nl.constexpr, K: nl.constexpr,
              IEEE: nl.constexpr):
        rm = nl.arange(0, M)
        rn = nl.arange(0, N)
        rk = nl.arange(0, K)
        a = nl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = nl.load(b_ptr + rk[:, None] * N + rn[None, :])
        c = nl.load(c_ptr + rm[:, None] * N + rn[None, :])
        if IEEE:
            r = nl.dot(a, b, c, input_precision="ieee")
        else:
            r = nl.dot(a, b, c)
        nl.store(out_ptr + rm[:, None] * N + rn[None, :], r)

    if dt == "i8" and K < 32:
        pytest.skip("int8 mma needs K >= 32")
    acc = {"i8": "i32", "fp64": "fp64"}.get(dt, "fp32")
    sig = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*" + acc, "out_ptr": "*" + acc}
    k = newt.compile(k_dot, sig, dict(M=M, N=N, K=K, IEEE=ieee), arch=arch, num_warps=warps)
    tensor_cores = marker is not None and M % (16 * warps) == 0
    if tensor_cores:
        want = "wgmma.mma_async" if arch == "sm_90a" and warps % 4 == 0 else "mma.sync"
        assert want in k.ptx
    else:
        assert "mma" not in k.ptx
    assert k.n_spills == 0, (k.n_regs, k.n_spills)
