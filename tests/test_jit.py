"""@newt.jit front door on a machine without a GPU: launch-time errors, the specialization key,
interpreter dispatch, and lazy imports."""
import subprocess
import sys

import pytest
import torch

import newt
import newt.language as nl
from newt.arg_kinds import classify as _classify


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr = 64):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) + nl.load(y_ptr + offs, mask=mask),
             mask=mask)


@pytest.fixture
def no_interp(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", False)


def test_cpu_tensor_names_newt_interpret(no_interp):
    x = torch.randn(10)
    with pytest.raises(newt.LaunchError, match="NEWT_INTERPRET=1"):
        add_kernel[(1,)](x, x, x, 10)


def test_argument_errors_name_the_parameters(no_interp):
    x = torch.randn(10)
    with pytest.raises(newt.LaunchError, match=r"add_kernel\(x_ptr, y_ptr, out_ptr, n, BLOCK\)"):
        add_kernel[(1,)](x, x, 10)
    with pytest.raises(newt.LaunchError, match="takes 5 arguments but 6"):
        add_kernel[(1,)](x, x, x, 10, 64, 7)
    with pytest.raises(newt.LaunchError, match="unexpected keyword argument 'block'"):
        add_kernel[(1,)](x, x, x, 10, block=64)


def test_direct_call_is_an_error():
    with pytest.raises(RuntimeError, match=r"add_kernel\[grid\]"):
        add_kernel(1, 2, 3, 4)


def test_interpreter_dispatch(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    x, y = torch.randn(100), torch.randn(100)
    out = torch.full((100,), float("nan"))
    add_kernel[lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)](x, y, out, 100, BLOCK=32)
    torch.testing.assert_close(out, x + y)
    out.fill_(float("nan"))
    add_kernel.run(x, y, out, 100, grid=(2,))          # BLOCK from the signature's default
    torch.testing.assert_close(out, x + y)


def test_classify_scalars():
    assert _classify(True, False) == (("i1",), True)
    assert _classify(7, False) == (("i32", False, False), 7)
    assert _classify(1, False) == (("i32", True, False), 1)
    assert _classify(32, False) == (("i32", False, True), 32)
    assert _classify(0, False) == (("i32", False, False), 0)   # 0: no TMA-able zero stride
    assert _classify(2**31, False)[0][0] == "i64"
    assert _classify(-2**31, False)[0][0] == "i32"
    assert _classify(2**63, False)[0][0] == "u64"
    assert _classify(2**64, False)[0][0] == "bad"
    assert _classify(1, True) == (("i32",), 1)
    assert _classify(0.5, False) == (("fp32",), 0.5)
    assert _classify(nl.constexpr(3), False) == (("i32", False, False), 3)
    assert _classify("s", False)[0] == ("bad", "str")


def test_key_distinguishes_what_compiles_differently():
    b = add_kernel.binder()
    x = torch.randn(64)
    k = lambda *a, **kw: b(*a, **kw)[0]   # noqa: E731
    base = k(x, x, x, 64)
    assert base == k(x, x, x, 4096)                    # both divisible by 16
    assert base != k(x, x, x, 63)
    assert base != k(x, x, x, 1)                       # equal to 1
    assert k(x, x, x, 63) == k(x, x, x, 65)
    assert base != k(x, x, x, 0) == k(x, x, x, 63)    # 0 is not "divisible by 16"
    assert base != k(x[1:], x, x, 64)                  # 16-byte alignment
    assert base != k(x.half(), x, x, 64)               # dtype
    assert base != k(x, x, x, 64, BLOCK=128)           # constexpr
    assert k(x, x, x, 64, BLOCK=128) == k(x, x, x, 64, BLOCK=nl.constexpr(128))
    assert base != k(x, x, x, 64, num_warps=8)
    assert base != k(x, x, x, 2**40)                   # int64
    assert base != k(x, x, x, 64.0)                    # float
    assert base != k(x, x, x, True)                    # bool
    assert k(x, x, x, 2**40) != k(x, x, x, 2**40 + 1)  # i64 divisibility
    _, vals = b(x, x, x, 64)
    assert vals == (x.data_ptr(), x.data_ptr(), x.data_ptr(), 64)


def test_key_building_is_cheap():
    """Not a timing assertion: records the cost of the per-call key for the report."""
    import time
    b = add_kernel.binder()
    x = torch.randn(64)
    n = 20000
    t = time.perf_counter()
    for _ in range(n):
        b(x, x, x, 64, BLOCK=64)
    per_call = (time.perf_counter() - t) / n * 1e6
    print(f"key + values for 4 runtime args: {per_call:.2f} us")


def test_do_not_specialize_by_index():
    @newt.jit(do_not_specialize=[1])
    def k(p, n):
        pass
    assert k.do_not_specialize == {"n"}


def test_warm_import_is_light():
    code = ("import sys, newt; heavy = [m for m in sys.modules if m.startswith(("
            "'newt.frontend', 'newt.codegen', 'newt.passes', 'newt.compiler', 'newt.interpreter'))];"
            " print(heavy); assert callable(newt.compile); print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "[]" and r.stdout.splitlines()[1] == "ok"


def test_exports():
    for name in ("jit", "autotune", "heuristics", "Config", "CompilationError", "NVRTCError",
                 "DriverError", "LaunchError", "cdiv", "next_power_of_2", "constexpr"):
        assert hasattr(newt, name), name
    assert newt.cdiv(10, 3) == 4 and newt.next_power_of_2(33) == 64
    import importlib
    assert newt.compile is importlib.import_module("newt.compiler").compile
