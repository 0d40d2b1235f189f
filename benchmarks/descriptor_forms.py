"""The same kernels written three ways: pointer arithmetic, tensor descriptors, block pointers.
newt lowers the last two to the first (newt/descriptors.py); this times whether they also run
as fast: a 4096^3 fp16 matmul (TFLOP/s), a softmax over 32768 rows of 4096 fp32 and a layer
norm over 32768 rows of 4096 fp16 (GB/s), each
form under newt and, when Triton is installed, under Triton (the same source, nl -> tl).
Correctness first, on odd shapes with NaN-poisoned outputs.

    PYTHONPATH=. python benchmarks/descriptor_forms.py [--check-only]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402

MM = dict(BM=128, BN=128, BK=64, num_warps=8, num_stages=4)


@newt.jit
def mm_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                BK: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    rm = (pm * BM + nl.arange(0, BM)) % M
    rn = (pn * BN + nl.arange(0, BN)) % N
    rk = nl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = nl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    cm, cn = pm * BM + nl.arange(0, BM), pn * BN + nl.arange(0, BN)
    nl.store(c_ptr + cm[:, None] * N + cn[None, :], acc.to(nl.float16),
             mask=(cm[:, None] < M) & (cn[None, :] < N))


@newt.jit
def mm_descriptors(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                   BK: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    ad = nl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    bd = nl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    cd = nl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        acc = nl.dot(ad.load([pm * BM, k]), bd.load([k, pn * BN]), acc)
    cd.store([pm * BM, pn * BN], acc.to(nl.float16))


@newt.jit
def mm_block_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                      BK: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    ap = nl.make_block_ptr(a_ptr, (M, K), (K, 1), (pm * BM, 0), (BM, BK), (1, 0))
    bp = nl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, pn * BN), (BK, BN), (1, 0))
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        acc = nl.dot(nl.load(ap, boundary_check=(0, 1)), nl.load(bp, boundary_check=(0, 1)), acc)
        ap = nl.advance(ap, (0, BK))
        bp = nl.advance(bp, (BK, 0))
    cp = nl.make_block_ptr(c_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    nl.store(cp, acc.to(nl.float16), boundary_check=(0, 1))


@newt.jit
def softmax_pointers(out_ptr, in_ptr, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    x = nl.load(in_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    e = nl.exp(x - nl.max(x, axis=0))
    nl.store(out_ptr + row * n_cols + offs, e / nl.sum(e, axis=0), mask=offs < n_cols)


@newt.jit
def softmax_descriptors(out_ptr, in_ptr, n_rows, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    xd = nl.make_tensor_descriptor(in_ptr, [n_rows, n_cols], [n_cols, 1], [1, BLOCK],
                                   padding_option="nan")
    od = nl.make_tensor_descriptor(out_ptr, [n_rows, n_cols], [n_cols, 1], [1, BLOCK])
    x = xd.load([row, 0])
    x = nl.where(nl.arange(0, BLOCK)[None, :] < n_cols, x, -float("inf"))
    e = nl.exp(x - nl.max(x, axis=1)[:, None])
    od.store([row, 0], e / nl.sum(e, axis=1)[:, None])


@newt.jit
def layernorm_pointers(y_ptr, x_ptr, w_ptr, b_ptr, n_cols, eps, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    offs = nl.arange(0, BLOCK)
    inside = offs < n_cols
    x = nl.load(x_ptr + row * n_cols + offs, mask=inside, other=0.0).to(nl.float32)
    mean = nl.sum(x, axis=0) / n_cols
    d = nl.where(inside, x - mean, 0.0)
    rstd = 1.0 / nl.sqrt(nl.sum(d * d, axis=0) / n_cols + eps)
    w = nl.load(w_ptr + offs, mask=inside)
    b = nl.load(b_ptr + offs, mask=inside)
    nl.store(y_ptr + row * n_cols + offs, (d * rstd * w + b).to(nl.float16), mask=inside)


@newt.jit
def layernorm_descriptors(y_ptr, x_ptr, w_ptr, b_ptr, n_rows, n_cols, eps,
                          BLOCK: nl.constexpr):
    row = nl.program_id(0)
    xd = nl.make_tensor_descriptor(x_ptr, [n_rows, n_cols], [n_cols, 1], [1, BLOCK])
    yd = nl.make_tensor_descriptor(y_ptr, [n_rows, n_cols], [n_cols, 1], [1, BLOCK])
    wd = nl.make_tensor_descriptor(w_ptr, [1, n_cols], [n_cols, 1], [1, BLOCK])
    bd = nl.make_tensor_descriptor(b_ptr, [1, n_cols], [n_cols, 1], [1, BLOCK])
    x = xd.load([row, 0]).to(nl.float32)        # zero-padded past n_cols
    mean = nl.sum(x, axis=1) / n_cols
    d = nl.where(nl.arange(0, BLOCK)[None, :] < n_cols, x - mean[:, None], 0.0)
    rstd = 1.0 / nl.sqrt(nl.sum(d * d, axis=1) / n_cols + eps)
    y = d * rstd[:, None] * wd.load([0, 0]) + bd.load([0, 0])
    yd.store([row, 0], y.to(nl.float16))


@newt.jit
def layernorm_block_pointers(y_ptr, x_ptr, w_ptr, b_ptr, n_rows, n_cols, eps,
                             BLOCK: nl.constexpr):
    row = nl.program_id(0)
    xp = nl.make_block_ptr(x_ptr, (n_rows, n_cols), (n_cols, 1), (row, 0), (1, BLOCK), (1, 0))
    wp = nl.make_block_ptr(w_ptr, (n_cols,), (1,), (0,), (BLOCK,), (0,))
    bp = nl.make_block_ptr(b_ptr, (n_cols,), (1,), (0,), (BLOCK,), (0,))
    x = nl.load(xp, boundary_check=(1,), padding_option="zero").to(nl.float32)
    mean = nl.sum(x, axis=1) / n_cols
    d = nl.where(nl.arange(0, BLOCK)[None, :] < n_cols, x - mean[:, None], 0.0)
    rstd = 1.0 / nl.sqrt(nl.sum(d * d, axis=1) / n_cols + eps)
    w = nl.load(wp, boundary_check=(0,))
    b = nl.load(bp, boundary_check=(0,))
    yp = nl.make_block_ptr(y_ptr, (n_rows, n_cols), (n_cols, 1), (row, 0), (1, BLOCK), (1, 0))
    nl.store(yp, (d * rstd[:, None] * w[None, :] + b[None, :]).to(nl.float16),
             boundary_check=(1,))


LAYERNORMS = (layernorm_pointers, layernorm_descriptors, layernorm_block_pointers)
MATMULS = {"pointers": mm_pointers, "descriptors": mm_descriptors,
           "block pointers": mm_block_pointers}


def run_matmul(k, a, b, c, cfg=MM):
    M, K = a.shape
    N = b.shape[1]
    grid = (newt.cdiv(M, cfg["BM"]), newt.cdiv(N, cfg["BN"]))
    return k[grid](a, b, c, M, N, K, **cfg)


def run_softmax(k, x, out):
    n_rows, n_cols = x.shape
    block = 1 << (n_cols - 1).bit_length()
    if "n_rows" in k.arg_names:       # (newt's and Triton's kernels both list arg_names)
        return k[(n_rows,)](out, x, n_rows, n_cols, BLOCK=block, num_warps=8)
    return k[(n_rows,)](out, x, n_cols, BLOCK=block, num_warps=8)


def run_layernorm(k, x, w, b, y):
    n_rows, n_cols = x.shape
    block = 1 << (n_cols - 1).bit_length()
    if "n_rows" in k.arg_names:
        return k[(n_rows,)](y, x, w, b, n_rows, n_cols, 1e-5, BLOCK=block, num_warps=8)
    return k[(n_rows,)](y, x, w, b, n_cols, 1e-5, BLOCK=block, num_warps=8)


def layernorm_operands(n_rows, n_cols, device):
    x = (torch.randn(n_rows, n_cols, device=device) * 2 + 0.5).half()
    w = torch.randn(n_cols, device=device).half()
    b = torch.randn(n_cols, device=device).half()
    return x, w, b


def check(device, small=False):
    """Every form against torch on odd shapes (raises on a mismatch)."""
    M, N, K = (37, 45, 50) if small else (1000, 1500, 777)
    cfg = dict(BM=32, BN=32, BK=16) if small else MM
    a = torch.randn(M, K, device=device).half()
    b = torch.randn(K, N, device=device).half()
    want = (a.double() @ b.double()).float()
    for name, k in MATMULS.items():
        c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)
        run_matmul(k, a, b, c, cfg)
        torch.testing.assert_close(c.float(), want, atol=3e-2, rtol=3e-2, msg=name)
    x = torch.randn(13 if small else 1000, 45 if small else 781, device=device) * 3
    for k in (softmax_pointers, softmax_descriptors):
        out = torch.full_like(x, float("nan"))
        run_softmax(k, x, out)
        torch.testing.assert_close(out, torch.softmax(x, 1), msg=k.__name__)
    x, w, b = layernorm_operands(13 if small else 1000, 45 if small else 781, device)
    want = torch.nn.functional.layer_norm(x.float(), (x.shape[1],), w.float(), b.float(), 1e-5)
    for k in LAYERNORMS:
        y = torch.full_like(x, float("nan"))
        run_layernorm(k, x, w, b, y)
        torch.testing.assert_close(y.float(), want, atol=2e-2, rtol=1e-2, msg=k.__name__)


def main(argv):
    check("cuda")
    print("all forms match torch")
    if "--check-only" in argv:
        return
    twins = {}
    if common.have_triton():
        import triton
        triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda",
                                                                      dtype=torch.int8))
        for k in [*MATMULS.values(), softmax_pointers, softmax_descriptors, *LAYERNORMS]:
            twins[k] = common.triton_twin(k)
    n = 4096
    a = torch.randn(n, n, device="cuda").half()
    b = torch.randn(n, n, device="cuda").half()
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    x = torch.randn(32768, 4096, device="cuda")
    out = torch.empty_like(x)
    lx, lw, lb = layernorm_operands(32768, 4096, "cuda")
    ly = torch.empty_like(lx)
    bench = lambda fn: newt.testing.do_bench(fn, return_mode="median")  # noqa: E731
    print(f"\n{'kernel':50s} {'newt':>9s} {'triton':>9s}")
    rows = [(f"matmul fp16 4096 {name} (TFLOP/s)", k,
             lambda k: run_matmul(k, a, b, c), lambda ms: 2 * n ** 3 / ms * 1e-9)
            for name, k in MATMULS.items()]
    rows += [(f"softmax 32768x4096 {k.__name__.split('_')[1]} (GB/s)", k,
              lambda k: run_softmax(k, x, out), lambda ms: 2 * x.numel() * 4 / ms * 1e-6)
             for k in (softmax_pointers, softmax_descriptors)]
    rows += [(f"layernorm fp16 32768x4096 {k.__name__.split('_', 1)[1]} (GB/s)", k,
              lambda k: run_layernorm(k, lx, lw, lb, ly),
              lambda ms: 2 * lx.numel() * 2 / ms * 1e-6) for k in LAYERNORMS]
    for label, k, call, rate in rows:
        got = [rate(bench(lambda: call(k)))]
        twin = twins.get(k)
        try:
            got.append(rate(bench(lambda: call(twin))) if twin is not None else None)
        except Exception as exc:  # noqa: BLE001 - a form Triton does not take: say so
            print(f"  triton {label}: {type(exc).__name__}: {str(exc)[:200]}")
            got.append(None)
        print(f"{label:50s} " + " ".join(f"{v:9.1f}" if v else f"{'-':>9s}" for v in got))


if __name__ == "__main__":
    main(sys.argv[1:])
