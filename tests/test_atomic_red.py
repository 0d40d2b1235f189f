"""Vector reductions for block atomic adds whose old values are unused (passes/accesses.py,
codegen/atomics.py): split-K's `atomic_add(c_ptrs, acc, mask=...)` becomes `red...v4.f32` on
sm_90 when the run facts prove each group consecutive and aligned, with the reason printed
when not; the scalar atomics stay on sm_80. The generated code is checked on the CPU emulator
(fp32, fp16, bf16, odd sizes, masked-off elements NaN-poisoned and left alone)."""
import os
import re
import shutil
import sys

import pytest
import torch

import newt
import newt.language as nl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


def _splitk(arch, **kw):
    import matmul_forms as mf
    from test_matmul_forms import _compile
    return _compile(mf.mm_splitk, arch, **kw)


def test_split_k_epilogue_is_vector_reductions_on_sm90():
    ck = _splitk("sm_90a")
    assert re.findall(r"red=(\S+?)[,}]", ck.ir) == ["v4.f32"]
    src = ck.source
    assert "red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" in src
    assert "atom.acq_rel.gpu.global.add.f32" not in src
    # acq_rel: one fence before the thread's reductions (release), one after (acquire)
    body = src[src.index("__global__"):]
    assert body.count("nt_fence_acq_rel_gpu();") == 2
    assert ck.n_spills == 0 and ck.local_bytes == 0


def test_split_k_epilogue_keeps_scalar_atomics_on_sm80():
    ck = _splitk("sm_80")
    assert "red=" not in ck.ir and "red_why" not in ck.ir
    assert "atom.acq_rel.gpu.global.add.f32" in ck.source and "red.relaxed" not in ck.source


def test_unaligned_rows_keep_scalar_atomics_and_say_why():
    """A row stride of no known divisibility: a group's 16 bytes may straddle it."""
    ck = _splitk("sm_90a", loose=("stride_cm",))
    assert "red=" not in ck.ir
    assert ("red_why='the pointers are not proven consecutive and 16-byte aligned under one "
            "mask bit per group of 4'") in ck.ir
    assert "atom.acq_rel.gpu.global.add.f32" in ck.source


@newt.jit
def _tile_add(out_ptr, x_ptr, old_ptr, n, BLOCK: nl.constexpr, SEM: nl.constexpr,
              KEEP: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    old = nl.atomic_add(out_ptr + offs, x, mask=offs < n, sem=SEM)
    if KEEP:
        nl.store(old_ptr + offs, old, mask=offs < n)


def _compile_tile(arch, dt, sem="acq_rel", keep=False):
    sig = {"out_ptr": "*" + dt, "x_ptr": "*" + dt, "old_ptr": "*" + dt, "n": "i32"}
    spec = {p: {"divisible_by_16": True} for p in sig}
    return newt.compile(_tile_add, sig, dict(BLOCK=1024, SEM=sem, KEEP=keep), arch=arch,
                        num_warps=4, specialization=spec)


def test_read_old_values_keep_scalar_atomics():
    ck = _compile_tile("sm_90a", "fp32", keep=True)
    assert "red_why='the old values are read'" in ck.ir and "red.relaxed" not in ck.source


@pytest.mark.parametrize("dt,want", [("fp32", "v4.f32"), ("fp16", "v8.f16"),
                                     ("bf16", "v8.bf16")])
def test_tile_add_vector_forms(dt, want):
    ck = _compile_tile("sm_90a", dt, sem="relaxed")
    assert re.findall(r"red=(\S+?)[,}]", ck.ir) == [want]
    n, ty = want.split(".")
    ptx = f"add.{n}.f32" if ty == "f32" else f"add.noftz.{n}.{ty}"
    assert f"red.relaxed.gpu.global.{ptx} [%0]" in ck.source
    # relaxed: no fence
    assert "nt_fence_acq_rel" not in ck.source


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dt,sem,n", [(torch.float32, "acq_rel", 2000),
                                      (torch.float16, "relaxed", 2000),
                                      (torch.bfloat16, "release", 2000),
                                      (torch.float32, "acq_rel", 1001)])
def test_tile_add_emulated(dt, sem, n):
    """The generated sm_90a code on the CPU emulator: every element below n receives its add
    once, the NaN-poisoned elements past n stay untouched. An odd n leaves the mask's groups
    unproven: scalar atomics."""
    import test_codegen_emulator as E
    torch.manual_seed(3)
    BLOCK = 1024
    out = torch.randn(2100).to(dt)
    out[n:] = float("nan")
    want = out.clone()
    x = torch.randn(2100).to(dt)
    want[:n] = (want[:n].double() + x[:n].double()).to(dt)
    E.emulate(_tile_add, (-(-n // BLOCK),), out, x, out, n, BLOCK=BLOCK, SEM=sem, KEEP=False)
    assert ("nt_red_add_v" in E.build.last_source) == (n % 16 == 0)
    assert torch.isnan(out[n:]).all()
    torch.testing.assert_close(out[:n], want[:n], atol=0, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [4096, 1001])
def test_tile_add_gpu(dt, n):
    """The same adds on the GPU: vector reductions (n a multiple of 16) or scalar atomics."""
    torch.manual_seed(6)
    out = torch.randn(n + 100, device="cuda").to(dt)
    out[n:] = float("nan")
    x = torch.randn(n + 100, device="cuda").to(dt)
    want = out.clone()
    want[:n] = (want[:n].double() + x[:n].double()).to(dt)
    _tile_add[(-(-n // 1024),)](out, x, out, n, BLOCK=1024, SEM="acq_rel", KEEP=False)
    assert torch.isnan(out[n:]).all()
    torch.testing.assert_close(out[:n], want[:n], atol=0, rtol=0)
