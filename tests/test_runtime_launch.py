"""The launch path end to end on a machine without a GPU: a stand-in CUDA driver records what
cuLaunchKernel receives, a fake compile() stands in for the compiler, CPU tensors stand in for
CUDA tensors. Checks argument packing, specialization, caching, grids and launch errors."""
import ctypes
import functools
import struct

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver, launch, specialize

from runtime_fakes import FakeCompile, build_fake_libcuda, fake_state, install_fake_gpu


@pytest.fixture(scope="session")
def fake_lib_path(tmp_path_factory):
    return build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))


_install = install_fake_gpu


@pytest.fixture
def gpu(fake_lib_path, monkeypatch, tmp_cache):
    """A stand-in GPU and a fake compile(): returns (cu, fake_compile)."""
    import newt.compiler
    cu = driver.load_library(fake_lib_path)
    _install(cu, monkeypatch)
    fc = FakeCompile()
    monkeypatch.setattr(newt.compiler, "compile", fc)
    return cu, fc


@pytest.fixture
def gpu_real_compiler(fake_lib_path, monkeypatch, tmp_cache):
    """A stand-in GPU with the real compiler behind it."""
    cu = driver.load_library(fake_lib_path)
    _install(cu, monkeypatch)
    return cu


def make_add():
    @newt.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: nl.constexpr = 128):
        pid = nl.program_id(0)
        offs = pid * BLOCK + nl.arange(0, BLOCK)
        mask = offs < n
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) + nl.load(y_ptr + offs, mask=mask),
                 mask=mask)
    return add_kernel


def test_arguments_packed_in_order(gpu):
    cu, fc = gpu
    add = make_add()
    x, y, out = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    add[(newt.cdiv(1000, 256),)](x, y, out, 1000, BLOCK=256, num_warps=8)
    st = fake_state(cu)
    assert st.launches >= 1
    assert st.params[:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]
    assert st.params[3] & 0xFFFFFFFF == 1000
    assert st.grid == (4, 1, 1) and st.block == (256, 1, 1) and st.stream == 0x5000
    call = fc.calls[-1]
    assert call["signature"] == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    assert call["constexprs"] == {"BLOCK": 256} and call["num_warps"] == 8
    assert call["arch"] == "sm_90a"
    assert call["specialization"]["x_ptr"]["divisible_by_16"] is True
    assert call["specialization"]["n"] == dict(divisible_by_16=False, equal_to_1=False, large=False)


def test_scalar_types_and_equal_to_one(gpu):
    cu, fc = gpu

    @newt.jit
    def scal(p, a, b, c, d):
        pass
    t = torch.empty(4)
    scal[(1,)](t, 1, 2.5, 2**40 + 3, True)
    st = fake_state(cu)
    sig = fc.calls[-1]["signature"]
    assert sig == {"p": "*fp32", "a": "i32", "b": "fp32", "c": "i64", "d": "i1"}
    assert fc.calls[-1]["specialization"]["a"]["equal_to_1"] is True
    # `a` == 1 is compiled in, not passed: the slots are p, b, c, d
    assert st.params[0] == t.data_ptr()
    assert struct.unpack("<f", struct.pack("<I", st.params[1] & 0xFFFFFFFF))[0] == 2.5
    assert st.params[2] == 2**40 + 3
    assert st.params[3] & 0xFF == 1
    scal[(1,)](t, -7, 1.0, -5, False)   # a != 1, c fits int32 now: new specialization
    st = fake_state(cu)
    assert fc.calls[-1]["signature"]["c"] == "i32"
    assert st.params[1] & 0xFFFFFFFF == (-7) & 0xFFFFFFFF
    assert st.params[3] & 0xFFFFFFFF == (-5) & 0xFFFFFFFF


def test_specialization_cache(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(64)
    add[(1,)](x, x, x, 64)
    add[(1,)](x, x, x, 64)
    assert len(fc.calls) == 1
    add[(1,)](x, x, x, 48)                       # still divisible by 16: same key
    assert len(fc.calls) == 1
    add[(1,)](x, x, x, 63)                       # n % 16 != 0
    add[(1,)](x[1:], x, x, 63)                   # misaligned pointer
    add[(1,)](x.double(), x, x, 63)              # dtype
    add[(1,)](x, x, x, 63, num_warps=2)          # num_warps
    add[(1,)](x, x, x, 63, BLOCK=64)             # constexpr
    assert len(fc.calls) == 6
    assert fc.calls[2]["specialization"]["x_ptr"]["divisible_by_16"] is False
    assert fc.calls[3]["signature"]["x_ptr"] == "*fp64"
    # a new process (here: a new JITFunction of the same source) finds them on disk
    add2 = make_add()
    add2[(1,)](x, x, x, 63, BLOCK=64)
    assert len(fc.calls) == 6


def test_do_not_specialize(gpu):
    cu, fc = gpu

    @newt.jit(do_not_specialize=["n"])
    def k(p, n):
        pass
    t = torch.empty(4)
    k[(1,)](t, 1)
    k[(1,)](t, 32)
    k[(1,)](t, 7)
    assert len(fc.calls) == 1
    assert fc.calls[0]["specialization"]["n"]["equal_to_1"] is False
    assert fake_state(cu).params[1] & 0xFFFFFFFF == 7


def test_callable_grid_sees_meta(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(1000)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (newt.cdiv(meta["n"], meta["BLOCK"]),)
    add[grid](x, x, x, 1000, BLOCK=64, num_warps=2)
    assert fake_state(cu).grid == (16, 1, 1)
    assert seen["BLOCK"] == 64 and seen["num_warps"] == 2 and seen["num_stages"] == 3
    assert seen["x_ptr"] is x


def test_grid_checks(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    before = fake_state(cu).launches
    for empty in [(4, 0), lambda meta: (0,), (0,), 0, (2, 3, 0), [0, 1]]:   # as Triton: nothing
        assert add[empty](x, x, x, 16) is not None                  # returns the handle
    assert fake_state(cu).launches == before
    with pytest.raises(newt.LaunchError, match="grid y = 70000"):
        add[(0, 70000)](x, x, x, 16)            # a zero does not hide another error
    with pytest.raises(newt.LaunchError, match="grid x = -1"):
        add[(-1,)](x, x, x, 16)
    with pytest.raises(newt.LaunchError, match="grid y = 70000"):
        add[(1, 70000)](x, x, x, 16)
    with pytest.raises(newt.LaunchError, match="1 to 3 dimensions"):
        add[(1, 1, 1, 1)](x, x, x, 16)
    add[(2, 3, 4)](x, x, x, 16)
    assert fake_state(cu).grid == (2, 3, 4)


def test_launch_errors(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    with pytest.raises(newt.LaunchError, match="num_warps must be a power of two"):
        add[(1,)](x, x, x, 16, num_warps=3)
    with pytest.raises(newt.LaunchError, match="num_warps"):
        add[(1,)](x, x, x, 16, num_warps=64)
    with pytest.raises(newt.LaunchError, match=r"add_kernel\(x_ptr, y_ptr, out_ptr, n, BLOCK\)"):
        add[(1,)](x, x, 16)
    with pytest.raises(newt.LaunchError, match="unexpected keyword argument 'BLK'"):
        add[(1,)](x, x, x, 16, BLK=4)
    with pytest.raises(newt.LaunchError, match="'BLOCK' is a constexpr"):
        add[(1,)](x, x, x, 16, BLOCK=x)
    with pytest.raises(newt.LaunchError, match="type str"):
        add[(1,)](x, x, x, "16")
    with pytest.raises(newt.LaunchError, match="complex64"):
        add[(1,)](x.to(torch.complex64), x, x, 16)


def test_driver_error_names_kernel_and_result(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    add[(1,)](x, x, x, 16)
    ctypes.c_int.in_dll(cu, "fake_launch_result").value = 1
    with pytest.raises(newt.DriverError, match="CUDA_ERROR_INVALID_VALUE") as ei:
        add[(1,)](x, x, x, 16)
    assert "add_kernel" in str(ei.value)
    ctypes.c_int.in_dll(cu, "fake_launch_result").value = 0
    ctypes.c_int.in_dll(cu, "fake_sync_result").value = 710
    with pytest.raises(newt.DriverError) as ei:
        newt.runtime.synchronize()
    msg = str(ei.value)
    assert "CUDA_ERROR_ASSERT" in msg and "add_kernel" in msg
    assert "NEWT_DEBUG" in msg and "compute-sanitizer" in msg


def test_dynamic_shared_memory_opt_in(gpu):
    cu, fc = gpu
    fc.shared_bytes = 100 * 1024
    add = make_add()
    x = torch.randn(16)
    add[(1,)](x, x, x, 16)
    st = fake_state(cu)
    assert st.shared == 100 * 1024 and st.dyn_shared_set == 100 * 1024
    fc.shared_bytes = 300 * 1024
    with pytest.raises(newt.LaunchError, match="shared memory"):
        add[(1,)](x, x, x, 17)


def test_device_facts(gpu):
    d = driver.Device.get(0)
    assert d.arch == "sm_90a" and d.sm_count == 132 and d.max_shared == 232448
    assert driver.arch_of(8, 0) == "sm_80" and driver.arch_of(8, 9) == "sm_89"
    tm = driver.encode_tensor_map_tiled(0, 2, 0x1000, [64, 64], [128], [32, 32])
    assert tm.opaque[0] == 0xABABABABABABABAB


def test_real_compiler_through_the_launch_path(gpu_real_compiler):
    """The compiler's CompiledKernel (params with .index, equal-to-1 params dropped) drives the
    launcher: the cubin reaches cuModuleLoadData and the slots hold the right values."""
    cu = gpu_real_compiler
    add = make_add()
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    add[(3,)](x, y, out, 300, BLOCK=128)
    st = fake_state(cu)
    assert st.params[:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]
    assert st.params[3] & 0xFFFFFFFF == 300 and st.block == (128, 1, 1)
    launcher = next(iter(add.cache.values()))
    assert launcher.binary.cubin[:4] == b"\x7fELF" and launcher.name.startswith("add_kernel")


def test_grid_of_numpy_and_torch_ints(gpu):
    import numpy as np
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    add[(np.int64(3), torch.tensor(2).item())](x, x, x, 16)
    assert fake_state(cu).grid == (3, 2, 1)
    add[(np.int32(5),)](x, x, x, 16)
    assert fake_state(cu).grid == (5, 1, 1)
    with pytest.raises(newt.LaunchError, match="grid x must be an int"):
        add[(2.5,)](x, x, x, 16)


def test_launch_without_current_context_binds_the_device(gpu):
    """A launch refused for want of a context (a fresh thread) is retried in the device's primary
    context."""
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    add[(1,)](x, x, x, 16)
    before = fake_state(cu).launches
    ctypes.c_int.in_dll(cu, "fake_launch_result").value = 201     # CUDA_ERROR_INVALID_CONTEXT

    real = driver.run_in_context

    def clear_then_run(index, fn):
        ctypes.c_int.in_dll(cu, "fake_launch_result").value = 0
        return real(index, fn)
    driver.run_in_context = clear_then_run
    try:
        add[(2,)](x, x, x, 16)
    finally:
        driver.run_in_context = real
    assert fake_state(cu).launches == before + 1 and fake_state(cu).grid == (2, 1, 1)


def test_warmup_compiles_without_launching(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    before = fake_state(cu).launches
    L = add.warmup(x, x, x, 16, BLOCK=32, num_warps=2)
    assert fake_state(cu).launches == before and len(fc.calls) == 1
    assert L.binary.meta["num_warps"] == 2 and L.block == 64
    add[(1,)](x, x, x, 16, BLOCK=32, num_warps=2)      # same key: no second compile
    assert len(fc.calls) == 1 and fake_state(cu).launches == before + 1


def test_kernel_without_runtime_parameters(gpu):
    cu, fc = gpu

    @newt.jit
    def only_constexpr(N: nl.constexpr):
        pass
    only_constexpr[(3,)](N=4)
    only_constexpr[(3,)](5)
    assert len(fc.calls) == 2 and fake_state(cu).grid == (3, 1, 1)
    assert fc.calls[0]["signature"] == {} and fc.calls[1]["constexprs"] == {"N": 5}


def test_launch_config_layout_matches_cuda_h(tmp_path):
    """The launcher packs CUlaunchConfig by hand: check the offsets against the real header."""
    import os
    import shutil
    import subprocess
    inc = next((d for d in ("/usr/local/cuda/include", os.path.join(
        os.environ.get("CUDA_HOME", "/nonexistent"), "include")) if os.path.exists(
        os.path.join(d, "cuda.h"))), None)
    cc = shutil.which("cc") or shutil.which("gcc")
    if inc is None or cc is None:
        pytest.skip("no cuda.h or C compiler")
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include <cuda.h>\nint main(void) {\n'
                   'printf("%zu %zu %zu %zu %zu %zu\\n", offsetof(CUlaunchConfig, gridDimX), '
                   'offsetof(CUlaunchConfig, sharedMemBytes), offsetof(CUlaunchConfig, hStream), '
                   'offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs), '
                   'sizeof(CUlaunchConfig));\nreturn 0;\n}\n')
    exe = tmp_path / "layout"
    subprocess.run([cc, f"-I{inc}", "-o", str(exe), str(src)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    fmt = driver.LAUNCH_CONFIG_FORMAT
    offs = [struct.calcsize(fmt[:i]) for i in (1, 7, 10, 11, 12)]
    assert got == [0, 24, 32, 40, 48, 56]
    assert offs == [0, 24, 32, 40, 48] and struct.calcsize(fmt) == driver.LAUNCH_CONFIG_BYTES


def make_bias_add():
    @newt.jit
    def bias_add(x_ptr, b_ptr, out_ptr, n, BLOCK: nl.constexpr):
        offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
        mask = offs < n
        x = nl.load(x_ptr + offs, mask=mask)
        if b_ptr is not None:
            x += nl.load(b_ptr + offs, mask=mask)
        nl.store(out_ptr + offs, x, mask=mask)
    return bias_add


def test_none_argument_is_a_constexpr_none_in_the_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    k = make_bias_add()
    x, b = torch.randn(301), torch.randn(301)
    for bias, want in ((None, x), (b, x + b)):
        out = torch.full_like(x, float("nan"))
        k[(3,)](x, bias, out, 301, BLOCK=128)
        torch.testing.assert_close(out, want)


def test_none_argument_is_a_constexpr_none_when_compiled(gpu_real_compiler):
    """None for a parameter not annotated constexpr compiles as the constexpr None (Triton's
    rule, and the interpreter's): the branch on it is pruned and nothing is passed for it."""
    cu = gpu_real_compiler
    k = make_bias_add()
    x, b, out = torch.randn(300), torch.randn(300), torch.empty(300)
    k[(3,)](x, None, out, 300, BLOCK=128)
    st = fake_state(cu)
    (L_none,) = k.cache.values()
    assert [p["name"] for p in L_none.binary.meta["params"]] == ["x_ptr", "out_ptr", "n"]
    assert st.params[:3] == [x.data_ptr(), out.data_ptr(), 300]
    k[(3,)](x, b, out, 300, BLOCK=128)            # a tensor now: another specialization
    st = fake_state(cu)
    assert len(k.cache) == 2
    assert st.params[:4] == [x.data_ptr(), b.data_ptr(), out.data_ptr(), 300]
    k[(3,)](x, None, out, 300, BLOCK=128)         # and back, on the fast path
    assert fake_state(cu).params[:3] == [x.data_ptr(), out.data_ptr(), 300]
    assert len(k.cache) == 2


def test_constexpr_keys_keep_their_types(gpu):
    """True, 1 and 1.0 are equal in Python but compile differently: three specializations."""
    cu, fc = gpu

    @newt.jit
    def k(p, C: nl.constexpr):
        pass
    t = torch.empty(4)
    for c in (1, True, 1.0, 1, nl.constexpr(1), True):
        k[(1,)](t, c)
    assert [call["constexprs"]["C"] for call in fc.calls] == [1, True, 1.0]
    assert [type(call["constexprs"]["C"]) for call in fc.calls] == [int, bool, float]


def test_alternating_specializations_and_grids(gpu):
    """The launch function remembers the last key and the last grid: switching between two
    specializations and grids on every call must still launch the right one each time."""
    cu, fc = gpu
    add = make_add()
    x32, x64 = torch.randn(64), torch.randn(64).double()
    g1, g2 = (3,), (2, 5)
    for i in range(6):
        x, g = (x32, g1) if i % 2 else (x64, g2)
        add[g](x, x, x, 64 - i)
        st = fake_state(cu)
        assert st.grid == (g + (1, 1))[:3] and st.params[:3] == [x.data_ptr()] * 3
        assert st.params[3] & 0xFFFFFFFF == 64 - i
    assert {c["signature"]["x_ptr"] for c in fc.calls} == {"*fp32", "*fp64"}
    grids = [[4], lambda meta: [meta["n"] // 16], 7]    # list, callable returning a list, int
    for g, want in zip(grids, [(4, 1, 1), (4, 1, 1), (7, 1, 1)]):
        add[g](x32, x32, x32, 64)
        assert fake_state(cu).grid == want


def test_one_dimensional_grid_binds_its_int(gpu):
    """k[(n,)] binds n itself (the launch function checks an int first): a reused grid, a new
    tuple per call, a bare int and bad values launch or fail exactly as the tuple does."""
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    g = (5,)
    for _ in range(2):
        add[g](x, x, x, 16)
        assert fake_state(cu).grid == (5, 1, 1)
    for n in (1, 3, 2**31 - 1):
        add[(n,)](x, x, x, 16)
        assert fake_state(cu).grid == (n, 1, 1)
    add[6](x, x, x, 16)
    assert fake_state(cu).grid == (6, 1, 1)
    before = fake_state(cu).launches
    for bad, msg in [((-3,), "grid x = -3 is outside"), ((2**31,), "grid x = 2147483648 is outside"),
                     ((True,), None), ((1.0,), "grid x must be an int, got float")]:
        if msg is None:     # a bool is an int to operator.index, as before
            add[bad](x, x, x, 16)
            assert fake_state(cu).grid == (1, 1, 1)
            before += 1
            continue
        for _ in range(2):  # the second time from __getitem__'s cache
            with pytest.raises(newt.LaunchError, match=msg):
                add[bad](x, x, x, 16)
    assert fake_state(cu).launches == before


def test_launch_errors_name_the_launching_line(gpu):
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    import inspect
    with pytest.raises(newt.LaunchError) as ei:
        add[(-1,)](x, x, x, 16)
    line = inspect.currentframe().f_lineno - 1
    assert f"launched at {__file__}:{line}: add[(-1,)](x, x, x, 16)" in str(ei.value)
    with pytest.raises(newt.LaunchError) as ei:
        add[(1,)](x, x, x, 16, num_warps=3)
    line = inspect.currentframe().f_lineno - 1
    assert f"{__file__}:{line}" in str(ei.value) and "num_warps" in str(ei.value)


def test_tensors_of_2_31_elements_are_large(gpu):
    """`large` (64-bit offsets) means 2**31 elements or more, whatever their bytes: a stride-0
    view of one float counts, a 2 GiB tensor of fewer elements does not (the launch function
    asks nbytes before numel)."""
    cu, fc = gpu
    add = make_add()
    x = torch.randn(16)
    big = torch.zeros(1).expand(2**31)                          # 4 bytes of storage
    under = torch.zeros(1).expand(2**31 - 1)                    # 8 GiB by nbytes, not large
    wide = torch.zeros(1, dtype=torch.float64).expand(2**28)    # 2 GiB, 2**28 elements
    b = add.binder()
    assert b(big, x, x, 16)[0] != b(under, x, x, 16)[0] == b(x, x, x, 16)[0]
    for t, compiles, large in [(x, 1, False), (big, 2, True), (under, 2, False),
                               (wide, 3, False), (big, 3, True), (x, 3, False)]:
        add[(1,)](t, x, x, 16)
        assert len(fc.calls) == compiles
        assert fake_state(cu).params[0] == t.data_ptr()
        spec = specialize.specialize(add, dict(x_ptr=t, y_ptr=x, out_ptr=x, n=16, BLOCK=128))[2]
        assert spec["x_ptr"]["large"] is large
    assert [c["specialization"]["x_ptr"]["large"] for c in fc.calls] == [False, True, False]

    class Sub(torch.Tensor):
        pass
    for t in (big, under, wide, x):   # a subclass takes the other branch (_classify): same keys
        assert b(t.as_subclass(Sub), x, x, 16) == b(t, x, x, 16)


def test_int_grids_are_checked_before_the_launch_function_trusts_them(gpu):
    """The launch function takes an int grid as checked: run(grid=...), k[n] and the first
    launch (which generates the function) check it first, with the tuple's errors."""
    cu, fc = gpu
    x = torch.randn(16)
    add = make_add()
    with pytest.raises(newt.LaunchError, match=r"grid x = -1 is outside"):
        add[-1](x, x, x, 16)                   # the very first launch of this kernel
    add = make_add()
    add.run(x, x, x, 16, grid=3)               # first launch through run()
    assert fake_state(cu).grid == (3, 1, 1)
    before = fake_state(cu).launches
    for bad, msg in [(-2, "grid x = -2 is outside"),
                     (2**31, "grid x = 2147483648 is outside"), ((2**31,), "2147483648")]:
        with pytest.raises(newt.LaunchError, match=msg):
            add.run(x, x, x, 16, grid=bad)
        with pytest.raises(newt.LaunchError, match=msg):
            add[bad](x, x, x, 16)
    assert fake_state(cu).launches == before
    for g, want in [(7, (7, 1, 1)), ((8,), (8, 1, 1)), ((2, 3), (2, 3, 1)), ([5], (5, 1, 1))]:
        add.run(x, x, x, 16, grid=g)
        assert fake_state(cu).grid == want


def test_a_float_beyond_fp32_names_the_argument_and_the_line(gpu):
    """A Python float is an fp32 parameter: one beyond fp32's range is a LaunchError naming the
    argument, its type and the launching line (the struct packer's OverflowError before);
    inf still passes (it fits)."""
    cu, fc = gpu

    @newt.jit
    def scale(p, s, n):
        pass
    t = torch.empty(4)
    with pytest.raises(newt.LaunchError) as e:
        scale[(1,)](t, 1e39, 3)
    msg = str(e.value)
    assert "`s`" in msg and "fp32" in msg and "launched at" in msg, msg
    assert "scale[(1,)](t, 1e39, 3)" in msg, msg
    scale[(1,)](t, float("inf"), 3)
    assert struct.unpack("<f", struct.pack("<I", fake_state(cu).params[1] & 0xFFFFFFFF))[0] \
        == float("inf")


def test_keyword_only_parameters_launch(gpu):
    """A keyword-only constexpr (and runtime) parameter is passed by name as any other."""
    cu, fc = gpu

    @newt.jit
    def kw(p, *, n, BLOCK: nl.constexpr):
        pass
    t = torch.empty(4)
    kw[(1,)](t, n=77, BLOCK=32)
    assert fc.calls[-1]["constexprs"] == {"BLOCK": 32}
    assert fake_state(cu).params[:2] == [t.data_ptr(), 77]
    with pytest.raises(newt.LaunchError, match="takes 1 arguments but 2 were given"):
        kw[(1,)](t, 5, BLOCK=32)
