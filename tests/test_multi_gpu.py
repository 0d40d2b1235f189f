"""Two GPUs in one process: kernels run on their tensors' own device (module, stream, TMA maps,
caches), and a launch mixing devices is a clear LaunchError; the tuners time on the arguments'
GPU; the data-parallel example runs over NCCL. Every test skips itself below two CUDA devices
(tests/test_runtime_devices.py checks the same per-device state on a stand-in driver). The
data-parallel example with its step times:

    torchrun --nproc-per-node 2 examples/09_data_parallel.py
"""
import os
import socket
import subprocess
import sys

import pytest
import torch

import newt
import newt.language as nl
import newt.testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402  (benchmarks/common.py: load_file)

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")


@newt.jit
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) * alpha
             + nl.load(y_ptr + offs, mask=mask), mask=mask)


def _run(dev, n=3001, alpha=1.5):
    x = torch.randn(n, device=dev)
    y = torch.randn(n, device=dev)
    out = torch.full_like(x, float("nan"))
    axpy[(newt.cdiv(n, 256),)](x, y, out, n, alpha, BLOCK=256)
    return out, x * alpha + y


@pytest.mark.parametrize("contexts", [False, True])
def test_one_kernel_on_both_devices_interleaved(contexts):
    torch.cuda.set_device(0)
    results = []
    for i in range(6):
        dev = torch.device("cuda", i % 2)
        if contexts:
            with torch.cuda.device(dev):
                results.append(_run(dev, n=1000 + 17 * i))
        else:
            results.append(_run(dev, n=1000 + 17 * i))
        assert torch.cuda.current_device() == 0   # a launch leaves torch's device alone
    for got, want in results:
        torch.testing.assert_close(got, want)
        assert got.device == want.device


def test_current_device_other_than_the_tensors():
    with torch.cuda.device(1):
        got, want = _run(torch.device("cuda", 0))
    torch.testing.assert_close(got, want)
    with torch.cuda.device(0):
        got, want = _run(torch.device("cuda", 1))
    torch.testing.assert_close(got, want)


def test_arguments_on_two_devices_is_a_launch_error():
    x = torch.randn(64, device="cuda:0")
    y = torch.randn(64, device="cuda:1")
    with pytest.raises(newt.LaunchError, match=r"one device, got 'x_ptr' on cuda:0, "
                                               r"'y_ptr' on cuda:1"):
        axpy[(1,)](x, y, x, 64, 1.0, BLOCK=64)


def test_side_streams_on_each_device():
    outs = []
    for d in (0, 1):
        dev = torch.device("cuda", d)
        s = torch.cuda.Stream(device=dev)
        x = torch.randn(4097, device=dev)
        y = torch.randn(4097, device=dev)
        out = torch.full_like(x, float("nan"))
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            axpy[(newt.cdiv(4097, 512),)](x, y, out, 4097, -2.0, BLOCK=512)
        torch.cuda.current_stream(dev).wait_stream(s)
        outs.append((out, x * -2.0 + y))
    for got, want in outs:
        torch.testing.assert_close(got, want)


def test_graph_capture_on_the_second_device():
    dev = torch.device("cuda", 1)
    x = torch.randn(2049, device=dev)
    y = torch.randn(2049, device=dev)
    out = torch.empty_like(x)
    with torch.cuda.device(dev):
        _run(dev)                            # warm: the module is loaded on device 1
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            axpy[(newt.cdiv(2049, 256),)](x, y, out, 2049, 0.25, BLOCK=256)
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize(dev)
    torch.testing.assert_close(out, x * 0.25 + y)


def test_tma_matmul_on_the_second_device():
    mm = common.load_file(os.path.join(ROOT, "examples", "05_matmul.py"), "newt_example_matmul")
    for dev in ("cuda:1", "cuda:0", "cuda:1"):
        a = torch.randn(1000, 520, device=dev, dtype=torch.float16)
        b = torch.randn(520, 776, device=dev, dtype=torch.float16)
        c = mm.matmul(a, b)
        torch.testing.assert_close(c.double(), mm.reference(a, b), rtol=2e-2, atol=5e-2)
        assert c.device == a.device


def test_attention_forward_on_the_second_device():
    at = common.load_file(os.path.join(ROOT, "examples", "06_fused_attention.py"),
                          "newt_example_attention")
    for dev, causal in (("cuda:1", False), ("cuda:1", True), ("cuda:0", True)):
        q, k, v = (torch.randn(2, 3, 333, 64, device=dev, dtype=torch.float16) for _ in range(3))
        o = at.attention(q, k, v, causal)
        torch.testing.assert_close(o.float(), at.reference(q, k, v, causal), rtol=2e-2,
                                   atol=2e-2)


def test_deuteron_tuning_on_the_second_device(tmp_path, monkeypatch):
    import deuteron as dt
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt"))

    def scaled(x, y):
        out = torch.empty_like(x)
        for t in dt.tile(x.shape[0]):
            out[t] = x[t] * 3.0 - y[t]
        return out

    k = dt.kernel(scaled, autotune_effort="quick")
    for dev in ("cuda:1", "cuda:0"):
        x = torch.randn(5000, device=dev)
        y = torch.randn(5000, device=dev)
        torch.testing.assert_close(k(x, y), x * 3.0 - y)
    assert any((tmp_path / "dt").rglob("*")), "the tuned config was stored"
    again = dt.kernel(scaled, autotune_effort="quick")   # a new object: the disk cache answers
    x = torch.randn(5000, device="cuda:1")
    y = torch.randn(5000, device="cuda:1")
    torch.testing.assert_close(again(x, y), x * 3.0 - y)


def test_synchronize_of_the_second_device_keeps_torchs_device():
    torch.cuda.set_device(0)
    out, want = _run(torch.device("cuda", 1))
    newt.runtime.synchronize(1)
    assert torch.cuda.current_device() == 0
    torch.testing.assert_close(out, want)


def test_tma_matmul_captured_on_the_second_device():
    """The graph replays the TMA maps encoded for device 1's buffers at capture."""
    mm = common.load_file(os.path.join(ROOT, "examples", "05_matmul.py"), "newt_example_matmul")
    dev = torch.device("cuda", 1)
    a = torch.randn(600, 264, device=dev, dtype=torch.float16)
    b = torch.randn(264, 392, device=dev, dtype=torch.float16)
    with torch.cuda.device(dev):
        mm.matmul(a, b)                      # warm: compiled, loaded on device 1
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            c = mm.matmul(a, b)
        a.copy_(torch.randn_like(a))
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize(dev)
    torch.testing.assert_close(c.double(), mm.reference(a, b), rtol=2e-2, atol=5e-2)


def test_newt_autotune_times_on_the_arguments_device():
    """Tensors on cuda:1 while cuda:0 is current: every config is timed with cuda:1 current
    (CUDA events on its stream), and the winner is keyed by its GPU's name."""
    seen = []

    def bench(fn, warmup=25, rep=100):
        seen.append(torch.cuda.current_device())
        return newt.testing.do_bench(fn, warmup=2, rep=5)

    @newt.autotune([newt.Config({"BLOCK": 128}), newt.Config({"BLOCK": 512}, num_warps=8)],
                   key=["n"], do_bench=bench)
    @newt.jit
    def tuned(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
        offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
        mask = offs < n
        nl.store(out_ptr + offs, nl.load(x_ptr + offs, mask=mask) * alpha
                 + nl.load(y_ptr + offs, mask=mask), mask=mask)

    torch.cuda.set_device(0)
    x, y = torch.randn(5003, device="cuda:1"), torch.randn(5003, device="cuda:1")
    out = torch.full_like(x, float("nan"))
    tuned[lambda m: (newt.cdiv(5003, m["BLOCK"]),)](x, y, out, 5003, 0.5)
    assert seen == [1, 1] and torch.cuda.current_device() == 0
    assert list(tuned.cache)[0][-1] == torch.cuda.get_device_name(1)
    torch.testing.assert_close(out, x * 0.5 + y)


def test_deuteron_tuning_times_on_the_arguments_device(tmp_path, monkeypatch):
    import deuteron as dt
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt"))
    seen = []

    def timer(fn):
        seen.append(torch.cuda.current_device())
        return newt.testing.do_bench(fn, warmup=2, rep=5)

    def shifted(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.shape[0]):
            out[t] = x[t] + 1.0
        return out

    torch.cuda.set_device(0)
    k = dt.kernel(shifted)
    x = torch.randn(3001, device="cuda:1")
    k.autotune((x,), "quick", timer=timer, progress=False)
    assert seen and set(seen) == {1} and torch.cuda.current_device() == 0
    torch.testing.assert_close(k(x), x + 1.0)


def test_data_parallel_example_over_nccl(tmp_path):
    """examples/09_data_parallel.py on two GPUs, one process each, NCCL: the DDP step matches a
    single-process step on the whole batch (the reduced sizes; without --small it also prints
    the step times)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=ROOT, NCCL_NVLS_ENABLE="0",
               DEUTERON_CACHE_DIR=str(tmp_path / "dt"))
    env.pop("NEWT_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--master-port", str(port),
                        os.path.join(ROOT, "examples", "09_data_parallel.py"), "--small"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 process(es) on cuda, step matches the single-process step" in r.stdout
