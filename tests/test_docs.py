"""The docs cannot rot: every fenced block marked ```python run in docs/*.md runs here on the
newt interpreter (CPU tensors), the generated pages (docs/language.md, docs/errors.md) must match
what scripts/gen_language_docs.py produces now, every relative link in the docs must point at a
file that exists, and every launch-error fragment the catalogue lists must still be in the code.

A runnable block is self-contained: it imports what it needs and checks its own result against
torch with asserts. Blocks run in a fresh namespace with `newt.options.flags.interpret = True`.
"""
import glob
import importlib.util
import os
import re

import pytest

import newt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
FENCE = re.compile(r"^```python run[^\n]*\n(.*?)^```", re.S | re.M)


def _gen():
    path = os.path.join(ROOT, "scripts", "gen_language_docs.py")
    spec = importlib.util.spec_from_file_location("_gen_language_docs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _blocks():
    out = []
    for path in DOCS:
        text = open(path).read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            out.append(pytest.param(path, line, m.group(1),
                                    id=f"{os.path.basename(path)}:{line}"))
    return out


BLOCKS = _blocks()


@pytest.fixture
def interpret():
    old = newt.options.flags.interpret
    newt.options.flags.interpret = True
    try:
        yield
    finally:
        newt.options.flags.interpret = old


@pytest.mark.parametrize("path, line, code", BLOCKS)
def test_runnable_block(path, line, code, interpret, tmp_path, monkeypatch):
    # the kernels' source must be findable by inspect.getsource: write the block to a file
    src = tmp_path / f"doc_block_{line}.py"
    src.write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location(f"doc_block_{line}", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)     # asserts inside the block are the test


def test_docs_have_runnable_blocks():
    in_explainer = [b for b in BLOCKS if b.values[0].endswith("explainer.md")]
    assert len(in_explainer) >= 5


def test_generated_pages_are_up_to_date():
    gen = _gen()
    for rel, make in gen.FILES.items():
        with open(os.path.join(ROOT, rel)) as f:
            assert f.read() == make(), f"{rel} is stale: run python scripts/gen_language_docs.py"


def test_every_name_has_a_docstring():
    with open(os.path.join(ROOT, "docs", "language.md")) as f:
        assert "(no docstring)" not in f.read()


def test_launch_error_fragments_exist():
    for what, rel, frag in _gen().LAUNCH_ERRORS:
        with open(os.path.join(ROOT, rel)) as f:
            assert frag in f.read(), f"{rel} no longer raises '{frag}' ({what})"


def test_relative_links_resolve():
    link = re.compile(r"\]\(((?!https?:|#|mailto:)[^)#\s]+)")
    bad = []
    for path in DOCS:
        text = re.sub(r"^```.*?^```", "", open(path).read(), flags=re.S | re.M)
        text = re.sub(r"`[^`\n]*`", "", text)      # inline code: kernel[grid](args)
        for target in link.findall(text):
            if not os.path.exists(os.path.join(os.path.dirname(path), target)):
                bad.append(f"{os.path.basename(path)} -> {target}")
    assert not bad, bad


def test_diagrams_are_committed_and_fresh(tmp_path):
    path = os.path.join(ROOT, "scripts", "make_diagrams.py")
    spec = importlib.util.spec_from_file_location("_make_diagrams", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, svg in mod.diagrams().items():
        committed = os.path.join(ROOT, "docs", "img", name)
        assert os.path.exists(committed), f"docs/img/{name} missing: run scripts/make_diagrams.py"
        assert open(committed).read() == svg, f"docs/img/{name} is stale"


def test_readme_numbers_come_from_benchmarks_page():
    """README.md's measured table is docs/benchmarks.md's, copied by a script, never typed."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "scripts/sync_readme_numbers.py", "--check"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
