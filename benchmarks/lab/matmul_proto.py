# Lab script, measured on commit 60057ea: it patches the library's internals of that commit
# (check it out to rerun it); not run by the test suite.
"""GPU check and timing of the standalone tensor-core matmul kernels (newt/codegen/wgmma.py,
newt/codegen/mma.py) against the Triton tutorial matmul and cuBLAS, in one run.

    PYTHONPATH=. python benchmarks/matmul_proto.py [--out DIR] [--quick] [--only _tma,_regs]

1. compiles every config with NVRTC in parallel worker processes (a compiler crash kills a
   worker, not this run), for sm_90a (wgmma) and sm_90 (mma.sync: same code as sm_80/sm_89);
2. checks every kernel against torch on fresh random data, odd shapes, strided / transposed
   operands, NaN-poisoned outputs (in a child process, so a faulting kernel cannot take the
   timing run down; a crash marks that kernel failed and the check continues after it);
3. times the passing configs, the Triton tutorial kernel (best of a config sweep) and
   torch.matmul (cuBLAS) at 2048 / 4096 / 8192, medians of CUDA-event timings;
4. prints one table last (TFLOP/s; registers and spills of the winners).

Measured on the H200 (2026-11-29, one run each, medians, M=N=K, A and B row-major), best
standalone config vs the Triton tutorial kernel (best of TRITON_CONFIGS) vs torch.matmul:
    fp16 2048/4096/8192:  newt 478/492/505   Triton 601/627/643   cuBLAS 599/650/642
    bf16 2048/4096/8192:  newt 480/530/527   Triton 618/659/641   cuBLAS 628/671/663
    tf32 8192:            newt 200           Triton 88            cuBLAS 345
  winner fp16/bf16: wgmma 256x128x64, 8 warps (2 consumer warpgroups), 4 stages, 183 registers,
  0 spills; tf32: 256x128x32, 8 warps, 4 stages, 216 registers, 0 spills. Every config passed
  the odd-shape checks (1000x1500x777, 4097x4095x4096, transposed/strided operands).
  History: first run 0.45-0.55x Triton (per-chunk address math in the copy loop); the
  row-step chunk map with one interior-tile test brought 0.76-0.82x.
  Not yet run on a GPU: the TMA variants (`_tma`: boxes + full/empty mbarriers, maps from
  newt/runtime/tensormap.py; checked on the CPU models of tests/test_dot_tma.py) and the
  register epilogue (`_regs`). TMA configs are checked on odd shapes with 16-byte row strides
  (the only ones they accept) and timed where the operands allow.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import ctypes
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from newt.codegen import mma, wgmma  # noqa: E402
from newt.runtime import nvrtc  # noqa: E402

W, M_ = wgmma.WgmmaConfig, mma.MmaConfig


def configs(quick=False):
    cs = {}
    for kind in ("f16", "bf16"):
        cs[f"{kind}"] = [
            W(kind, kind, 128, 256, 64, 8, 4), W(kind, kind, 128, 256, 64, 8, 3),
            W(kind, kind, 128, 128, 64, 8, 6), W(kind, kind, 128, 128, 64, 4, 6),
            W(kind, kind, 256, 128, 64, 8, 4), W(kind, kind, 256, 128, 64, 8, 3),
            # not yet measured: copies after the wgmma issue; two CTAs per SM
            W(kind, kind, 256, 128, 64, 8, 4, late_loads=True),
            W(kind, kind, 128, 256, 64, 8, 4, late_loads=True),
            W(kind, kind, 128, 128, 64, 4, 3), W(kind, kind, 128, 128, 64, 4, 3, late_loads=True),
            # not yet measured: TMA boxes + mbarriers (checked on the CPU models only), the
            # register epilogue, deeper rings
            W(kind, kind, 256, 128, 64, 8, 4, tma=True),
            W(kind, kind, 256, 128, 64, 8, 4, tma=True, epilogue="regs"),
            W(kind, kind, 128, 256, 64, 8, 4, tma=True),
            W(kind, kind, 128, 256, 64, 8, 4, tma=True, epilogue="regs"),
            W(kind, kind, 128, 128, 64, 8, 6, tma=True),
            W(kind, kind, 256, 128, 64, 8, 4, epilogue="regs"),
        ]
    cs["tf32"] = [W("tf32", "f32", 128, 128, 32, 8, 6), W("tf32", "f32", 128, 128, 32, 4, 6),
                  W("tf32", "f32", 256, 128, 32, 8, 4),
                  W("tf32", "f32", 256, 128, 32, 8, 4, epilogue="regs")]
    cs["mma"] = [M_("f16", "f16"), M_("bf16", "bf16"), M_("tf32", "f32", bk=32),
                 M_("s8", "s32", bk=128), M_("f16", "f32", 128, 128, 64, 2, 4, 4),
                 M_("f16", "f16", 256, 128, 64, 4, 2, 4)]
    if quick:
        cs = {k: v[:1] for k, v in cs.items()}
    return cs


def arch_of(cfg):
    return "sm_90a" if isinstance(cfg, wgmma.WgmmaConfig) else "sm_90"


def source_of(cfg):
    return (wgmma if isinstance(cfg, wgmma.WgmmaConfig) else mma).matmul_source(cfg)


def _compile(cfg):
    t = time.time()
    r = nvrtc.compile_cuda(source_of(cfg), cfg.name, arch_of(cfg))
    return cfg.name, r.cubin, r.report, time.time() - t, "wgmma.mma_async" in r.ptx, \
        "mma.sync" in r.ptx


def compile_all(cfgs, outdir):
    res = {}
    with cf.ProcessPoolExecutor(min(16, os.cpu_count() or 2)) as ex:
        futs = {ex.submit(_compile, c): c for c in cfgs}
        for f in cf.as_completed(futs):
            c = futs[f]
            try:
                name, cubin, rep, dt, has_wg, has_mma = f.result()
            except Exception as e:  # noqa: BLE001 - a crashed or failing compile is a result
                print(f"COMPILE FAIL {c.name}: {str(e)[:2000]}", flush=True)
                continue
            with open(os.path.join(outdir, name + ".cubin"), "wb") as fh:
                fh.write(cubin)
            res[name] = dict(rep, compile_s=round(dt, 2), wgmma=has_wg, mma=has_mma)
    return res


# ----------------------------------------------------------------------------- launching

class Launcher:
    def __init__(self, cfg, cubin_dir):
        from newt.runtime import driver
        import torch
        self.cfg, self.torch, self.driver = cfg, torch, driver
        dev = driver.Device.get(torch.cuda.current_device())
        with open(os.path.join(cubin_dir, cfg.name + ".cubin"), "rb") as fh:
            self.module = driver.Module(dev, fh.read(), cfg.name)
        self.kernel = self.module.get_kernel(cfg.name)
        self.kernel.set_dynamic_shared(cfg.shared_bytes)
        self.threads = 32 * cfg.num_warps

    def can_run(self, a, b):
        """A TMA kernel needs operands whose rows TMA can address (tensormap.can_map)."""
        if not getattr(self.cfg, "tma", False):
            return True
        from newt.runtime.tensormap import can_map
        es = a.element_size()
        return (can_map(a.data_ptr(), es, *a.shape, *a.stride())
                and can_map(b.data_ptr(), es, *b.shape, *b.stride()))

    def __call__(self, a, b, c):
        M, K = a.shape
        N = b.shape[1]
        vals = [ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()),
                ctypes.c_void_p(c.data_ptr()), ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K)]
        vals += [ctypes.c_longlong(s) for s in (*a.stride(), *b.stride(), *c.stride())]
        addrs = [ctypes.addressof(v) for v in vals]
        if getattr(self.cfg, "tma", False):   # maps by value: pointers to their 128 bytes
            from newt.runtime.tensormap import default_maps
            addrs += [ctypes.addressof(m) for m in default_maps().matmul(self.cfg, a, b)]
        params = (ctypes.c_void_p * len(addrs))(*addrs)
        grid = -(-M // self.cfg.bm) * -(-N // self.cfg.bn)
        stream = self.torch.cuda.current_stream().cuda_stream
        res = self.driver.lib().cuLaunchKernel(self.kernel.handle, grid, 1, 1, self.threads, 1, 1,
                                               self.cfg.shared_bytes, stream, params, None)
        self.driver.check(res, "cuLaunchKernel", self.cfg.name)


TORCH_DT = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32", "s8": "int8",
            "f32": "float32", "s32": "int32"}


def make_inputs(kind, M, N, K, b_trans=False, a_trans=False):
    import torch
    dt = getattr(torch, TORCH_DT[kind])
    if kind == "s8":
        a = torch.randint(-100, 100, (M, K), device="cuda", dtype=dt)
        b = torch.randint(-100, 100, (K, N), device="cuda", dtype=dt)
    else:
        a = torch.randn(M, K, device="cuda").to(dt)
        b = torch.randn(K, N, device="cuda").to(dt)
    if a_trans:
        a = a.t().contiguous().t()
    if b_trans:
        b = b.t().contiguous().t()
    return a, b


def check_one(cfg, cubin_dir):
    import torch
    run = Launcher(cfg, cubin_dir)
    shapes = [(1000, 1500, 777, False, False), (4097, 4095, 4096, False, False),
              (512, 512, 512, False, False), (257, 383, 200, True, False),
              (300, 520, 264, False, True), (129, 264, 64, True, True), (64, 8, 16, False, False)]
    if getattr(cfg, "tma", False):   # odd sizes whose rows TMA can address (16-byte strides)
        shapes = [(1000, 1512, 776, False, False), (4097, 4088, 4096, False, False),
                  (512, 512, 512, False, False), (129, 264, 72, False, False),
                  (64, 8, 24, False, False), (300, 520, 264, False, True)]
    worst = 0.0
    for (M, N, K, bt, at) in shapes:
        a, b = make_inputs(cfg.kind, M, N, K, bt, at)
        if not run.can_run(a, b):
            continue
        c = torch.empty(M, N, device="cuda", dtype=getattr(torch, TORCH_DT[cfg.out]))
        if c.dtype.is_floating_point:
            c.fill_(float("nan"))
        else:
            c.fill_(-12345)
        run(a, b, c)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        if cfg.kind == "s8":
            ok = bool((c.double() == ref).all())
            err = 0.0 if ok else float((c.double() - ref).abs().max())
        else:
            cd = c.double()
            if not torch.isfinite(cd).all():
                return False, f"non-finite output at {M}x{N}x{K} bt={bt} at={at} " \
                              f"({int((~torch.isfinite(cd)).sum())} elements)"
            err = float((cd - ref).norm() / ref.norm())
            ok = err < {"f16": 2e-3, "bf16": 1e-2, "tf32": 3e-3}[cfg.kind]
        worst = max(worst, err)
        if not ok:
            bad = ((c.double() - ref).abs() > 0.05 * ref.abs().max()).nonzero()
            run(a, b, c)
            torch.cuda.synchronize()
            err2 = float((c.double() - ref).norm() / ref.norm())
            return False, (f"rel err {err:.3g} (rerun {err2:.3g}) at {M}x{N}x{K} bt={bt} at={at};"
                           f" {len(bad)} bad elements, first {bad[:4].tolist()}")
    return True, f"worst rel err {worst:.2g}"


def check_child(names, cubin_dir, result_file):
    allc = {c.name: c for cs in configs().values() for c in cs}
    for n in names:
        ok, msg = check_one(allc[n], cubin_dir)
        with open(result_file, "a") as fh:
            fh.write(json.dumps([n, ok, msg]) + "\n")


def check_all(names, cubin_dir, outdir):
    """Run checks in a child; a crash marks the kernel it was on as failed and goes on."""
    result_file = os.path.join(outdir, "check.jsonl")
    done = {}
    todo = list(names)
    while todo:
        try:   # a kernel that never finishes (e.g. an mbarrier phase that never completes)
            subprocess.run([sys.executable, __file__, "--check-child", json.dumps(todo),
                            "--cubins", cubin_dir, "--results", result_file],
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                           timeout=60 + 20 * len(todo))
        except subprocess.TimeoutExpired:
            pass   # the config it was on is marked failed below
        if os.path.exists(result_file):
            for line in open(result_file):
                n, ok, msg = json.loads(line)
                done[n] = (ok, msg)
        rest = [n for n in todo if n not in done]
        if rest and rest == todo or (rest and rest[0] == todo[0]):
            done[rest[0]] = (False, "crashed (device fault) or hung during the check")
            with open(result_file, "a") as fh:
                fh.write(json.dumps([rest[0], False, done[rest[0]][1]]) + "\n")
        todo = [n for n in todo if n not in done]
    return done


# ----------------------------------------------------------------------------- Triton reference

TRITON_CONFIGS = [  # (BM, BN, BK, stages, warps): a sweep around the tutorial's CUDA list
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 64, 4, 4),
    (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4), (128, 128, 64, 3, 8),
]


def triton_matmul():
    import triton
    import triton.language as tl

    @triton.jit
    def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
        # Tutorial form: grouped ordering, wrapped row/col offsets, K-masked loads.
        pid = tl.program_id(0)
        grid_m = tl.cdiv(M, BM)
        grid_n = tl.cdiv(N, BN)
        width = GROUP_M * grid_n
        first_m = (pid // width) * GROUP_M
        gsize = min(grid_m - first_m, GROUP_M)
        pm = first_m + (pid % width) % gsize
        pn = (pid % width) // gsize
        rm = (pm * BM + tl.arange(0, BM)) % M
        rn = (pn * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        pa = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
        pb = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(pa, mask=rk[None, :] < K - k * BK, other=0.0)
            b = tl.load(pb, mask=rk[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            pa += BK * s_ak
            pb += BK * s_bk
        out = acc.to(c_ptr.dtype.element_ty)
        cm = pm * BM + tl.arange(0, BM)
        cn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + cm[:, None] * s_cm + cn[None, :] * s_cn, out,
                 mask=(cm[:, None] < M) & (cn[None, :] < N))

    def run(a, b, c, cfg):
        BM, BN, BK, S, Wn = cfg
        M, K = a.shape
        N = b.shape[1]
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, GROUP_M=8,
                        num_stages=S, num_warps=Wn)
    return run


def bench(fn):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def time_all(passing, cubin_dir, reports, quick):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    tri = triton_matmul()
    allc = {c.name: c for cs in configs().values() for c in cs}
    rows = []
    sizes = [2048, 4096, 8192] if not quick else [4096]
    plan = [("f16", s) for s in sizes] + [("bf16", s) for s in sizes] + [("tf32", 8192)]
    launchers = {}
    for kind, n in plan:
        a, b = make_inputs(kind, n, n, n)
        out_dt = a.dtype
        flop = 2.0 * n ** 3
        best_newt = (0.0, None)
        for name in passing:
            cfg = allc[name]
            if cfg.kind != kind or cfg.name.startswith("newt_mma_") and kind != "f16":
                continue
            if name not in launchers:
                launchers[name] = Launcher(cfg, cubin_dir)
            if not launchers[name].can_run(a, b):
                continue
            if name not in launchers:
                launchers[name] = Launcher(cfg, cubin_dir)
            c = torch.empty(n, n, device="cuda", dtype=getattr(torch, TORCH_DT[cfg.out]))
            ms = bench(lambda: launchers[name](a, b, c))
            tf = flop / ms / 1e9
            print(f"  newt {kind} {n} {name}: {tf:.0f} TFLOP/s", flush=True)
            if tf > best_newt[0]:
                best_newt = (tf, name)
        best_tri = (0.0, None)
        c = torch.empty(n, n, device="cuda", dtype=out_dt)
        for tc in TRITON_CONFIGS:
            if kind == "tf32" and tc[2] == 64 and tc[0] * tc[1] >= 32768:
                continue  # fp32 tiles this large exceed shared memory
            try:
                ms = bench(lambda: tri(a, b, c, tc))
            except Exception as e:  # noqa: BLE001 - an unlaunchable config is skipped
                print(f"  triton {tc} failed: {str(e)[:200]}")
                continue
            tf = flop / ms / 1e9
            print(f"  triton {kind} {n} {tc}: {tf:.0f} TFLOP/s", flush=True)
            if tf > best_tri[0]:
                best_tri = (tf, tc)
        ms = bench(lambda: torch.matmul(a, b))
        cub = flop / ms / 1e9
        print(f"  cublas {kind} {n}: {cub:.0f} TFLOP/s", flush=True)
        rows.append((kind, n, best_newt, best_tri, cub))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/matmul_proto"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated parts of config names to keep "
                    "(e.g. _tma,_regs)")
    ap.add_argument("--check-child")
    ap.add_argument("--cubins")
    ap.add_argument("--results")
    args = ap.parse_args()
    if args.check_child:
        return check_child(json.loads(args.check_child), args.cubins, args.results)
    os.makedirs(args.out, exist_ok=True)
    cubin_dir = os.path.join("/tmp", "matmul_proto_cubins")
    os.makedirs(cubin_dir, exist_ok=True)
    cfgs = [c for cs in configs(args.quick).values() for c in cs]
    if args.only:
        cfgs = [c for c in cfgs if any(p in c.name for p in args.only.split(","))]
    t0 = time.time()
    reports = compile_all(cfgs, cubin_dir)
    print(f"compiled {len(reports)}/{len(cfgs)} in {time.time() - t0:.1f}s", flush=True)
    for n, r in sorted(reports.items()):
        print(f"  {n}: regs {r['n_regs']} spills {r['n_spills']} compile {r['compile_s']}s "
              f"wgmma={r['wgmma']} mma={r['mma']}", flush=True)
    checks = check_all(sorted(reports), cubin_dir, args.out)
    for n, (ok, msg) in sorted(checks.items()):
        print(f"  check {'PASS' if ok else 'FAIL'} {n}: {msg}", flush=True)
    passing = [n for n, (ok, _) in checks.items() if ok and reports[n]["n_spills"] == 0]
    if args.no_time:
        return
    rows = time_all(sorted(passing), cubin_dir, reports, args.quick)
    import torch
    print(f"\n== matmul TFLOP/s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{torch.cuda.get_device_name()}, M=N=K, A row-major, B row-major ==")
    print(f"{'dtype':5} {'size':>5} {'newt':>6} {'triton':>7} {'cuBLAS':>7} {'n/tri':>6} "
          f"{'n/cub':>6}  newt config (regs/spills) | triton config")
    with open(os.path.join(args.out, "table.json"), "w") as fh:
        json.dump(rows, fh)
    for kind, n, (tn, nn), (tt, tc), cub in rows:
        rep = reports.get(nn, {})
        print(f"{kind:5} {n:5d} {tn:6.0f} {tt:7.0f} {cub:7.0f} {tn / max(tt, 1e-9):6.2f} "
              f"{tn / cub:6.2f}  {nn} ({rep.get('n_regs')}/{rep.get('n_spills')}) | {tc}")


if __name__ == "__main__":
    main()
