"""Kernel arguments that stand for a tensor (newt/tensor_like.py): objects with data_ptr() and a
torch dtype, DLPack-capable objects (NumPy arrays here), and the errors naming the argument on
the compiled path and on the interpreter."""
import numpy as np
import pytest
import torch

import newt
import newt.language as nl
from newt.arg_kinds import classify as _classify
from newt.runtime import specialize

HAS_CUDA = torch.cuda.is_available()


@newt.jit
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) * alpha
             + nl.load(y_ptr + offs, mask=mask), mask=mask)


class Pointer:
    """What Triton also launches: data_ptr() and a torch dtype, nothing else of a tensor."""

    def __init__(self, t, device=None):
        self._t, self.dtype = t, t.dtype
        if device is not None:
            self.device = device

    def data_ptr(self):
        return self._t.data_ptr()


class DLPackOnly:
    """An array from another library: only the DLPack protocol."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kwargs):
        return self._t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@pytest.fixture
def interp(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", False)


def test_numpy_arrays_run_on_the_interpreter(interp):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(53).astype(np.float32)
    y = rng.standard_normal(53).astype(np.float32)
    out = np.full(53, np.nan, dtype=np.float32)
    axpy[(newt.cdiv(53, 16),)](x, y, out, 53, 0.75, BLOCK=16)   # out written through DLPack
    torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(x) * 0.75
                               + torch.from_numpy(y))


def test_dlpack_object_runs_on_the_interpreter(interp):
    x, y = torch.randn(29), torch.randn(29)
    out = torch.full((29,), float("nan"))
    axpy[(1,)](DLPackOnly(x), y, DLPackOnly(out), 29, -2.0, BLOCK=32)
    torch.testing.assert_close(out, x * -2.0 + y)


@pytest.mark.parametrize("bad, words", [
    # on the CPU (a pointer object without a device is taken as a CUDA pointer, as Triton does)
    (Pointer(torch.randn(4), torch.device("cpu")),
     r"argument `y_ptr` is a Pointer \(data_ptr\(\) and dtype"),
    ("not a tensor", r"argument [`']y_ptr[`'] has type str"),
    ([1.0, 2.0], r"argument [`']y_ptr[`'] has type list"),
])
def test_interpreter_errors_name_the_argument(interp, bad, words):
    x = torch.randn(4)
    with pytest.raises(newt.LaunchError, match=words):
        axpy[(1,)](x, bad, x, 4, 1.0, BLOCK=4)


def _specialize(**arguments):
    full = dict(x_ptr=None, y_ptr=None, out_ptr=None, n=7, alpha=1.0, BLOCK=16)
    full.update(arguments)
    return specialize.specialize(axpy, full)


def test_pointer_object_specializes_like_a_tensor(compiled):
    t = torch.randn(64)
    cuda1 = torch.device("cuda", 1)
    sig, _, spec, dev = _specialize(x_ptr=Pointer(t, cuda1), y_ptr=Pointer(t.half(), cuda1),
                                    out_ptr=Pointer(t, "cuda:1"))
    assert (sig["x_ptr"], sig["y_ptr"], sig["out_ptr"], dev) == ("*fp32", "*fp16", "*fp32", 1)
    assert spec["x_ptr"]["divisible_by_16"] == (t.data_ptr() % 16 == 0)
    key, ptr = _classify(Pointer(t, cuda1), False)
    assert ptr == t.data_ptr() and key[:2] == (torch.float32, 1)


def test_compiled_path_errors_name_the_argument(compiled):
    t = torch.randn(8)
    with pytest.raises(newt.LaunchError, match="argument 'y_ptr' is a Pointer on cpu"):
        _specialize(x_ptr=Pointer(t, "cuda:0"), y_ptr=Pointer(t, "cpu"), out_ptr=Pointer(t, 0))
    with pytest.raises(newt.LaunchError, match="argument 'x_ptr' is a ndarray on cpu"):
        _specialize(x_ptr=np.zeros(8, np.float32), y_ptr=Pointer(t, 0), out_ptr=Pointer(t, 0))
    with pytest.raises(newt.LaunchError, match="one device, got 'x_ptr' on cuda:0, 'y_ptr' on "
                                               "cuda:1"):
        _specialize(x_ptr=Pointer(t, "cuda:0"), y_ptr=Pointer(t, "cuda:1"), out_ptr=Pointer(t, 0))
    with pytest.raises(newt.LaunchError, match="argument 'alpha' has type str"):
        _specialize(x_ptr=Pointer(t, 0), y_ptr=Pointer(t, 0), out_ptr=Pointer(t, 0), alpha="a")


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_pointer_and_dlpack_objects_launch_on_the_gpu(compiled):
    x = torch.randn(1001, device="cuda")
    y = torch.randn(1001, device="cuda")
    out = torch.full_like(x, float("nan"))
    axpy[(newt.cdiv(1001, 128),)](Pointer(x), DLPackOnly(y), Pointer(out, x.device), 1001, 1.5,
                                  BLOCK=128)
    torch.testing.assert_close(out, x * 1.5 + y)
    out2 = torch.full_like(x, float("nan"))
    axpy[(newt.cdiv(1001, 128),)](x, y, DLPackOnly(out2), 1001, 1.5, BLOCK=128)
    torch.testing.assert_close(out2, x * 1.5 + y)
