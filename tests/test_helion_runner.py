"""scripts/run_helion_examples.py on small Helion-style programs written here: only import
lines change in the copies (and "cuda" literals when asked); a working program passes on the
interpreter, a failing one reports its exception line."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                      "run_helion_examples.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

from run_helion_examples import substitute  # noqa: E402

SCALE = '''"""Scales rows by a vector, written for Helion."""
from __future__ import annotations

import torch

import helion
import helion.language as hl
from helion._testing import DEVICE, run_example
from helion.autotuner import PowerOfTwoFragment


@helion.kernel(static_shapes=True)
def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] * w[tm][:, None]
    return out


def main() -> None:
    x = torch.randn([37, 45], device=DEVICE)
    w = torch.randn([37], device=DEVICE)
    assert isinstance(PowerOfTwoFragment(1, 8).default(), int)
    run_example(scale_rows, lambda x, w: x * w[:, None], (x, w))
    print("import helion stays as it is in this string")


if __name__ == "__main__":
    main()
'''
BROKEN = '''import helion
import helion.language as hl

print("working...")
raise ValueError("boom at step 2")
'''


def test_only_import_lines_change():
    out = substitute(SCALE)
    changed = [(a, b) for a, b in zip(SCALE.splitlines(), out.splitlines()) if a != b]
    assert changed == [
        ("import helion", "import deuteron as helion"),
        ("import helion.language as hl", "import deuteron.language as hl"),
        ("from helion._testing import DEVICE, run_example",
         "from deuteron._testing import DEVICE, run_example"),
        ("from helion.autotuner import PowerOfTwoFragment",
         "from deuteron.autotuner import PowerOfTwoFragment")]
    assert substitute("    import helion.exc  # why\r\n") == \
        "    import deuteron.exc; import deuteron as helion  # why\r\n"
    assert substitute("from triton.testing import do_bench\n") == \
        "from newt.testing import do_bench\n"


def test_cuda_literals_only_when_asked():
    line = 'x = torch.randn(4, device="cuda"); y = x.to(\'cuda\'); z = "cudax"\n'
    assert substitute(line) == line
    assert substitute(line, cuda_to_cpu=True) == \
        'x = torch.randn(4, device="cpu"); y = x.to("cpu"); z = "cudax"\n'


def test_runs_and_reports(tmp_path):
    ex = tmp_path / "examples"
    ex.mkdir()
    (ex / "scale.py").write_text(SCALE)
    (ex / "broken.py").write_text(BROKEN)
    (ex / "sub").mkdir()
    (ex / "sub" / "skipped.py").write_text(BROKEN)
    r = subprocess.run([sys.executable, SCRIPT, str(ex), "--timeout", "300"],
                       capture_output=True, text=True, timeout=600)
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.endswith(".py") or
            " pass " in ln or " fail " in ln}
    assert r.returncode == 1, r.stdout + r.stderr
    assert rows["scale.py"].split()[1] == "pass", r.stdout
    assert rows["broken.py"].split()[1] == "fail"
    assert rows["broken.py"].endswith("ValueError: boom at step 2")
    assert "skipped.py" not in r.stdout and "1 of 2 pass" in r.stdout
    assert (ex / "scale.py").read_text() == SCALE        # the originals are untouched
