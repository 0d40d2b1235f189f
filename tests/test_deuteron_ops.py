"""Every op of the deuteron op examples (examples/dt_ops_*.py, Helion-style kernels) on the
newt interpreter at small odd sizes, against torch, with the kernels' host allocations
NaN-poisoned (examples/dt_ops_common.py). The GPU run of the same ops: benchmarks/dt_ops.py."""
import os
import sys

import pytest
import torch

import newt.options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import dt_ops_basic  # noqa: E402
import dt_ops_common  # noqa: E402
import dt_ops_jagged  # noqa: E402
import dt_ops_matmul  # noqa: E402

OPS = dt_ops_basic.OPS + dt_ops_matmul.OPS + dt_ops_jagged.OPS


@pytest.fixture(autouse=True)
def _interp(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))
    monkeypatch.setattr(newt.options.flags, "interpret", True)


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_op_matches_torch(op):
    dt_ops_common.check(op, "cpu", small=True)


def test_names_are_unique():
    names = [op.name for op in OPS]
    assert len(names) == len(set(names))


def test_the_check_catches_an_unwritten_element():
    """A kernel that leaves one output element as allocated fails: host allocations are NaN."""
    op = next(o for o in OPS if o.name == "add")

    def skip_last(x, y):
        out = op.run(x, y)
        bad = torch.empty_like(out)
        bad[:-1] = out[:-1]
        return bad
    broken = dt_ops_common.Op("broken", op.make, skip_last, op.ref)
    with pytest.raises(AssertionError):
        dt_ops_common.check(broken, "cpu", small=True)


def test_benchmark_goes_on_past_a_failure_a_hang_and_a_crash(tmp_path):
    """benchmarks/dt_ops.py (here on the interpreter, --cpu): an op that raises, one that hangs
    past the per-op timeout and one that kills its worker are each reported, and the others
    still run and pass. The per-op timeout leaves room for a loaded machine: at 6 s, the
    interpreted `add` timed out beside a parallel GPU test run."""
    import subprocess
    env = dict(os.environ, DEUTERON_CACHE_DIR=str(tmp_path / "dt"),
               NEWT_CACHE_DIR=os.environ.get("NEWT_CACHE_DIR", str(tmp_path / "newt")))
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "dt_ops.py"), "--cpu", "--timeout", "20",
         "--ops", "add,sum,softmax,rope,matmul",
         "--fault", "sum:raise,softmax:hang,matmul:crash"],
        capture_output=True, text=True, timeout=300, env=env).stdout
    rows = {ln.split()[0].rstrip("*"): ln for ln in out.splitlines()
            if ln.split() and ln.split()[0].rstrip("*") in ("add", "sum", "softmax", "rope", "matmul")}
    assert " pass " in rows["add"] and " pass " in rows["rope"], out
    assert "injected failure" in rows["sum"] and "timeout" in rows["softmax"], out
    assert "worker crashed" in rows["matmul"], out
    assert "2/5 ops pass" in out


@pytest.mark.parametrize("name", ["matmul_split_k", "matmul_split_k_two_phase"])
def test_split_k_with_several_splits(name):
    """The registered split size at its minimum (64) against K = 200: four splits."""
    import deuteron as dt
    k = getattr(dt_ops_matmul, name)
    x, y = torch.randn(37, 200).half(), torch.randn(200, 29).half()
    n = len(k.trace(x, y).tunable)
    with dt_ops_common.poisoned_allocations():
        out = k.run((x, y), {}, dt.Config(block_sizes=[64, 16, 16, 32, 16, 16][:n]))
    torch.testing.assert_close(out, x.float() @ y.float(), rtol=1e-2, atol=1e-2)


EAGER = [op for op in OPS if op.eager is not None]


@pytest.mark.parametrize("op", EAGER, ids=[op.name for op in EAGER])
def test_the_timed_eager_form_computes_the_reference(op):
    """benchmarks/dt_ops.py times `eager` (torch in the inputs' dtype, as a user writes it)
    where the reference computes in fp32: both must be the same op."""
    torch.manual_seed(3)
    args = op.make("cpu", True)
    got, want = op.eager(*args), op.ref(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.float(), w.float(), atol=0.15, rtol=0.05)
