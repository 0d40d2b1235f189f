"""Shared memory is placed by the pass (newt/passes/smem.py, passes/tc/regions.py) and only read
by codegen: the printed IR's `smem_bytes` is what the launch requests (CompiledKernel.
shared_bytes), every region lies inside it, every shared-memory address the generated code
forms lies inside a region the IR shows, and codegen leaves the printed IR as it found it. For every matmul benchmark config (each input kind,
a TMA-sized and an odd, cp.async-ring shape) and every attention benchmark kernel, on sm_80 and
sm_90a; the first of each through newt.compile (NVRTC on the CPU). No GPU."""
import os
import re
import sys

import pytest
import torch

import newt
from newt import compiler, dtypes
from newt.codegen import generate
from newt.frontend import build_ir
from newt.ir.printer import format_function
from newt.ir.shared_memory import OWN, SCRATCH
from newt.options import Options
from newt.passes import run_passes
from newt.runtime import specialize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_attention  # noqa: E402
import bench_matmul  # noqa: E402

ARCHS = ("sm_80", "sm_90a")
FP8 = bench_matmul.FP8


def _bound(jf, args, kw):
    arguments, nw, ns = specialize.bind(jf, args, kw)
    sig, cx, spec, _ = specialize.specialize(jf, arguments, allow_cpu=True)
    return sig, cx, spec, nw, ns


def _matmul(dt, b_t, cfg, shape):
    BM, BN, BK, W, S = cfg
    M, N, K, act = shape
    t = torch.empty(16, dtype=dt)
    tc = torch.empty(16, dtype=torch.float16) if dt == FP8 else t
    bs = (1, K) if b_t or dt == FP8 else (N, 1)
    kw = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, ACTIVATION=act,
              num_warps=W, num_stages=S)
    jf = bench_matmul.example().matmul_kernel
    return (jf,) + _bound(jf, (t, t, tc, M, N, K, K, 1, *bs, N, 1), kw)


def _attention(dt, D, causal):
    ex = bench_attention.example()
    t = torch.empty(1, 2, 1024, D, dtype=dt)
    _, args, kw = ex.launch_args(t, t, t, t, causal)
    return (ex._attn_fwd,) + _bound(ex._attn_fwd, args, kw)


KINDS = [(torch.float16, False), (torch.bfloat16, False), (torch.float32, False), (FP8, True),
         (torch.float16, True), (torch.float32, True)]
SHAPES = [(4096, 4096, 4096, ""), (1000, 1500, 777, "leaky_relu")]
MATMUL = [(dt, bt, cfg, shape) for dt, bt in KINDS for cfg in bench_matmul.configs(dt)
          for shape in SHAPES]
ATTENTION = [(dt, D, causal) for dt in (torch.float16, torch.bfloat16) for D in (64, 128)
             for causal in (False, True)]

# the addresses codegen forms: the arena + a byte offset, a dot-area window + offset, a window
# of its own
_SCRATCH = re.compile(r"\(nt_smem \+ (\d+)\)")
_AREA = re.compile(r"\(\(\(newt_smem_addr\(nt_smem\) \+ (\d+)u \+ 1023u\) & ~1023u\) \+ (\d+)u\)")
_OWN = re.compile(r"\(\(newt_smem_addr\(nt_dot_smem\) \+ (\d+)u \+ 1023u\) & ~1023u\)")


def check(jf, sig, cx, spec, nw, ns, arch):
    sig = {k: dtypes.from_signature(v) for k, v in sig.items()}
    fn = build_ir(jf.fn, sig, cx, spec)
    compiler._apply_specialization(fn, spec)
    fn.attrs["num_warps"] = nw
    try:
        run_passes(fn, Options(arch=arch, num_warps=nw, num_stages=ns))
    except newt.CompilationError as e:      # (configs for the H200's 227 KB, on sm_80)
        assert arch == "sm_80" and "allows at most 166912 bytes" in e.msg, e.msg
        return None
    before = format_function(fn)
    printed = int(re.search(r"smem_bytes=(\d+)", before).group(1))
    source, _ = generate(fn, Options(arch=arch, num_warps=nw, num_stages=ns))
    assert format_function(fn) == before          # codegen wrote nothing into the IR
    total = fn.attrs["smem_bytes"]
    assert printed == total > 0
    regions = fn.attrs["smem"].regions
    assert all(r.end <= total for r in regions)
    starts = {(r.where, r.anchor, r.offset) for r in regions}
    for off in _SCRATCH.findall(source):
        assert any(r.where == SCRATCH and r.offset <= int(off) < r.offset + r.nbytes
                   for r in regions), off
    for anchor, off in _AREA.findall(source):
        assert any(r.where not in (SCRATCH, OWN) and r.anchor == int(anchor)
                   and r.offset <= int(off) < r.offset + r.nbytes for r in regions), (anchor, off)
    for anchor in _OWN.findall(source):
        assert (OWN, int(anchor), 0) in starts, anchor
    return fn


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt,bt,cfg,shape", MATMUL, ids=str)
def test_matmul_kernels_shared_memory_is_placed_by_the_pass(arch, dt, bt, cfg, shape):
    fn = check(*_matmul(dt, bt, cfg, shape), arch)
    if fn is None:
        return
    whats = {r.what for r in fn.attrs["smem"].regions}
    assert "ring" in whats or "tiles" in whats


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt,D,causal", ATTENTION, ids=str)
def test_attention_kernels_shared_memory_is_placed_by_the_pass(arch, dt, D, causal):
    check(*_attention(dt, D, causal), arch)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", ["matmul", "matmul_tma", "attention"])
def test_printed_figure_is_what_the_launch_requests(arch, case):
    """Through newt.compile: the IR CompiledKernel carries says the bytes it requests."""
    jf, sig, cx, spec, nw, ns = (
        _matmul(torch.float16, False, bench_matmul.CONFIGS[1], SHAPES[1]) if case == "matmul"
        else _matmul(torch.float16, False, bench_matmul.CONFIGS[1], SHAPES[0])
        if case == "matmul_tma" else _attention(torch.float16, 64, True))
    ck = newt.compile(jf, sig, cx, arch=arch, num_warps=nw, num_stages=ns, specialization=spec)
    assert int(re.search(r"smem_bytes=(\d+)", ck.ir).group(1)) == ck.shared_bytes > 0
