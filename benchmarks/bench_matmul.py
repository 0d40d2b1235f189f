"""Matmul rows: newt vs Triton (the same kernel source, examples/05_matmul.py, nl -> tl) vs
torch.matmul (cuBLAS), fp16 / bf16 at 2048, 4096, 8192 and fp32 inputs (tf32) at 8192, in one
run; fp8 (e4m3 inputs, fp16 output, B given as the transpose of a row-major [N, K] matrix, as in
Triton's tutorial) at 4096 and 8192 against torch._scaled_mm (cuBLAS, scales of 1); x @ W.T
(B contiguous along K) in fp16 at 4096 and tf32 at 8192. Correctness first on odd shapes with
NaN-poisoned outputs; TFLOP/s = 2*M*N*K / median time.

    PYTHONPATH=. python benchmarks/bench_matmul.py [--quick] [--dtype fp16|bf16|tf32|fp8]

Both compilers get the same config sweep (CONFIGS: the standalone wgmma winner's shapes first),
every config of both and cuBLAS timed in interleaved rounds; each one's fastest median is
reported, with the registers / spills of newt's winner. Every newt
specialization the run will launch is compiled up front in parallel worker processes (the
runtime's precompile, into the disk cache), so the whole run stays near a minute.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402

import newt  # noqa: E402

CONFIGS = [  # (BM, BN, BK, num_warps, num_stages); the standalone winner (256x128x64 w8 s4) first
    (256, 128, 64, 8, 4), (128, 128, 64, 8, 4), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
    # fp32 inputs (tf32): the 64-deep tiles do not fit shared memory
    (128, 128, 32, 8, 4), (128, 256, 32, 8, 3), (128, 256, 32, 8, 4), (256, 128, 32, 8, 4),
]
# fp8: 128-deep tiles (128-byte rows, as the 64-deep 16-bit ones)
FP8_CONFIGS = [(128, 256, 128, 8, 3), (128, 256, 128, 8, 4), (256, 128, 128, 8, 3),
               (256, 128, 128, 8, 4), (128, 128, 128, 8, 4)]
FP8 = torch.float8_e4m3fn
# odd shapes (cp.async rings: rows not 16-byte aligned) and one with every row 16-byte aligned
# and every tail partial (TMA boxes on sm_90a, the swapped tf32 dot)
CHECK_SHAPES = [(1000, 1500, 777, "leaky_relu"), (4097, 4095, 4096, ""), (129, 520, 200, ""),
                (1008, 1520, 784, "leaky_relu")]


def example():
    return common.load_file(os.path.join(common.ROOT, "examples", "05_matmul.py"),
                            "newt_example_matmul")


def operands(dt, M, N, K, bt=False):
    """(a, b, c) of one problem: c poisoned with NaN; B contiguous along K (b = W.T, W of
    [N, K]) when bt, and always for fp8, whose output is fp16."""
    a = torch.randn(M, K, device="cuda").to(dt)
    if bt or dt == FP8:
        b = torch.randn(N, K, device="cuda").to(dt).t()
    else:
        b = torch.randn(K, N, device="cuda").to(dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16 if dt == FP8 else dt)
    return a, b, c


def configs(dt):
    return FP8_CONFIGS if dt == FP8 else [c for c in CONFIGS if _fits(dt, c)]


def reference(a, b):
    """torch's product of the same operands: cuBLAS (fp8: torch._scaled_mm, unit scales)."""
    if a.dtype == FP8:
        one = torch.ones((), device="cuda")
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)
    return torch.matmul(a, b)


def launch(kernel, a, b, c, cfg, act=""):
    BM, BN, BK, W, S = cfg
    M, K = a.shape
    N = b.shape[1]
    grid = (triton_cdiv(M, BM) * triton_cdiv(N, BN),)
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                 c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK,
                 GROUP_SIZE_M=8, ACTIVATION=act, num_warps=W, num_stages=S)


def triton_cdiv(a, b):
    return -(-a // b)


def bench(fn):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def check(kernel, dt, cfg, bt=False):
    """Odd shapes, poisoned output, fresh random data: relative error against fp64."""
    worst = 0.0
    for (M, N, K, act) in CHECK_SHAPES:
        a, b, c = operands(dt, M, N, K, bt)
        launch(kernel, a, b, c, cfg, act)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        if act:
            ref = torch.where(ref >= 0, ref, 0.01 * ref)
        if not torch.isfinite(c).all():
            return False, f"{M}x{N}x{K}: {int((~torch.isfinite(c)).sum())} unwritten/NaN elements"
        err = float((c.double() - ref).norm() / ref.norm())
        worst = max(worst, err)
        if err > (1e-2 if dt != torch.float32 else 5e-3):
            return False, f"{M}x{N}x{K}: rel err {err:.3g}"
    return True, f"worst rel err {worst:.2g}"


def _fits(dt, cfg):
    if dt == torch.float32:
        return (cfg[0] + cfg[1]) * cfg[2] * 4 * cfg[4] <= 220000
    return cfg[2] >= 64


def precompile(kernel, plan):
    """Compile every (dtype, config, shape) specialization the run launches, in parallel
    worker processes (into the disk cache); later launches load the binaries."""
    from newt.runtime import driver, precompile as pc, specialize
    jobs = []
    for dt, bt in sorted({(d, t) for d, _, t in plan}, key=str):
        t = torch.empty(16, device="cuda", dtype=dt)
        tc = torch.empty(16, device="cuda", dtype=torch.float16) if dt == FP8 else t
        shapes = [(M, N, K, act) for (M, N, K, act) in CHECK_SHAPES] + \
                 [(n, n, n, "") for d, n, t in plan if (d, t) == (dt, bt)]
        for cfg in configs(dt):
            BM, BN, BK, W, S = cfg
            for (M, N, K, act) in shapes:
                kw = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                          ACTIVATION=act, num_warps=W, num_stages=S)
                bs = (1, K) if bt or dt == FP8 else (N, 1)
                try:
                    arguments, nw, ns = specialize.bind(kernel, (t, t, tc, M, N, K, K, 1, *bs,
                                                                 N, 1), kw)
                    sig, cx, spec, dev = specialize.specialize(kernel, arguments)
                    arch = driver.Device.get(dev).arch
                except Exception as e:  # noqa: BLE001 - the launch reports it
                    print(f"precompile skip {cfg}: {e}")
                    continue
                job = (kernel, sig, cx, spec, arch, nw, ns)
                if job[1:] not in [j[1:] for j in jobs]:
                    jobs.append(job)
    t0 = time.time()
    res = pc.compile_in_workers(jobs)
    bad = [r for r in res if r]
    print(f"precompiled {len(jobs)} newt specializations in {time.time() - t0:.1f}s"
          + (f" ({len(bad)} failed: {bad[0][:200]})" if bad else ""), flush=True)


def regs_of(kernel, a, b, c, cfg):
    """registers/spills/local bytes of newt's binary for these arguments (ptxas report)."""
    try:
        BM, BN, BK, W, S = cfg
        M, K = a.shape
        N = b.shape[1]
        ln = kernel.warmup(a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                           c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                           BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION="", num_warps=W,
                           num_stages=S)
        m = ln.binary.meta
        return f"{m['n_regs']}r/{m['n_spills']}s/{m['local_bytes']}l"
    except Exception as e:  # noqa: BLE001 - reporting only
        return f"? ({type(e).__name__})"


_STATE: dict = {}   # kernels, passing configs: prepared once per process (run() may repeat)


def _sweep_in_rounds(kernels, cfgs, a, b, c, flop, errors, label):
    """Every (compiler, config) of the sweep and cuBLAS, timed in interleaved rounds
    (common.timed_in_rounds: the order rotates, so no configuration is always the one timed
    first, on the coolest GPU). Returns ({compiler: (TFLOP/s, config)} of each one's fastest
    config, cuBLAS TFLOP/s)."""
    calls = {}
    for name, k in kernels.items():
        for cfg in cfgs[name] if k is not None else ():
            fn = (lambda k=k, cfg=cfg: launch(k, a, b, c, cfg))
            try:
                fn()     # Triton compiles on its first call: not inside a timing
            except Exception as e:  # noqa: BLE001 - a failing config is a result
                errors[name] = f"{cfg}: {str(e)[:200]}"
                print(f"  {name} {cfg} failed: {str(e)[:200]}")
                continue
            calls[(name, cfg)] = fn
    calls[("cuBLAS", None)] = lambda: reference(a, b)
    torch.cuda.synchronize()
    ms, notes = common.timed_in_rounds(calls, lambda fn: (bench(fn), None))
    for (name, cfg), note in notes.items():
        errors[name] = f"{cfg}: {note}"
    best = {}
    for (name, cfg), t in ms.items():
        tf = flop / t / 1e9
        print(f"  {name} {label} {cfg}: {tf:.0f} TFLOP/s", flush=True)
        if name != "cuBLAS" and tf > best.get(name, (0.0,))[0]:
            best[name] = (tf, cfg)
    cub = ms.get(("cuBLAS", None))
    return best, flop / cub / 1e9 if cub else float("nan")


def _prepare(plan):
    if "ok_cfgs" in _STATE:
        return _STATE
    torch.backends.cuda.matmul.allow_tf32 = True
    ex = example()
    nk = ex.matmul_kernel
    tk = common.triton_twin(nk) if common.have_triton() else None
    try:
        precompile(nk, plan)
    except Exception as e:  # noqa: BLE001 - launches compile in-process instead
        print(f"precompile failed ({type(e).__name__}: {e}); compiling in-process")
    ok_cfgs = {}
    for dt, bt in sorted({(d, t) for d, _, t in plan}, key=str):
        ok_cfgs[dt, bt] = []
        for cfg in configs(dt):
            t0 = time.time()
            try:   # correctness before any timing
                ok, msg = check(nk, dt, cfg, bt)
            except Exception as e:  # noqa: BLE001 - a failing config is a result
                ok, msg = False, f"{type(e).__name__}: {str(e)[:300]}"
            label = str(dt)[6:] + (" B=W.T" if bt else "")
            print(f"check newt {label} {cfg}: {'PASS' if ok else 'FAIL'} {msg} "
                  f"({time.time() - t0:.1f}s)", flush=True)
            if ok:
                ok_cfgs[dt, bt].append(cfg)
    _STATE.update(nk=nk, tk=tk, ok_cfgs=ok_cfgs)
    return _STATE


def _plan(quick, dtype=None):
    """(input dtype, size, B contiguous along K) of each row."""
    if quick:
        return [(torch.float16, 4096, False)]
    plan = [(torch.float16, n, False) for n in (2048, 4096, 8192)] + \
        [(torch.bfloat16, n, False) for n in (2048, 4096, 8192)] + \
        [(torch.float32, 8192, False)] + [(FP8, n, True) for n in (4096, 8192)] + \
        [(torch.float16, 4096, True), (torch.float32, 8192, True)]     # x @ W.T
    names = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "tf32", FP8: "fp8"}
    return [(d, n, t) for d, n, t in plan if dtype in (None, names[d])]


def run(out_dir=None, quick=False, dtype=None):
    """run_all.py's interface: one row per (dtype, size), TFLOP/s of newt, Triton, cuBLAS."""
    t_start = time.time()
    plan = _plan(quick, dtype)
    st = _prepare(plan)
    nk, tk, ok_cfgs = st["nk"], st["tk"], st["ok_cfgs"]
    rows, table = [], []
    for dt, n, bt in plan:
        a, b, c = operands(dt, n, n, n, bt)
        flop = 2.0 * n ** 3
        errors = {}
        cfgs = configs(dt)
        best, cub = _sweep_in_rounds({"newt": nk, "triton": tk},
                                     {"newt": [x for x in cfgs if x in ok_cfgs.get((dt, bt), [])],
                                      "triton": cfgs}, a, b, c, flop, errors, f"{str(dt)[6:]} {n}")
        for p in ("newt", "triton"):    # (TFLOP/s, config, registers of newt's winner)
            tf, cfg = best.get(p, (0.0, None))
            best[p] = (tf, cfg, regs_of(nk, a, b, c, cfg) if p == "newt" and cfg else "")
        d = "fp8e4m3" if dt == FP8 else "tf32" if dt == torch.float32 else str(dt)[6:]
        d += " B=W.T" if bt and dt != FP8 else ""
        table.append((d, n, best["newt"], best["triton"], cub))
        wt = " (B = W.T)" if bt and dt != FP8 else ""
        rows.append(dict(workload=f"matmul {d.split()[0]} {n}^3{wt}",
                         unit="TFLOP/s", higher_is_better=True,
                         newt=best["newt"][0] or None, triton=best["triton"][0] or None,
                         torch=cub, errors=errors, target_ratio=1.0))
    print(f"\n== bench_matmul ({time.time() - t_start:.0f}s) "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
          f"{torch.cuda.get_device_name()} (examples/05_matmul.py, same source for Triton) ==")
    print(f"{'dtype':12} {'n':>5} {'newt':>6} {'triton':>7} {'cuBLAS':>7} {'n/tri':>6}  "
          "newt cfg (regs/spills/local) | triton cfg")
    for d, n, (tn, nc, nr), (tt, tc, _), cub in table:
        print(f"{d:12} {n:5d} {tn:6.0f} {tt:7.0f} {cub:7.0f} {tn / max(tt, 1e-9):6.2f}  "
              f"{nc} ({nr}) | {tc}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dtype", choices=["fp16", "bf16", "tf32", "fp8"], help="only this input type")
    args = ap.parse_args()
    run(None, quick=args.quick, dtype=args.dtype)


if __name__ == "__main__":
    main()
