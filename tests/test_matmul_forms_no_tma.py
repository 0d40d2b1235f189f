"""benchmarks/matmul_forms.py --no-tma: the forms launched on rows padded by 16 bytes (strides
not divisible by 16) take the cp.async ring on sm_90a, with the library unchanged, and compile
without spills; the padded launches match torch on the interpreter (NaN-poisoned outputs, odd
sizes for the forms that mask); tf32 takes the swapped dot there too. GPU timing: `python benchmarks/matmul_forms.py --no-tma`."""
import os
import sys

import pytest
import torch

import newt
from newt.runtime import specialize as S

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


def _padded_forms():
    import matmul_forms as mf
    return [pytest.param(f, pad, id=f[0]) for f, pad in mf.forms(no_tma=True)]


@pytest.mark.parametrize("form,pad", _padded_forms())
def test_padded_rows_take_the_cp_async_ring_without_spills(form, pad):
    """The launcher's own specialization of padded operands (sizes divisible by 16, as the
    benchmark's), compiled for sm_90a at the sweep's first tile."""
    import matmul_forms as mf
    name, k, dt, bt, kind, _ = form
    B = 2 if kind == "batched" else 1
    M, N, K = 256, 128, 256
    a, b = mf.operands(dt, bt, B, M, N, K, "cpu", pad)
    c = mf.output(kind, dt, B, M, N, "cpu", 0.0, pad)
    cfg = mf.sweep(dt)[0]
    _, args, kw = mf.launch_args(kind, a, b, c, cfg)
    arguments, nw, ns = S.bind(k, args, kw)
    sig, cx, spec, _ = S.specialize(k, arguments, allow_cpu=True)
    ck = newt.compile(k, sig, cx, arch="sm_90a", num_warps=nw, num_stages=ns,
                      specialization=spec)
    assert "ring(S=4, D=3, cp.async: " in ck.ir and "tma)" not in ck.ir, name
    assert ck.n_spills == 0 and ck.local_bytes == 0, (name, ck.n_spills, ck.local_bytes)
    assert ("ring_copy='k_runs'" in ck.ir) == bt, name
    # tf32 with an N-major B: copied as it lies, by 16-byte copies, and computed swapped
    # (C^T = B^T A^T), as the TMA ring does, not transposed by 4-byte copies
    assert (" swapped wgmma" in ck.ir) == (dt == torch.float32), name
    assert "newt_cp_async4(" not in ck.source, name


def test_no_tma_check_only_on_the_interpreter(monkeypatch, capsys):
    import matmul_forms as mf
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mf.main(["--check-only", "--no-tma"])
    assert "every form matches torch on padded rows (no TMA)" in capsys.readouterr().out
    assert all(f[2].itemsize > 1 for f, _ in mf.forms(no_tma=True))
    assert len(mf.forms(no_tma=True)) == len(mf.FORMS) - 1      # (the fp8 row)


def test_no_tma_table_logic_on_the_interpreter(monkeypatch, capsys):
    """The timed part with --no-tma and a fake timer that runs each call once: one row per
    padded form, each marked."""
    import matmul_forms as mf
    from test_matmul_forms import table_rows
    rows, calls = table_rows(monkeypatch, capsys, no_tma=True)
    assert len(rows) == len(mf.forms(no_tma=True)) and calls == 2 * len(rows)
    assert all(r[:36].strip().endswith("(no TMA)") for r in rows)
