"""NEWT_DEBUG=1 and NEWT_DUMP=dir (newt/debug_dump.py): the IR with each op's Python line, the
CUDA C++ with the common preamble summarized and comments naming Python lines, every stage
written to files, and both from a warm disk cache. No GPU: NVRTC compiles on the CPU."""
import os

import pytest

import newt
import newt.language as nl
from newt import compiler, passes
from newt.codegen.header import HEADER
from newt.runtime import specialize

SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@newt.jit
def softmax_row(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    e = nl.exp(x - nl.max(x, axis=0))
    nl.store(out_ptr + offs, e / nl.sum(e, axis=0), mask=offs < n)


def _line_of(text):
    src, first = open(__file__).read().splitlines(), softmax_row.fn.__code__.co_firstlineno
    return next(i + 1 for i, s in enumerate(src) if text in s and i + 1 > first)


@pytest.fixture
def debug(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "debug", True)
    monkeypatch.delenv("NEWT_DUMP", raising=False)


def test_debug_prints_ir_and_cuda_with_python_lines(debug, capsys):
    newt.compile(softmax_row, SIG, {"BLOCK": 64}, arch="sm_80")
    err = capsys.readouterr().err
    ir, cuda = err.split("// ===== newt CUDA C++: softmax_row")
    load_line = _line_of("x = nl.load(x_ptr")
    here = os.path.basename(__file__)
    assert f"# {here}:{load_line}: x = nl.load(x_ptr + offs" in ir
    assert ir.index(f"# {here}:{load_line}") < ir.index("= load ")    # above its op
    assert f"// {here}:{load_line}: x = nl.load(" in cuda
    assert f"// {here}:{_line_of('nl.store(out_ptr')}: nl.store(" in cuda
    assert "newt's common preamble: " in cuda
    assert HEADER.splitlines()[2] not in cuda          # the preamble itself is not printed
    assert len(cuda.splitlines()) < HEADER.count("\n") + len(cuda.split("__global__")[1].splitlines())


def test_dump_writes_every_stage(tmp_path, monkeypatch):
    monkeypatch.setattr(newt.options.flags, "debug", False)
    monkeypatch.setenv("NEWT_DUMP", str(tmp_path / "dump"))
    ck = newt.compile(softmax_row, SIG, {"BLOCK": 32}, arch="sm_90a")
    (folder,) = (tmp_path / "dump").iterdir()
    names = sorted(p.name for p in folder.iterdir())
    assert folder.name.startswith("softmax_row-")
    assert "00-frontend.ir" in names and "ir.ir" in names
    assert sum(n.endswith(".ir") for n in names) == len(passes.PASSES) + 2
    assert (folder / "kernel.cu").read_text() == ck.source and ck.source.startswith(HEADER)
    assert ".entry softmax_row" in (folder / "kernel.ptx").read_text()
    frontend = (folder / "00-frontend.ir").read_text()
    assert "layout=" not in frontend and "layout=" in (folder / "ir.ir").read_text()


def _binary(compiles, **kw):
    def compile_fn(*a, **k):
        compiles.append(1)
        return compiler.compile(*a, **k)
    return specialize.get_binary(softmax_row, SIG, {"BLOCK": 16}, {}, arch="sm_80", num_warps=4,
                                 num_stages=3, compile_fn=compile_fn, **kw)


def test_debug_and_dump_work_from_a_warm_disk_cache(tmp_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(newt.options.flags, "debug", False)
    monkeypatch.delenv("NEWT_DUMP", raising=False)
    compiles = []
    _binary(compiles)                      # a plain entry: no stages stored
    _binary(compiles)
    assert len(compiles) == 1
    monkeypatch.setenv("NEWT_DUMP", str(tmp_path / "d1"))
    _binary(compiles)                      # compiled once more, the entry now has its stages
    assert len(compiles) == 2
    monkeypatch.setenv("NEWT_DUMP", str(tmp_path / "d2"))
    _binary(compiles)                      # a hit: the stages come from the cache entry
    assert len(compiles) == 2
    d1, = (tmp_path / "d1").iterdir()
    d2, = (tmp_path / "d2").iterdir()
    assert sorted(p.name for p in d1.iterdir()) == sorted(p.name for p in d2.iterdir())
    assert (d1 / "kernel.cu").read_text() == (d2 / "kernel.cu").read_text()

    monkeypatch.delenv("NEWT_DUMP")
    monkeypatch.setattr(newt.options.flags, "debug", True)
    capsys.readouterr()
    _binary(compiles)                      # debug is its own entry (-lineinfo): one compile
    first = capsys.readouterr().err
    _binary(compiles)                      # then printed from the cache
    second = capsys.readouterr().err
    assert len(compiles) == 3
    assert first == second and "# test_debug_output.py:" in first



def test_every_nl_function_documents_its_parameters():
    import inspect
    missing = []
    for name in sorted(dir(nl)):
        f = getattr(nl, name)
        if name.startswith("_") or not inspect.isfunction(f) or f.__module__ != nl.__name__:
            continue
        doc = inspect.getdoc(f) or ""
        listed = doc.split("\nParameters:\n")[1].splitlines() if "\nParameters:\n" in doc else []
        names = {line.split()[0] for line in listed if line.strip()}
        for p in inspect.signature(f).parameters:
            if p not in names:
                missing.append(f"nl.{name}: {p}")
    assert not missing, missing
    assert "other " in inspect.getdoc(nl.load) and "eviction_policy" in inspect.getdoc(nl.load)
