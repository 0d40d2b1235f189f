"""Triton's host API under newt's names: driver.active, TensorDescriptor, set_allocator, the
profiler, the handle a launch returns, warmup / run / src, num_ctas, empty grids. On the CPU
with the stand-in driver (runtime_fakes) and the interpreter; GPU checks skip without CUDA."""
import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import driver

from runtime_fakes import build_fake_libcuda, fake_state, install_fake_gpu

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def fake_lib_path(tmp_path_factory):
    return build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))


@pytest.fixture
def gpu(fake_lib_path, monkeypatch, tmp_cache):
    """A stand-in GPU (an sm_90a with 132 SMs) with the real compiler behind it."""
    cu = driver.load_library(fake_lib_path)
    install_fake_gpu(cu, monkeypatch)
    return cu


@newt.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) * factor, mask=m)


def test_current_target_and_device_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    active = newt.runtime.driver.active
    t = active.get_current_target()
    assert (t.backend, t.arch, t.warp_size) == ("cuda", 90, 32)
    assert active.get_active_torch_device() == torch.device("cpu")


def test_active_device_on_the_interpreter_is_the_cpu(monkeypatch):
    """With a GPU present, NEWT_INTERPRET=1 still makes the active device the CPU: the
    interpreter takes CPU tensors, so a program creating its tensors there runs unchanged."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    active = newt.runtime.driver.active
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    assert active.get_active_torch_device() == torch.device("cpu")
    monkeypatch.setattr(newt.options.flags, "interpret", False)
    assert active.get_active_torch_device() == torch.device("cuda", 0)


def test_device_properties_through_the_driver(gpu, monkeypatch):
    props = newt.runtime.driver.active.utils.get_device_properties(0)
    assert set(props) == {"max_shared_mem", "max_num_regs", "multiprocessor_count", "warpSize",
                          "sm_clock_rate", "mem_clock_rate", "mem_bus_width",
                          "max_threads_per_sm"}
    assert props["max_shared_mem"] == 232448 and props["multiprocessor_count"] == 132
    assert props["warpSize"] == 32 and props["max_num_regs"] == 65536
    assert props["sm_clock_rate"] == 1980000 and props["max_threads_per_sm"] == 2048
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert newt.runtime.driver.active.get_current_target().arch == 90


def test_tensor_descriptor_host_object():
    from newt.tools.tensor_descriptor import TensorDescriptor
    x = torch.randn(37, 50)[:, 3:]
    d = TensorDescriptor.from_tensor(x, [16, 32])
    assert d.base is x and d.shape == [37, 47] and d.strides == [50, 1]
    assert d.block_shape == [16, 32] and d.padding == "zero"
    d.block_shape = [8, 8]          # mutable, as autotuning pre-hooks expect
    with pytest.raises(ValueError, match="one entry per dimension"):
        TensorDescriptor(x, [37, 47], [50], [16, 32])
    with pytest.raises(ValueError, match="padding"):
        TensorDescriptor.from_tensor(x, [16, 32], padding="inf")


def test_set_allocator_is_kept():
    from newt.runtime.allocation import get_allocator
    alloc = lambda size, align, stream: torch.empty(size, dtype=torch.int8)  # noqa: E731
    newt.set_allocator(alloc)
    assert get_allocator() is alloc
    newt.set_allocator(None)


def test_profiler_scopes_and_viewer(tmp_path, monkeypatch):
    import newt.profiler as proton
    import newt.profiler.viewer as viewer
    monkeypatch.chdir(tmp_path)
    x = torch.randn(257)
    sid = proton.start("prof")
    for _ in range(3):
        with proton.scope("mul", {"flops16": 1e6, "bytes": 2e6}):
            (x * 2).sum()
    proton.deactivate(sid)
    with proton.scope("skipped"):
        pass
    proton.activate(sid)

    @proton.scope("decorated")
    def f():
        return x + 1
    f()
    rows = {r["name"]: r for r in proton.summary(sid)}
    assert set(rows) == {"mul", "decorated"}
    mul = rows["mul"]
    assert mul["count"] == 3 and mul["flops16"] == 3e6 and mul["time/ms"] > 0
    assert mul["tflop16/s"] == pytest.approx(3e6 / (mul["time/ms"] * 1e-3) / 1e12)
    assert mul["gbyte/s"] == pytest.approx(6e6 / (mul["time/ms"] * 1e-3) / 1e9)
    proton.finalize(sid)
    tree, metrics = viewer.parse(["tflop16/s", "time/ms"], "prof.hatchet")
    assert [r["name"] for r in tree] == ["mul", "decorated"] and metrics[0] == "tflop16/s"
    with pytest.raises(ValueError, match="no profiling session"):
        proton.activate(sid)


def _scale_metadata(grid, kernel, args):
    return {"name": f"{kernel.name} [n={args['n']}, grid={grid[0]}]", "flops32": 1.0 * args["n"],
            "bytes": 8 * args["n"], "note": "not a number: left out"}


@newt.autotune([newt.Config({"BLOCK": 64}), newt.Config({"BLOCK": 128})], key=["n"])
@newt.jit(launch_metadata=_scale_metadata)
def tuned_scale(x_ptr, out_ptr, n, factor, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    m = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=m) * factor, mask=m)


def test_profiler_records_kernels_with_their_launch_metadata(tmp_path, monkeypatch):
    """A session started with hook="triton" records each launch made through an autotuner or
    `kernel.run` as a scope named by the kernel's launch_metadata, with its metrics; a session
    without the hook and a direct `kernel[grid](...)` launch record no kernels."""
    import newt.profiler as proton
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    plain = proton.start()
    sid = proton.start("kern", hook="triton")
    assert newt.options.flags.launch_hook is not None
    grid = lambda m: (newt.cdiv(m["n"], m["BLOCK"]),)      # noqa: E731
    for n in (301, 301, 77):
        x, out = torch.randn(n), torch.full((n,), float("nan"))
        tuned_scale[grid](x, out, n, -1.5)
        torch.testing.assert_close(out, x * -1.5)
    x, out = torch.randn(99), torch.full((99,), float("nan"))
    tuned_scale.fn[(1,)](x, out, 99, 2.0, BLOCK=128)               # direct: not recorded
    tuned_scale.fn.run(x, out, 99, 3.0, BLOCK=128, grid=(1,))
    torch.testing.assert_close(out, x * 3.0)
    scale_kernel.run(x, out, 99, 0.5, BLOCK=128, grid=(1,))       # no metadata: its name
    torch.testing.assert_close(out, x * 0.5)
    rows = {r["name"]: r for r in proton.summary(sid)}
    assert set(rows) == {"tuned_scale [n=301, grid=5]", "tuned_scale [n=77, grid=2]",
                         "tuned_scale [n=99, grid=1]", "scale_kernel"}
    r = rows["tuned_scale [n=301, grid=5]"]
    assert r["count"] == 2 and r["flops32"] == 602 and r["bytes"] == 8 * 602
    assert "note" not in r and r["tflop32/s"] > 0
    assert proton.summary(plain) == []
    proton.finalize(sid)
    assert newt.options.flags.launch_hook is None      # no session records kernels any more
    proton.finalize(plain)


def test_launch_returns_the_handle(gpu):
    x, out = torch.randn(300), torch.full((300,), float("nan"))
    h = scale_kernel[(3,)](x, out, 300, 2.0, BLOCK=128)
    assert h is not None and h is scale_kernel[(3,)](x, out, 300, 2.0, BLOCK=128)
    assert h.n_regs > 0 and h.n_spills == 0
    md = h.metadata
    assert md.num_warps == 4 and md.shared == h.shared and md.target.arch == 90
    asm = h.asm
    assert "scale_kernel" in asm["source"] and ".target sm_90a" in asm["ptx"]
    assert asm["cubin"][:4] == b"\x7fELF"
    h._init_handles()


def test_empty_grid_launches_nothing(gpu):
    x, out = torch.randn(64), torch.randn(64)
    scale_kernel[(1,)](x, out, 64, 2.0, BLOCK=64)
    before = fake_state(gpu).launches
    for g in [(0,), (2, 0), lambda meta: (0, 1, 1)]:
        assert scale_kernel[g](x, out, 64, 2.0, BLOCK=64) is not None
    assert fake_state(gpu).launches == before


def test_empty_grid_on_the_interpreter(monkeypatch):
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    x, out = torch.randn(64), torch.randn(64)
    keep = out.clone()
    for g in [(0,), (3, 0), lambda meta: (0,)]:
        scale_kernel[g](x, out, 64, 2.0, BLOCK=64)
    assert torch.equal(out, keep)
    with pytest.raises(newt.LaunchError, match=">= 0"):
        scale_kernel[(-1,)](x, out, 64, 2.0, BLOCK=64)


def test_num_ctas(gpu, monkeypatch):
    """Triton's num_ctas spreads a program over a cluster: same results, so any positive count
    launches (one CTA per program here); anything else is a launch error."""
    x, out = torch.randn(100), torch.full((100,), float("nan"))
    before = fake_state(gpu).launches
    scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=128, num_ctas=1)
    scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=128, num_ctas=2)
    assert fake_state(gpu).launches == before + 2 and fake_state(gpu).grid == (1, 1, 1)
    for bad in (0, 1.5, "2"):
        with pytest.raises(newt.LaunchError, match="CTAs per program"):
            scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=128, num_ctas=bad)
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    scale_kernel[(1,)](x, out, 100, 3.0, BLOCK=128, num_ctas=4)
    torch.testing.assert_close(out, x * 3.0)
    with pytest.raises(newt.LaunchError, match="num_ctas=0"):
        scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=128, num_ctas=0)


def test_ignored_launch_options(gpu, monkeypatch):
    """maxnreg, enable_fp_fusion, debug and extern_libs (tutorial 07 passes libdevice's path)
    are accepted and ignored on the compiled path and in the interpreter alike."""
    x = torch.randn(100)
    opts = dict(maxnreg=128, enable_fp_fusion=False, debug=False,
                extern_libs={"libdevice": "/nowhere/libdevice.10.bc"})
    out = torch.full((100,), float("nan"))
    before = fake_state(gpu).launches
    scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=128, **opts)
    assert fake_state(gpu).launches == before + 1
    with pytest.raises(newt.LaunchError, match="unexpected keyword argument 'extern_lib'"):
        scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=128, extern_lib={})
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    scale_kernel[(1,)](x, out, 100, 3.0, BLOCK=128, **opts)
    torch.testing.assert_close(out, x * 3.0)


def test_warmup_without_a_device_and_run(gpu, monkeypatch):
    x, out = torch.randn(100), torch.empty(100)
    h = scale_kernel.warmup(x, out, 100, 2.0, BLOCK=64, grid=(2,), arch="sm_80", num_warps=2)
    assert ".target sm_80" in h.asm["ptx"] and h.metadata.num_warps == 2 and h.n_regs > 0
    before = fake_state(gpu).launches
    h2 = scale_kernel.run(x, out, 100, 2.0, BLOCK=64, grid=(2,), warmup=True)
    assert fake_state(gpu).launches == before and h2.metadata.arch == "sm_90a"
    scale_kernel.run(x, out, 100, 2.0, BLOCK=64, grid=(2,))
    assert fake_state(gpu).launches == before + 1


def test_device_properties_without_a_driver(monkeypatch):
    """A program sizing its grid from the device's properties runs on the interpreter: without
    a CUDA driver the answer is the default target's (sm_90a) figures."""
    from newt.runtime import driver as drv

    def no_driver():
        raise drv.DriverError("no CUDA driver here")
    monkeypatch.setattr(drv, "lib", no_driver)
    props = newt.runtime.driver.active.utils.get_device_properties(None)
    assert props["multiprocessor_count"] == 132 and props["max_num_regs"] == 65536
    assert props["max_shared_mem"] == 232448 and props["warpSize"] == 32


def test_warmup_handle_launches_on_the_interpreter(monkeypatch):
    """Triton's occupancy recipe: warm up, read n_regs and shared, then launch the handle with
    every argument in order (constexprs included). Without a GPU the handle's launch runs the
    kernel on the interpreter."""
    from newt.runtime import driver as drv

    def no_driver():
        raise drv.DriverError("no CUDA driver here")
    monkeypatch.setattr(drv, "lib", no_driver)
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    x = torch.randn(7, 30)
    out = torch.full_like(x, float("nan"))
    h = rows_kernel.warmup(out, x, 7, 30, BLOCK=32, num_stages=2, num_warps=2, grid=(1,))
    assert h.n_regs > 0 and h.metadata.shared >= 0
    h[(7, 1, 1)](out, x, 7, 30, 32, 2)
    torch.testing.assert_close(out, x - x.max(1, keepdim=True).values)


def test_src():
    assert scale_kernel.src.startswith("def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK")
    assert "nl.store(out_ptr + offs" in scale_kernel.src


def test_do_bench_cudagraph_needs_cuda():
    if HAS_CUDA:
        pytest.skip("checks the CPU error")
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        newt.testing.do_bench_cudagraph(lambda: None)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_gpu_handle_properties_and_benchmarks():
    x = torch.randn(5000, device="cuda")
    out = torch.full_like(x, float("nan"))
    h = scale_kernel[(newt.cdiv(5000, 256),)](x, out, 5000, 1.5, BLOCK=256)
    torch.testing.assert_close(out, x * 1.5)
    assert h.n_regs > 0 and h.metadata.target == newt.runtime.driver.active.get_current_target()
    props = newt.runtime.driver.active.utils.get_device_properties(x.device.index)
    assert props["multiprocessor_count"] == torch.cuda.get_device_properties(0).multi_processor_count
    assert props["warpSize"] == 32
    fn = lambda: scale_kernel[(20,)](x, out, 5000, 1.5, BLOCK=256)  # noqa: E731
    assert newt.testing.do_bench_cudagraph(fn) > 0 and newt.testing.do_bench(fn) > 0


@newt.jit
def desc_scale(xd, yd, factor, BM: nl.constexpr, BN: nl.constexpr):
    pm, pn = nl.program_id(0), nl.program_id(1)
    yd.store([pm * BM, pn * BN], xd.load([pm * BM, pn * BN]) * factor)


def test_descriptor_arguments_are_packed_as_pointer_and_ints(gpu):
    """Base pointer, then each size and stride, at the slots the compiled kernel names (a
    stride of 1 is compiled in); the block shape is part of the key; a descriptor parameter
    must stay a descriptor of the same rank."""
    from newt.tools.tensor_descriptor import TensorDescriptor
    x = torch.randn(37, 48)[:, :45]
    y = torch.randn(37, 45)
    xd, yd = TensorDescriptor.from_tensor(x, [16, 32]), TensorDescriptor.from_tensor(y, [16, 32])
    h = desc_scale[(3, 2)](xd, yd, 2.0, BM=16, BN=32)
    names = [p["name"] for p in h.binary.meta["params"]]
    assert names == ["xd", "xd_shape0", "xd_shape1", "xd_stride0", "yd", "yd_shape0",
                     "yd_shape1", "yd_stride0", "factor"]
    params = fake_state(gpu).params
    assert params[:8] == [x.data_ptr(), 37, 45, 48, y.data_ptr(), 37, 45, 45]
    assert desc_scale[(3, 2)](xd, yd, 2.0, BM=16, BN=32) is h
    xd.block_shape = yd.block_shape = [8, 32]
    assert desc_scale[(5, 2)](xd, yd, 2.0, BM=8, BN=32) is not h
    assert len(desc_scale.cache) == 2
    with pytest.raises(newt.LaunchError, match="argument 'xd' took a TensorDescriptor of rank 2"):
        desc_scale[(3, 2)](x, yd, 2.0, BM=8, BN=32)


@newt.jit
def rows_kernel(out_ptr, in_ptr, n_rows, n_cols, BLOCK: nl.constexpr, num_stages: nl.constexpr):
    """A kernel parameter named num_stages is also the launch option (Triton's softmax)."""
    for row in nl.range(nl.program_id(0), n_rows, nl.num_programs(0), num_stages=num_stages):
        offs = nl.arange(0, BLOCK)
        m = offs < n_cols
        x = nl.load(in_ptr + row * n_cols + offs, mask=m, other=0.0)
        nl.store(out_ptr + row * n_cols + offs, x - nl.max(x, axis=0), mask=m)


def test_num_stages_parameter_and_compiled_launch(gpu, monkeypatch):
    x = torch.randn(7, 30)
    out = torch.full_like(x, float("nan"))
    h = rows_kernel.warmup(out, x, 7, 30, BLOCK=32, num_stages=2, num_warps=2, grid=(1,))
    assert h.metadata.num_stages == 2 and h.metadata.num_warps == 2
    assert h.metadata.shared >= h.shared
    before = fake_state(gpu).launches
    assert h[(3, 1, 1)](out, x, 7, 30, 32, 2) is h          # Triton's compiled-kernel launch
    st = fake_state(gpu)
    assert st.launches == before + 1 and st.grid == (3, 1, 1)
    assert st.params[:4] == [out.data_ptr(), x.data_ptr(), 7, 30]
    assert rows_kernel[(2,)](out, x, 7, 30, BLOCK=32, num_stages=2, num_warps=2) is h
    assert rows_kernel[(2,)](out, x, 7, 30, 32, 3).metadata.num_stages == 3
    monkeypatch.setattr(newt.options.flags, "interpret", True)
    rows_kernel[(3,)](out, x, 7, 30, BLOCK=32, num_stages=4)
    torch.testing.assert_close(out, x - x.max(1, keepdim=True).values)


def test_asm_of_a_kernel_loaded_from_the_disk_cache(gpu):
    """The source and PTX live in a disk entry of their own, read when `.asm` is asked: a
    process that loads the kernel from the cache still gets them."""
    from newt.runtime import cache
    x, out = torch.randn(64), torch.empty(64)
    first = scale_kernel.warmup(x, out, 64, 1.0, BLOCK=32, arch="sm_80").asm
    fresh = cache.disk_cache().load(next(iter(_entries_with(cache.disk_cache().root, b"sm_80"))))
    from newt.runtime.handle import CompiledHandle
    again = CompiledHandle(fresh).asm
    assert fresh.asm is None and again["ptx"] == first["ptx"] and "sm_80" in again["ptx"]
    assert again["source"] == first["source"] and again["cubin"] == first["cubin"]


def _entries_with(root, needle):
    import os
    for folder, _, files in os.walk(root):
        for f in files:
            path = os.path.join(folder, f)
            with open(path, "rb") as fh:
                data = fh.read()
            if needle in data and b'"asm_key"' in data:
                yield f.rsplit(".", 1)[0]
