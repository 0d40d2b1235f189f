"""Launch errors on the stand-in CUDA driver (tests/runtime_fake_libcuda.c): CPU tensors play
device 0's tensors and a fake compile() stands in for NVRTC. Each error is a newt.LaunchError
that names the kernel and the user's line that launched it. (Compile-time errors: the catalogue
in tests/test_errors.py.)
"""
import inspect
import re

import pytest
import torch

import newt
import newt.language as nl
from test_runtime_launch import fake_lib_path, gpu  # noqa: F401  (fixtures: the stand-in GPU)


@pytest.fixture
def stand_in(gpu):
    """The stand-in GPU; returns its fake compile()."""
    return gpu[1]


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr = 64):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, nl.load(x_ptr + offs) + nl.load(y_ptr + offs))


X = torch.randn(64)
META = torch.empty(64, device="meta")
LAUNCH_CASES = [
    ("too many arguments", r"takes 5 arguments but 6 were given",
     lambda: add_kernel[(1,)](X, X, X, 64, 64, 7)),
    ("missing argument", r"missing argument\(s\): n",
     lambda: add_kernel[(1,)](X, X, X)),
    ("unknown keyword", r"unexpected keyword argument 'BLK'",
     lambda: add_kernel[(1,)](X, X, X, 64, BLK=64)),
    ("negative grid", r"grid x = -1 is outside",
     lambda: add_kernel[(-1,)](X, X, X, 64)),
    ("negative grid from a callable", r"grid y = -1 is outside",
     lambda: add_kernel[lambda meta: (2, meta["n"] // 128 - 1, 0)](X, X, X, 64)),
    ("grid too large", r"grid x = 2147483648 is outside \[1, 2147483647\]",
     lambda: add_kernel[(2**31,)](X, X, X, 64)),
    ("grid y too large", r"grid y = 65536 is outside \[1, 65535\]",
     lambda: add_kernel[(1, 65536)](X, X, X, 64)),
    ("grid of four dimensions", r"grid must have 1 to 3 dimensions",
     lambda: add_kernel[(1, 1, 1, 1)](X, X, X, 64)),
    ("grid of floats", r"grid x must be an int, got float 2.0",
     lambda: add_kernel[(2.0,)](X, X, X, 64)),
    ("num_warps not a power of two", r"num_warps must be a power of two from 1 to 32, got 3",
     lambda: add_kernel[(1,)](X, X, X, 64, num_warps=3)),
    ("num_warps above 32", r"num_warps must be a power of two from 1 to 32, got 64",
     lambda: add_kernel[(1,)](X, X, X, 64, num_warps=64)),
    ("num_stages out of range", r"num_stages must be an int from 1 to 8, got 0",
     lambda: add_kernel[(1,)](X, X, X, 64, num_stages=0)),
    ("a tensor where a constexpr is needed", r"'BLOCK' is a constexpr and needs a compile-time "
     r"value", lambda: add_kernel[(1,)](X, X, X, 64, BLOCK=X)),
    ("an unhashable constexpr", r"constexpr 'BLOCK' must be hashable, got list",
     lambda: add_kernel[(1,)](X, X, X, 64, BLOCK=[64])),
    ("an argument of another Python type", r"argument 'n' has type str",
     lambda: add_kernel[(1,)](X, X, X, "64")),
    ("an unsupported dtype", r"argument 'x_ptr' has dtype torch.complex64",
     lambda: add_kernel[(1,)](X.to(torch.complex64), X, X, 64)),
    ("an int beyond 64 bits", r"argument 'n' has type int \(int out of 64-bit range\)",
     lambda: add_kernel[(1,)](X, X, X, 2**70)),
]


@pytest.mark.parametrize("what, match, launch", LAUNCH_CASES, ids=[c[0] for c in LAUNCH_CASES])
def test_launch_error(stand_in, what, match, launch):
    add_kernel[(1,)](X, X, X, 64)           # a warm launch function: errors on the fast path too
    with pytest.raises(newt.LaunchError) as info:
        launch()
    msg = str(info.value)
    assert re.search(match, msg), msg
    assert "add_kernel" in msg
    # the user's line: this file, the line of the lambda that launched
    assert f"launched at {__file__}:{launch.__code__.co_firstlineno}: " in msg, msg


def test_tensors_on_two_devices(stand_in):
    """On the stand-in, CPU tensors play device 0; a meta tensor plays another device. (Every
    non-CUDA device keys as -1, so this must be a first launch: on a real GPU such a key never
    launches, so it is never cached.)"""
    @newt.jit
    def two(x_ptr, y_ptr):
        pass
    with pytest.raises(newt.LaunchError) as info:
        two[(1,)](X, META)
    line = inspect.currentframe().f_lineno - 1
    msg = str(info.value)
    assert "kernel two: all tensors must be on one device, got 'x_ptr' on cpu, 'y_ptr' on meta" \
        in msg and f"launched at {__file__}:{line}" in msg


def test_launch_error_on_first_launch(stand_in):
    """The same checks on a kernel's very first launch (before its launch function exists)."""
    @newt.jit
    def first(x_ptr, n):
        pass
    with pytest.raises(newt.LaunchError, match=r"kernel first: grid x = -5 is outside") as info:
        first[(-5,)](X, 4)
    assert f"launched at {__file__}:" in str(info.value)


def test_shared_memory_above_the_device_limit_at_launch(stand_in):
    """A binary asking for more shared memory than the device allows per block (232448 bytes on
    the stand-in H200) is refused when it is loaded, naming the kernel and both numbers."""
    stand_in.shared_bytes = 300 * 1024
    with pytest.raises(newt.LaunchError) as info:
        add_kernel[(1,)](X, X, X, 64, BLOCK=32)
    line = inspect.currentframe().f_lineno - 1
    msg = str(info.value)
    assert "add_kernel" in msg and "307200 bytes of shared memory" in msg and "232448" in msg
    assert f"launched at {__file__}:{line}" in msg


def test_cpu_tensor_without_the_interpreter(monkeypatch):
    """No stand-in driver: a CPU tensor is refused before any driver call, with the way out."""
    monkeypatch.setattr(newt.options.flags, "interpret", False)

    @newt.jit   # a kernel of its own: add_kernel's memory cache holds stand-in launches
    def k(x_ptr, y_ptr, n):
        pass
    with pytest.raises(newt.LaunchError) as info:
        k[(1,)](X, X, 64)
    line = inspect.currentframe().f_lineno - 1
    msg = str(info.value)
    assert "argument 'x_ptr' is a tensor on cpu" in msg and "NEWT_INTERPRET=1" in msg
    assert f"launched at {__file__}:{line}" in msg
