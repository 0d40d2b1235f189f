"""01: vector add, the first newt kernel (Triton's tutorial 01 with `tl` swapped for `nl`).

Each program adds one BLOCK_SIZE-wide slice of two vectors. On the GPU this is the TARGETS.md
workload (fp32, n = 2**27, BLOCK 1024, 4 warps) and prints its bandwidth; without a GPU it runs
a small size on the CPU interpreter. Either way the result is checked against torch first.

    python examples/01_vector_add.py [--small] [--sweep [DIR]]
"""
import sys

import torch

import newt
import newt.language as nl
from newt.testing import assert_close, do_bench, run_example


@newt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block may run past the end
    x = nl.load(x_ptr + offsets, mask=mask)
    y = nl.load(y_ptr + offsets, mask=mask)
    nl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y, out=None, BLOCK_SIZE=1024, num_warps=4):
    """out = x + y for contiguous tensors of the same shape and dtype."""
    out = torch.empty_like(x) if out is None else out
    n = out.numel()
    add_kernel[(newt.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE,
                                            num_warps=num_warps)
    return out


# Compile-only descriptions of the kernels above (tests compile them for sm_80 and sm_90a).
AOT = [dict(fn=add_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                      "n_elements": "i32"},
            constexprs={"BLOCK_SIZE": 1024}, num_warps=4)]


def bytes_moved(n, dtype=torch.float32):
    return 3 * n * torch.empty((), dtype=dtype).element_size()  # read x, y; write out


def check(device, small=True):
    """Run on fresh random data (output poisoned with NaN) and compare with torch."""
    for n in ([1, 1000, 98_431] if small else [98_431, 1 << 27]):
        x = torch.randn(n, device=device)
        y = torch.randn(n, device=device)
        out = torch.full_like(x, float("nan"))
        add(x, y, out)
        assert_close(out, x + y, msg=f"vector add n={n}")
    return n


def sweep(save_path=None):
    """GB/s of newt and torch over sizes (Triton tutorial style); needs a GPU."""
    from newt.testing import Benchmark, perf_report

    @perf_report(Benchmark(x_names=["size"], x_vals=[2**i for i in range(12, 28, 3)],
                           x_log=True, line_arg="provider", line_vals=["newt", "torch"],
                           line_names=["newt", "torch"], ylabel="GB/s",
                           plot_name="vector-add-performance"))
    def bench(size, provider):
        x, y = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
        out = torch.empty_like(x)
        fn = (lambda: add(x, y, out)) if provider == "newt" else (lambda: torch.add(x, y, out=out))
        ms, lo, hi = do_bench(fn, quantiles=[0.5, 0.2, 0.8])
        gbps = lambda t: bytes_moved(size) / t * 1e-6  # noqa: E731
        return gbps(ms), gbps(hi), gbps(lo)

    bench.run(print_data=True, save_path=save_path)


def timed(n):
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    return bytes_moved(n), [("newt", lambda: add(x, y, out)),
                            ("torch", lambda: torch.add(x, y, out=out))]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    device = run_example(argv, check, lambda n: f"vector add: matches torch (n up to {n:,}, fp32)",
                         timed)
    if device == "cuda" and "--sweep" in argv:  # --sweep [DIR]: a table over sizes, a PNG in DIR
        i = argv.index("--sweep")
        sweep(argv[i + 1] if i + 1 < len(argv) else None)


if __name__ == "__main__":
    main()
