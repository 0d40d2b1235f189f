"""One matmul written the ways people write it, on newt and Triton (the same source, nl -> tl)
with the same config sweep, beside cuBLAS: every form should take the fast path. Correctness
first (odd shapes, NaN-poisoned outputs), then one table of TFLOP/s (best config of each).

    PYTHONPATH=. python benchmarks/matmul_forms.py [--check-only]

--check-only checks every form against torch at small sizes (on the CPU interpreter when there
is no GPU) and times nothing. tests/test_matmul_forms.py compiles these kernels for sm_80 and
sm_90a and checks the path each takes.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402


@newt.jit
def mm_tutorial(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
                GROUP_M: nl.constexpr):
    """Grouped order, `% M` wraps, K masks, incremented pointers, `acc = dot(a, b, acc)`."""
    pid = nl.program_id(0)
    num_m, num_n = nl.cdiv(M, BM), nl.cdiv(N, BN)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_am = (pid_m * BM + nl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + nl.arange(0, BN)) % N
    offs_k = nl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    offs_cm = pid_m * BM + nl.arange(0, BM)
    offs_cn = pid_n * BN + nl.arange(0, BN)
    nl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty),
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@newt.jit
def mm_nowrap(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr,
              GROUP_M: nl.constexpr):
    """The tutorial form without the `% M` wraps and without M/N masks (shapes divide)."""
    pid = nl.program_id(0)
    num_m, num_n = nl.cdiv(M, BM), nl.cdiv(N, BN)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_am = pid_m * BM + nl.arange(0, BM)
    offs_bn = pid_n * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = nl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    nl.store(c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty))


@newt.jit
def mm_plain(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
             stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    """2-D grid, no masks (shapes divide), pointers from `k + arange`, `acc += dot(a, b)`."""
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak)
        b = nl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
        acc += nl.dot(a, b)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty))


@newt.jit
def mm_masked(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              stride_cm, stride_cn, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    """Masks on every axis, pointers recomputed from `k * BK + arange` each step,
    `acc = acc + dot(a, b)`."""
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BK)):
        offs_k = k * BK + nl.arange(0, BK)
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = nl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = acc + nl.dot(a, b)
    nl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@newt.jit
def mm_batched(a_ptr, b_ptr, c_ptr, M, N, K, stride_az, stride_am, stride_ak, stride_bz,
               stride_bk, stride_bn, stride_cz, stride_cm, stride_cn, BM: nl.constexpr,
               BN: nl.constexpr, BK: nl.constexpr):
    """The batch on grid axis 2 (`z * stride` offsets), masks on M, N and K."""
    z = nl.program_id(2)
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    offs_k = nl.arange(0, BK)
    a_ptrs = a_ptr + z * stride_az + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + z * stride_bz + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K, BK):
        a = nl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k), other=0.0)
        b = nl.load(b_ptrs, mask=(offs_k[:, None] < K - k) & (offs_n[None, :] < N), other=0.0)
        acc += nl.dot(a, b)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    nl.store(c_ptr + z * stride_cz + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@newt.jit
def mm_splitk(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              stride_cm, stride_cn, K_SLICE, BM: nl.constexpr, BN: nl.constexpr,
              BK: nl.constexpr):
    """The K slice on grid axis 2 (pointers recomputed from `k0 + k + arange`, masks on every
    axis); the fp32 tile added into C by nl.atomic_add."""
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    k0 = nl.program_id(2) * K_SLICE
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k in range(0, K_SLICE, BK):
        offs_k = k0 + k + nl.arange(0, BK)
        a = nl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = nl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += nl.dot(a, b)
    nl.atomic_add(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
                  mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# (name, kernel, dtype, B column-major, launcher kind, divisible shapes only)
FORMS = [
    ("tutorial", mm_tutorial, torch.float16, False, "grouped", False),
    ("no % M wrap, no M/N masks", mm_nowrap, torch.float16, False, "grouped", True),
    ("2-D grid, no masks, acc += dot", mm_plain, torch.float16, False, "2d", True),
    ("the same, bf16", mm_plain, torch.bfloat16, False, "2d", True),
    ("the same, B column-major", mm_plain, torch.float16, True, "2d", True),
    # 8-bit wgmma reads B contiguous along K (as cuBLAS's fp8 does): x @ W.T; fp16 out
    ("the same, fp8 e4m3, B column-major", mm_plain, torch.float8_e4m3fn, True, "2d", True),
    ("the same, tf32 (fp32 in and out)", mm_plain, torch.float32, False, "2d", True),
    ("masks everywhere, recomputed ptrs", mm_masked, torch.float16, False, "2d", False),
    ("batched (grid axis 2)", mm_batched, torch.float16, False, "batched", False),
    ("split-K (atomic_add)", mm_splitk, torch.float16, False, "splitk", False),
]
SIZES = {"batched": (16, 1024, 1024, 1024), "splitk": (1, 1024, 1024, 16384)}
CONFIGS = [dict(BM=128, BN=128, BK=64, num_warps=8, num_stages=4),
           dict(BM=128, BN=256, BK=64, num_warps=8, num_stages=3),
           dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=4),
           dict(BM=64, BN=128, BK=64, num_warps=4, num_stages=4)]
SMALL = dict(BM=32, BN=32, BK=16, num_warps=4, num_stages=2)


def sweep(dt):
    """CONFIGS for inputs of dtype dt: BK scaled to the same bytes per tile row as fp16's (32
    for tf32, whose 64-wide stages do not fit four deep; 128 for fp8), for newt and Triton
    alike."""
    return [c if c["BK"] < 64 else dict(c, BK=c["BK"] * 2 // dt.itemsize) for c in CONFIGS]
SPLITS = 4


def operands(dt, bt, B, M, N, K, device):
    a = torch.randn(B, M, K, device=device).to(dt)
    if bt:      # x @ W.T: W stored [N, K], B read through its strides
        b = torch.randn(B, N, K, device=device).to(dt).transpose(1, 2)
    else:
        b = torch.randn(B, K, N, device=device).to(dt)
    return a, b


def cublas(dt, a, b):
    """cuBLAS on the same operands: torch.matmul (tf32 allowed for fp32, as newt's and Triton's
    default dot), torch._scaled_mm with unit scales for fp8 (2-D, B column-major)."""
    if dt == torch.float8_e4m3fn:
        one = torch.ones((), device=a.device)
        return lambda: torch._scaled_mm(a[0], b[0], one, one, out_dtype=torch.float16)
    if dt == torch.float32:
        def tf32():
            was = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return torch.matmul(a, b)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = was
        return tf32
    return lambda: torch.matmul(a, b)


def launch(kind, k, a, b, c, cfg):
    """One launch of form kernel `k` on [B, M, K] @ [B, K, N] -> c [B, M, N]."""
    B, M, K = a.shape
    N = b.shape[2]
    meta = {x: cfg[x] for x in ("BM", "BN", "BK", "num_warps", "num_stages")}
    gm, gn = -(-M // cfg["BM"]), -(-N // cfg["BN"])
    if kind == "batched":
        return k[(gm, gn, B)](a, b, c, M, N, K, a.stride(0), a.stride(1), a.stride(2),
                              b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
                              c.stride(2), **meta)
    a2, b2, c2 = a[0], b[0], c[0]
    args = (a2, b2, c2, M, N, K, a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1),
            c2.stride(0), c2.stride(1))
    if kind == "grouped":
        return k[(gm * gn,)](*args, GROUP_M=8, **meta)
    if kind == "splitk":
        ks = -(-K // (SPLITS * cfg["BK"])) * cfg["BK"]
        return k[(gm, gn, -(-K // ks))](*args, ks, **meta)
    return k[(gm, gn)](*args, **meta)


def out_dtype(kind, dt):
    if kind == "splitk":
        return torch.float32
    return torch.float16 if dt.itemsize == 1 else dt


def check_form(form, k, device, small):
    """k against torch on NaN-poisoned outputs; odd shapes for the forms that mask."""
    name, _, dt, bt, kind, divisible = form
    if small:
        B, M, N, K = (2 if kind == "batched" else 1), 64, 96, 80
        if not divisible:
            M, N, K = 37, 45, 50
        cfg = SMALL
    else:
        B, M, N, K = (4, 512, 384, 256) if divisible else (3, 1000, 1500, 777)
        if kind != "batched":
            B = 1
        cfg = sweep(dt)[0]
    a, b = operands(dt, bt, B, M, N, K, device)
    # NaN-poisoned; split-K adds into C, which must start at 0 (every element is checked)
    c = torch.full((B, M, N), 0.0 if kind == "splitk" else float("nan"), device=device,
                   dtype=out_dtype(kind, dt))
    launch(kind, k, a, b, c, cfg)
    want = (a.double() @ b.double()).float()
    torch.testing.assert_close(c.float(), want, atol=5e-2, rtol=2e-2,
                               msg=lambda m: f"{name}: {m}")


def check(device, small=False):
    for form in FORMS:
        check_form(form, form[1], device, small)


def best_rate(kind, k, a, b, c, time_ms):
    """The best TFLOP/s of `k` over sweep() (a config a compiler refuses is said and skipped)."""
    best = 0.0
    B, M, K = a.shape
    N = b.shape[2]
    flop = 2.0 * B * M * N * K
    for cfg in sweep(a.dtype):
        try:
            ms = time_ms(lambda: launch(kind, k, a, b, c, cfg))
        except Exception as exc:  # noqa: BLE001 - a config a compiler refuses: say so, go on
            print(f"  {getattr(k, '__name__', k)} {cfg}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        best = max(best, flop / ms * 1e-9)
    return best


def table(device, twins, time_ms, sizes=None):
    """One row per form: newt, Triton (the same source), cuBLAS (torch.matmul), newt/Triton."""
    print(f"\n{'form':36s} {'newt':>8s} {'triton':>8s} {'cuBLAS':>8s} {'n/t':>6s}  TFLOP/s")
    for name, k, dt, bt, kind, _ in FORMS:
        B, M, N, K = (sizes or {}).get(kind) or SIZES.get(kind, (1, 4096, 4096, 4096))
        a, b = operands(dt, bt, B, M, N, K, device)
        # (split-K adds into C: timed without zeroing it, the same work for every provider)
        c = torch.zeros((B, M, N), device=device, dtype=out_dtype(kind, dt))
        got = [best_rate(kind, k, a, b, c, time_ms)]
        got.append(best_rate(kind, twins[k], a, b, c, time_ms) if k in twins else 0.0)
        ms = time_ms(cublas(dt, a, b))
        got.append(2.0 * B * M * N * K / ms * 1e-9)
        ratio = got[0] / got[1] if got[1] else float("nan")
        print(f"{name:36s} " + " ".join(f"{v:8.1f}" for v in got) + f" {ratio:6.2f}")


def main(argv):
    small = "--check-only" in argv
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        newt.options.flags.interpret = True
    check(device, small=small or device == "cpu")
    print("every form matches torch")
    if small or device == "cpu":
        return
    twins = {}
    if common.have_triton():
        for _, k, *_ in FORMS:
            twins.setdefault(k, common.triton_twin(k))
        for form in FORMS:      # the twin must compute the same thing before it is timed
            check_form(form, twins[form[1]], device, small=False)
    t0 = time.time()
    table(device, twins, lambda fn: newt.testing.do_bench(fn, warmup=10, rep=40,
                                                          return_mode="median"))
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
