"""One matmul written the ways people write it, on newt and Triton (the same source, nl -> tl)
with the same config sweep, beside cuBLAS: every form should take the fast path. Correctness
first (odd shapes, NaN-poisoned outputs), then one table of TFLOP/s (best config of each).

    PYTHONPATH=. python benchmarks/matmul_forms.py [--check-only] [--no-tma] [--configs]

--check-only checks every form against torch at small sizes (on the CPU interpreter when there
is no GPU) and times nothing. tests/test_matmul_forms.py compiles these kernels for sm_80 and
sm_90a and checks the path each takes.

--no-tma measures the path taken where TMA cannot apply (the cp.async ring), with the library
unchanged: every operand and the output get rows padded by 16 bytes (row strides of K + 8
elements for 16-bit, K + 4 for fp32). Rows stay 16-byte aligned, so 16-byte copies still
apply, but no row stride is divisible by 16 elements, which newt's TMA boxes need
(passes/tc/dot_tma.py); Triton's pointer loads never use TMA. Both get the same padded
tensors: Triton specializes a stride only as divisible by 16 or not, so its copies of such
rows may be narrower than 16 bytes, while newt tests alignment at run time. The fp8 row is left
out: 1-byte rows 16-byte aligned always have strides divisible by 16.
tests/test_matmul_forms_no_tma.py checks that these launches take the cp.async ring.

--configs prints, under each form, every config's newt and Triton rates (not only the best).
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
                GROUP_M: nl.constexpr, CLAMP: nl.constexpr = False):
    """Grouped order, `% M` wraps (CLAMP: `where(i < M, i, 0)` instead, as Triton's
    persistent-matmul tutorial keeps rows inside), K masks, incremented pointers,
    `acc = dot(a, b, acc)`."""
    pid = nl.program_id(0)
    num_m, num_n = nl.cdiv(M, BM), nl.cdiv(N, BN)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_am = pid_m * BM + nl.arange(0, BM)
    offs_bn = pid_n * BN + nl.arange(0, BN)
    if CLAMP:
        offs_am = nl.where(offs_am < M, offs_am, 0)
        offs_bn = nl.where(offs_bn < N, offs_bn, 0)
    else:
        offs_am = offs_am % M
        offs_bn = offs_bn % N
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
    ("rows clamped by where, not % M", mm_tutorial, torch.float16, False, "clamped", False),
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


def no_tma_pad(dt):
    """--no-tma: the elements that pad each row to keep it 16-byte aligned while its stride is
    not divisible by 16 (None: no such padding for 1-byte elements)."""
    return 16 // dt.itemsize if dt.itemsize in (2, 4) else None


def _rows(B, R, C, dt, device, pad, fill=None):
    """A [B, R, C] tensor of dtype dt whose rows hold C + pad elements (random, or `fill`)."""
    if fill is None:
        t = torch.randn(B, R, C + pad, device=device).to(dt)
    else:
        t = torch.full((B, R, C + pad), fill, device=device, dtype=dt)
    return t[:, :, :C]


def operands(dt, bt, B, M, N, K, device, pad=0):
    a = _rows(B, M, K, dt, device, pad)
    if bt:      # x @ W.T: W stored [N, K], B read through its strides
        b = _rows(B, N, K, dt, device, pad).transpose(1, 2)
    else:
        b = _rows(B, K, N, dt, device, pad)
    return a, b


def output(kind, dt, B, M, N, device, fill, pad=0):
    return _rows(B, M, N, out_dtype(kind, dt), device, pad, fill)


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


def launch_args(kind, a, b, c, cfg):
    """(grid, args, keyword args) of a form kernel on [B, M, K] @ [B, K, N] -> c [B, M, N]."""
    B, M, K = a.shape
    N = b.shape[2]
    meta = {x: cfg[x] for x in ("BM", "BN", "BK", "num_warps", "num_stages")}
    gm, gn = -(-M // cfg["BM"]), -(-N // cfg["BN"])
    if kind == "batched":
        return (gm, gn, B), (a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride()), meta
    a2, b2, c2 = a[0], b[0], c[0]
    args = (a2, b2, c2, M, N, K, a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1),
            c2.stride(0), c2.stride(1))
    if kind in ("grouped", "clamped"):
        return (gm * gn,), args, dict(meta, GROUP_M=8, **({"CLAMP": True} if kind == "clamped"
                                                           else {}))
    if kind == "splitk":
        ks = -(-K // (SPLITS * cfg["BK"])) * cfg["BK"]
        return (gm, gn, -(-K // ks)), args + (ks,), meta
    return (gm, gn), args, meta


def launch(kind, k, a, b, c, cfg):
    """One launch of form kernel `k` on [B, M, K] @ [B, K, N] -> c [B, M, N]."""
    grid, args, kw = launch_args(kind, a, b, c, cfg)
    return k[grid](*args, **kw)


def out_dtype(kind, dt):
    if kind == "splitk":
        return torch.float32
    return torch.float16 if dt.itemsize == 1 else dt


def check_form(form, k, device, small, pad=0):
    """k against torch on NaN-poisoned outputs; odd shapes for the forms that mask; rows
    padded by `pad` elements (--no-tma)."""
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
    a, b = operands(dt, bt, B, M, N, K, device, pad)
    # NaN-poisoned; split-K adds into C, which must start at 0 (every element is checked)
    c = output(kind, dt, B, M, N, device, 0.0 if kind == "splitk" else float("nan"), pad)
    launch(kind, k, a, b, c, cfg)
    want = (a.double() @ b.double()).float()
    torch.testing.assert_close(c.float(), want, atol=5e-2, rtol=2e-2,
                               msg=lambda m: f"{name}: {m}")


def forms(no_tma=False):
    """(form, row padding) of each form the run measures: with no_tma, those that can be
    padded (no_tma_pad)."""
    if not no_tma:
        return [(f, 0) for f in FORMS]
    return [(f, no_tma_pad(f[2])) for f in FORMS if no_tma_pad(f[2])]


def check(device, small=False, no_tma=False):
    for form, pad in forms(no_tma):
        check_form(form, form[1], device, small, pad)


def best_rate(kind, k, a, b, c, time_ms, per_config=None):
    """The best TFLOP/s of `k` over sweep() (a config a compiler refuses is said and skipped);
    each config's rate is appended to the list `per_config` when one is given (0.0: refused)."""
    best = 0.0
    B, M, K = a.shape
    N = b.shape[2]
    flop = 2.0 * B * M * N * K
    for cfg in sweep(a.dtype):
        try:
            ms = time_ms(lambda: launch(kind, k, a, b, c, cfg))
        except Exception as exc:  # noqa: BLE001 - a config a compiler refuses: say so, go on
            print(f"  {getattr(k, '__name__', k)} {cfg}: {type(exc).__name__}: {str(exc)[:120]}")
            if per_config is not None:
                per_config.append(0.0)
            continue
        best = max(best, flop / ms * 1e-9)
        if per_config is not None:
            per_config.append(flop / ms * 1e-9)
    return best


def config_label(cfg):
    return (f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} w{cfg['num_warps']} "
            f"s{cfg['num_stages']}")


def table(device, twins, time_ms, sizes=None, no_tma=False, configs=False):
    """One row per form: newt, Triton (the same source), cuBLAS (torch.matmul), newt/Triton;
    with no_tma, on padded rows (the module docstring), each name marked "(no TMA)"; with
    configs, each config's newt and Triton rates under the row."""
    print(f"\n{'form':36s} {'newt':>8s} {'triton':>8s} {'cuBLAS':>8s} {'n/t':>6s}  TFLOP/s")
    for (name, k, dt, bt, kind, _), pad in forms(no_tma):
        B, M, N, K = (sizes or {}).get(kind) or SIZES.get(kind, (1, 4096, 4096, 4096))
        a, b = operands(dt, bt, B, M, N, K, device, pad)
        # (split-K adds into C: timed without zeroing it, the same work for every provider)
        c = output(kind, dt, B, M, N, device, 0.0, pad)
        if no_tma:
            name = name[:27] + " (no TMA)"
        mine, theirs = [], []
        got = [best_rate(kind, k, a, b, c, time_ms, mine)]
        got.append(best_rate(kind, twins[k], a, b, c, time_ms, theirs) if k in twins else 0.0)
        ms = time_ms(cublas(dt, a, b))
        got.append(2.0 * B * M * N * K / ms * 1e-9)
        ratio = got[0] / got[1] if got[1] else float("nan")
        print(f"{name:36s} " + " ".join(f"{v:8.1f}" for v in got) + f" {ratio:6.2f}")
        for cfg, n_rate, t_rate in zip(sweep(dt), mine, theirs or [0.0] * len(mine)):
            if configs:
                print(f"    {config_label(cfg):34s} {n_rate:8.1f} {t_rate:8.1f}")


def main(argv):
    small = "--check-only" in argv
    no_tma = "--no-tma" in argv
    configs = "--configs" in argv
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        newt.options.flags.interpret = True
    check(device, small=small or device == "cpu", no_tma=no_tma)
    print("every form matches torch" + (" on padded rows (no TMA)" if no_tma else ""))
    if small or device == "cpu":
        return
    twins = {}
    if common.have_triton():
        for _, k, *_ in FORMS:
            twins.setdefault(k, common.triton_twin(k))
        for form, pad in forms(no_tma):   # the twin must compute the same thing before timing
            check_form(form, twins[form[1]], device, small=False, pad=pad)
    t0 = time.time()
    table(device, twins, lambda fn: newt.testing.do_bench(fn, warmup=10, rep=40,
                                                          return_mode="median"), no_tma=no_tma,
          configs=configs)
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
