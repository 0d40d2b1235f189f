"""Write the generated CUDA C++ of every kernel the project compiles on the CPU to a folder,
for sm_80 and sm_90a, one file per kernel, config and arch, under a stable name.

    python scripts/dump_sources.py OUT_DIR [--no-tests] [--tests tests/test_x.py ...]

A refactoring of the passes or codegen that must not change the generated code runs this before
and after and compares the folders (`diff -r BEFORE AFTER` is empty). Sources come from:
  - aot__*   every `AOT` entry of the examples and benchmarks, and the configs the matmul and
             attention benchmarks precompile (bench_matmul.precompile, bench_attention.precompile),
             specialized as a launch on CPU tensors would be;
  - test__*  every kernel the CPU tests compile: newt.compiler.compile is wrapped while the
             tests run, and each call is generated again from its Python source for both archs
             (plus any direct codegen.generate call, at the arch the test used).
Only frontend -> passes -> codegen runs for the dump, at the default occupancy hint. While the
tests run, NVRTC is replaced by a stand-in (a fixed ptxas report, no PTX) and compiles stay in
this process: the dump records which kernels the tests compile, not whether the tests pass, and
a run takes minutes instead of an hour. A kernel that does not compile for an arch gets a `.err`
file with the error's first line.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

ARCHS = ("sm_80", "sm_90a")
# test files that compile kernels on the CPU; the variant-script test runs experiment scripts
# that rewrite codegen's output, not the library's own code
TESTS = """test_accesses test_attention test_attention_emulated test_autotune test_cache
test_codegen test_codegen_emulator test_codegen_layouts test_compile test_deuteron_autotune
test_dot_codegen test_dot_pipeline test_dot_tma_plan test_errors test_examples test_fp8
test_fuzz_regressions test_jit test_masks test_persistent test_ring_tma test_runtime_cubin
test_runtime_launch test_scaled_reduce test_store_tma test_dot_emulated test_dot_kmajor_emulated
test_dot_tma test_ops_dot""".split()


def _clean(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", s).strip("_")[:150]


class Dumper:
    def __init__(self, out: str):
        self.out = out
        self.count = 0
        self.seen: dict = {}
        os.makedirs(out, exist_ok=True)

    def write(self, stem: str, arch: str, text: str, ok: bool = True):
        stem = _clean(stem)
        k = self.seen.get((stem, arch), 0)
        self.seen[stem, arch] = k + 1
        name = f"{stem}__{k}__{arch}.{'cu' if ok else 'err'}"
        with open(os.path.join(self.out, name), "w") as f:   # (the same text in any checkout)
            f.write(text.replace(ROOT + os.sep, "<root>/"))
        self.count += 1

    def generate(self, stem, fn, signature, constexprs, spec, num_warps, num_stages):
        """frontend -> passes -> codegen of one specialization, for both archs."""
        from newt import compiler, dtypes
        from newt.codegen import generate
        from newt.frontend import build_ir
        from newt.options import Options
        from newt.passes import run_passes
        pyfn = getattr(fn, "fn", fn)
        sig = {k: (dtypes.from_signature(v) if isinstance(v, str) else v)
               for k, v in signature.items()}
        for arch in ARCHS:
            try:
                options = Options(arch=arch, num_warps=num_warps, num_stages=num_stages)
                ir_fn = build_ir(pyfn, sig, dict(constexprs or {}), dict(spec or {}))
                compiler._apply_specialization(ir_fn, dict(spec or {}))
                ir_fn.attrs["num_warps"] = num_warps
                run_passes(ir_fn, options)
                source, _ = _GENERATE[0](ir_fn, options) if _GENERATE else generate(ir_fn, options)
                self.write(f"{stem}__{pyfn.__name__}", arch, source)
            except Exception as e:  # noqa: BLE001 - the failure is part of the record
                first = (str(e).splitlines() or [""])[0]
                self.write(f"{stem}__{pyfn.__name__}", arch, f"{type(e).__name__}: {first}\n",
                           ok=False)


_GENERATE: list = []   # the unwrapped codegen.generate while the tests run


def dump_aot(d: Dumper):
    import glob

    import common  # benchmarks/common.py
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))
    paths += sorted(glob.glob(os.path.join(ROOT, "benchmarks", "bench_*.py")))
    for path in paths:
        stem = os.path.basename(path)[:-3]
        with open(path) as f:
            if not re.search(r"^AOT\s*=", f.read(), re.M):
                continue
        mod = common.load_file(path, "newt_dump_" + stem)
        for e in mod.AOT:
            d.generate(f"aot__{stem}", e["fn"], e["signature"], e["constexprs"], {},
                       e["num_warps"], e.get("num_stages", 3))
    for stem, fn, sig, cx, spec, nw, ns in _benchmark_jobs():
        d.generate(f"aot__{stem}", fn, sig, cx, spec, nw, ns)


def _benchmark_jobs():
    """The specializations bench_matmul and bench_attention precompile, on CPU tensors."""
    import torch

    import bench_attention
    import bench_matmul
    from newt.runtime import specialize
    jobs = []
    kernel = bench_matmul.example().matmul_kernel
    plan = bench_matmul._plan(False)
    for dt, bt in sorted({(d, t) for d, _, t in plan}, key=str):
        t = torch.empty(16, dtype=dt)
        tc = torch.empty(16, dtype=torch.float16) if dt == bench_matmul.FP8 else t
        shapes = list(bench_matmul.CHECK_SHAPES) + \
            [(n, n, n, "") for d, n, t2 in plan if (d, t2) == (dt, bt)]
        for BM, BN, BK, W, S in bench_matmul.configs(dt):
            for M, N, K, act in shapes:
                kw = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8,
                          ACTIVATION=act, num_warps=W, num_stages=S)
                bs = (1, K) if bt or dt == bench_matmul.FP8 else (N, 1)
                args, nw, ns = specialize.bind(kernel, (t, t, tc, M, N, K, K, 1, *bs, N, 1), kw)
                sig, cx, spec, _ = specialize.specialize(kernel, args, allow_cpu=True)
                job = ("bench_matmul", kernel, sig, cx, spec, nw, ns)
                if job[2:] not in [j[2:] for j in jobs]:
                    jobs.append(job)
    ex = bench_attention.example()
    size = bench_attention.SIZES["full"]
    for dtype in (torch.float16, torch.bfloat16):
        for D in (64, 128):
            t = torch.empty(size["B"], size["H"], size["N"], D, dtype=dtype)
            for causal in (False, True):
                _, args, kw = ex.launch_args(t, t, t, t, causal)
                arguments, nw, ns = specialize.bind(ex._attn_fwd, args, kw)
                sig, cx, spec, _ = specialize.specialize(ex._attn_fwd, arguments,
                                                          allow_cpu=True)
                jobs.append(("bench_attention", ex._attn_fwd, sig, cx, spec, nw, ns))
    return jobs


class _StandIn:
    """What nvrtc.compile_cuda returns while the tests run for the dump."""
    report = {"n_regs": 32, "n_spills": 0, "local_bytes": 0, "shared_bytes": 0}

    def __init__(self, source, name, arch, extra=()):
        self.name, self.arch, self.ptx, self.cubin, self.log = name, arch, "//\n", b"\0", ""


class CapturePlugin:
    """Wraps newt.compiler.compile and newt.codegen.generate while the tests run."""

    def __init__(self, d: Dumper):
        self.d = d
        self.node = "session"
        self.inside = 0

    def pytest_configure(self, config):
        import newt.codegen
        import newt.compiler
        from newt.runtime import nvrtc, precompile
        nvrtc.compile_cuda = _StandIn
        precompile.available = lambda: False
        orig_compile, orig_generate = newt.compiler.compile, newt.codegen.generate
        _GENERATE.append(orig_generate)
        plugin = self

        def compile(fn, signature, constexprs=None, *, arch="sm_90a", num_warps=4,
                    num_stages=3, specialization=None):
            plugin.inside += 1
            try:
                return orig_compile(fn, signature, constexprs, arch=arch, num_warps=num_warps,
                                    num_stages=num_stages, specialization=specialization)
            finally:
                plugin.inside -= 1
                plugin.d.generate(f"test__{plugin.node}", fn, signature, constexprs,
                                  specialization, num_warps, num_stages)

        def generate(fn, options):
            source, name = orig_generate(fn, options)
            if not plugin.inside:
                plugin.d.write(f"test__{plugin.node}__gen__{name}", options.arch, source)
            return source, name

        newt.compiler.compile = compile
        newt.codegen.generate = generate

    def pytest_collection_finish(self, session):
        """The CPU emulator (tests/test_codegen_emulator.py) builds and runs the generated code
        with g++: for the dump, its build stops after codegen (recorded as a direct generate)."""
        emu = sys.modules.get("test_codegen_emulator")
        if emu is None:
            return

        def build(jitfn, signature, constexprs, spec, num_warps):
            from newt import compiler, dtypes
            from newt.frontend import build_ir
            from newt.options import Options
            from newt.passes import run_passes
            sig = {k: dtypes.from_signature(v) if isinstance(v, str) else v
                   for k, v in signature.items()}
            fn = build_ir(jitfn.fn, sig, dict(constexprs), spec)
            compiler._apply_specialization(fn, spec)
            opts = Options(arch="sm_90a", num_warps=num_warps)
            run_passes(fn, opts)
            import newt.codegen
            newt.codegen.generate(fn, opts)
            raise RuntimeError("not emulated while dumping sources")

        emu.build = build

    def pytest_runtest_setup(self, item):
        self.node = item.nodeid.split("::", 1)[-1]
        mod = os.path.basename(item.nodeid.split("::", 1)[0])[:-3]
        self.node = f"{mod}__{self.node}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--no-tests", action="store_true")
    ap.add_argument("--tests", nargs="*", default=None)
    a = ap.parse_args(argv)
    # an empty disk cache: a cache hit would skip the compile, and with it the record
    os.environ["NEWT_CACHE_DIR"] = tempfile.mkdtemp(prefix="newt-dump-cache-")
    d = Dumper(a.out)
    dump_aot(d)
    n_aot = d.count
    if not a.no_tests:
        import pytest
        files = a.tests or [os.path.join(ROOT, "tests", t + ".py") for t in TESTS
                            if os.path.exists(os.path.join(ROOT, "tests", t + ".py"))]
        os.chdir(ROOT)
        pytest.main(["-q", "--tb=no", "-p", "no:cacheprovider", *files], plugins=[CapturePlugin(d)])
    print(f"{d.count} sources ({n_aot} from AOT lists and benchmarks) in {a.out}")


if __name__ == "__main__":
    main()
