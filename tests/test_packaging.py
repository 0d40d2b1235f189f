"""The package as a user installs it: a wheel and an sdist built from a clean copy of the
tree (what git tracks, or the tree without build outputs), their metadata and contents, and the
wheel installed in a fresh virtual environment running the first example from outside the
source tree. One test, run once: the build and the venv cost about half a minute. The venv sees
the system's site-packages, so torch is not downloaded again; the build uses the installed
setuptools (no network)."""
import os
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _clean_copy(dest):
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        files = None
    if not files or not any(files):
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            ".git", "__pycache__", "*.pyc", "build", "dist", "*.egg-info", ".pytest_cache"))
        return
    for f in filter(None, files):
        src = os.path.join(ROOT, f)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, f))


def _run(cmd, **kwargs):
    r = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_wheel_and_sdist_build_install_and_run_the_example(tmp_path):
    pytest.importorskip("setuptools", minversion="77")
    src, dist = tmp_path / "src", tmp_path / "dist"
    _clean_copy(src)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(dist), str(src)])
    wheel = next(dist.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "newt/jit.py" in names and "deuteron/kernel.py" in names
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
    for line in ("License-Expression: MIT", "Requires-Python: >=3.10",
                 "Classifier: Programming Language :: Python :: 3.10", "Author: The newt authors"):
        assert line in meta, line
    assert "License: MIT" not in meta      # the deprecated table form

    _run([sys.executable, "-c", "from setuptools import build_meta as b; "
          f"b.build_sdist({str(dist)!r})"], cwd=src)
    with tarfile.open(next(dist.glob("*.tar.gz"))) as t:
        members = {m.split("/", 1)[1] for m in t.getnames() if "/" in m}
    for needed in ("LICENSE", "README.md", "examples/01_vector_add.py", "docs/language.md",
                   "docs/img/pipeline.svg", "newt/jit.py"):
        assert needed in members, needed

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    py = str(venv / "bin" / "python")
    if sys.prefix != sys.base_prefix:
        # this interpreter is itself a venv's (torch lives there, not in the system's): the
        # new one sees its packages through a .pth line (appended after its own site-packages,
        # so the wheel's newt still comes first)
        purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        (Path(purelib.strip()) / "parent_env.pth").write_text(
            "\n".join(site.getsitepackages()) + "\n")
    # without PYTHONPATH: a checkout on it (its egg-info) would count as installed already
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], env=env)
    away = tmp_path / "elsewhere"
    away.mkdir()
    example = away / "vector_add.py"
    shutil.copy(src / "examples" / "01_vector_add.py", example)
    env["NEWT_CACHE_DIR"] = str(tmp_path / "cache")
    where = _run([py, "-c", "import newt, deuteron; print(newt.__file__); print(deuteron.__file__)"],
                 cwd=away, env=env)
    assert all(p.startswith(str(venv)) for p in where.split()), where
    out = _run([py, str(example), "--small"], cwd=away, env=env)
    assert out.strip(), "the example printed nothing"
