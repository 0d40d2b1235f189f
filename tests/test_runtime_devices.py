"""Two devices on the stand-in driver (runtime_fake_libcuda.c): the per-device state that only a
second GPU exercises, checked without one. The fake driver gives each device its own primary
context (0x1000 + index), records which context each module was loaded into, and refuses a
launch whose function belongs to another context than the current one, as the CUDA driver does;
objects with data_ptr() and a `device` (tests/test_inputs.py's Pointer) stand for tensors on
cuda:0 and cuda:1. The same cases on two real GPUs: tests/test_multi_gpu.py."""
import contextlib
import ctypes
import inspect

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver

from runtime_fakes import fake_state
from test_inputs import Pointer
from test_runtime_launch import fake_lib_path, gpu  # noqa: F401  (fixtures)


def _set(cu, name, value):
    ctypes.c_int.in_dll(cu, name).value = value


def _current(cu) -> int:
    ctx = ctypes.c_void_p()
    cu.cuCtxGetCurrent(ctypes.byref(ctx))
    return ctx.value or 0


def _ctx(cu, name) -> int:
    return ctypes.c_void_p.in_dll(cu, name).value or 0


@pytest.fixture
def two(gpu):
    """The stand-in GPU with two devices, device 0's context current (torch's current device)."""
    cu, fc = gpu
    _set(cu, "fake_device_count", 2)
    _set(cu, "fake_check_context", 1)
    cu.cuCtxSetCurrent(0x1000)
    yield cu, fc
    _set(cu, "fake_device_count", 1)
    _set(cu, "fake_check_context", 0)
    _set(cu, "fake_distinct_names", 0)
    cu.cuCtxSetCurrent(None)


def make_add():
    """A new kernel object per test: its launchers hold the Devices of one stand-in driver."""
    @newt.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr):
        offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
        mask = offs < n
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask)
                 + nl.load(y_ptr + offs, mask=mask), mask=mask)
    return add


def _on(t, d):
    return Pointer(t, f"cuda:{d}")


@pytest.mark.parametrize("device_current", [False, True])
def test_interleaved_launches_use_each_devices_module_stream_and_context(two, device_current):
    """One kernel on cuda:0 and cuda:1 in turn: a module per device, loaded into that device's
    context; each launch on its device's stream and in its context; the caller's current
    context (torch's current device) unchanged afterwards, whether or not the caller made the
    tensors' device current first (`with torch.cuda.device(i)`)."""
    cu, fc = two
    add = make_add()
    bufs = [torch.randn(300) for _ in range(2)]
    loaded = fake_state(cu).modules
    for i in range(6):
        d = i % 2
        caller = 0x1000 + d if device_current else 0x1000
        cu.cuCtxSetCurrent(caller)
        t = bufs[d]
        # n: never a multiple of 16, so one key per device
        add[(3,)](_on(t, d), _on(t, d), _on(t, d), 289 + i, BLOCK=128)
        st = fake_state(cu)
        assert st.stream == 0x5000 + d and _ctx(cu, "fake_last_ctx") == 0x1000 + d
        assert st.params[0] == t.data_ptr() and st.params[3] & 0xFFFFFFFF == 289 + i
        assert _current(cu) == caller
    assert fake_state(cu).modules == loaded + 2          # one module per device, loaded once
    assert sorted(L.device_index for L in add.cache.values()) == [0, 1]
    assert len(fc.calls) == 1                            # one arch: one compile serves both


def test_first_launch_on_another_device_sets_up_its_function_in_that_context(two):
    """The module load and the function's attributes (registers read, shared memory above 48 KB
    opted in) happen in the tensors' device's context, not the caller's."""
    cu, fc = two
    fc.shared_bytes = 100 * 1024
    add = make_add()
    t = torch.randn(64)
    add[(1,)](_on(t, 1), _on(t, 1), _on(t, 1), 64, BLOCK=64)
    assert fake_state(cu).dyn_shared_set == 100 * 1024 and fake_state(cu).shared == 100 * 1024
    assert _ctx(cu, "fake_last_ctx") == 0x1001 and _current(cu) == 0x1000


def test_arguments_on_two_devices_name_the_arguments_and_the_line(two):
    cu, fc = two
    add = make_add()
    t = torch.randn(64)
    before = fake_state(cu).launches
    with pytest.raises(newt.LaunchError) as info:
        add[(1,)](_on(t, 0), _on(t, 1), _on(t, 0), 64, BLOCK=64)
    line = inspect.currentframe().f_lineno - 1
    msg = str(info.value)
    assert "all tensors must be on one device, got 'x_ptr' on cuda:0, 'y_ptr' on cuda:1" in msg
    assert f"launched at {__file__}:{line}" in msg
    assert fake_state(cu).launches == before            # nothing launched


def test_synchronize_of_another_device_leaves_the_current_one(two):
    """newt.runtime.synchronize(1) waits in device 1's context and leaves the caller's current
    (making it current would move torch's current device to 1 behind the caller's back)."""
    cu, _ = two
    newt.runtime.synchronize(1)
    assert _ctx(cu, "fake_sync_ctx") == 0x1001 and _current(cu) == 0x1000
    newt.runtime.synchronize(0)
    assert _ctx(cu, "fake_sync_ctx") == 0x1000 and _current(cu) == 0x1000
    newt.runtime.synchronize()
    assert _ctx(cu, "fake_sync_ctx") == 0x1000


def _recording_scope(monkeypatch):
    """driver.device_scope replaced by one that records the device and, as torch.cuda.device
    does, makes its context current for the block."""
    scopes = []

    @contextlib.contextmanager
    def scope(index):
        scopes.append(index)
        prev = _current(driver.lib())
        driver.Device.get(index).make_current()
        try:
            yield
        finally:
            driver.lib().cuCtxSetCurrent(prev)
    monkeypatch.setattr(driver, "device_scope", scope)
    return scopes


def _tuned(cu, log):
    def bench(fn, warmup=25, rep=100):
        fn()     # times what it launches on the current device's stream: it must be theirs
        log.append((fake_state(cu).block[0], _current(cu), _ctx(cu, "fake_last_ctx")))
        return {64: 2.0, 128: 1.0}[fake_state(cu).block[0]]

    @newt.autotune([newt.Config({"BLOCK": 64}, num_warps=2),
                    newt.Config({"BLOCK": 128}, num_warps=4)], key=["n"], do_bench=bench,
                   compile_workers=0)
    @newt.jit
    def k(x_ptr, n, BLOCK: nl.constexpr):
        pass
    return k


def test_autotune_times_on_the_arguments_device(two, monkeypatch):
    """Tensors on cuda:1 with cuda:0 current: the configs are timed with cuda:1 current, where
    their launches run; cuda:0 stays current for the caller."""
    cu, _ = two
    scopes = _recording_scope(monkeypatch)
    log = []
    k = _tuned(cu, log)
    t = torch.randn(8)
    k[(1,)](_on(t, 1), 8)
    assert scopes == [1] and [b for b, _, _ in log] == [64, 128]
    assert all(cur == 0x1001 and ran == 0x1001 for _, cur, ran in log), log
    assert k.best_config.kwargs == {"BLOCK": 128} and _current(cu) == 0x1000
    assert list(k.cache) == [(8, "Fake GPU")]


@pytest.mark.parametrize("kinds", ["one kind", "two kinds"])
def test_autotune_winner_is_shared_by_gpus_of_one_kind_only(two, monkeypatch, kinds):
    cu, _ = two
    _set(cu, "fake_distinct_names", kinds == "two kinds")
    _recording_scope(monkeypatch)
    log = []
    k = _tuned(cu, log)
    t = torch.randn(8)
    k[(1,)](_on(t, 0), 8)
    k[(1,)](_on(t, 1), 8)
    k[(1,)](_on(t, 0), 8)
    if kinds == "one kind":
        assert len(log) == 2 and list(k.cache) == [(8, "Fake GPU")]
    else:
        assert len(log) == 4 and list(k.cache) == [(8, "Fake GPU 0"), (8, "Fake GPU 1")]
        assert {ran for _, _, ran in log[2:]} == {0x1001}
