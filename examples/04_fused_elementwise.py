"""04: fused elementwise, SiLU-and-mul (the gated MLP activation of Llama-style models).

out[m, j] = silu(x[m, j]) * x[m, N + j] for an input holding [gate | up] side by side. Eager
torch reads the input twice and writes an intermediate; the fused kernel reads each element once
and writes once. A 2-D grid: axis 0 picks the row, axis 1 a BLOCK_SIZE-wide slice of columns.
Math in fp32, stored as fp16 (store casts to the pointee type). On the GPU it runs a large size
and prints its bandwidth; without a GPU a small odd size on the CPU interpreter.

    python examples/04_fused_elementwise.py [--small]
"""
import sys

import torch

import newt
import newt.language as nl
from newt.testing import assert_close, run_example


@newt.jit
def silu_and_mul_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, N,
                        BLOCK_SIZE: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.program_id(1) * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
    mask = cols < N
    gate = nl.load(x_ptr + row * x_row_stride + cols, mask=mask).to(nl.float32)
    up = nl.load(x_ptr + row * x_row_stride + N + cols, mask=mask).to(nl.float32)
    nl.store(out_ptr + row * out_row_stride + cols, gate * nl.sigmoid(gate) * up, mask=mask)


def silu_and_mul(x, out=None, BLOCK_SIZE=1024, num_warps=4):
    """x: [M, 2N] -> [M, N]."""
    m, n2 = x.shape
    n = n2 // 2
    out = torch.empty((m, n), dtype=x.dtype, device=x.device) if out is None else out
    grid = (m, newt.cdiv(n, BLOCK_SIZE))
    silu_and_mul_kernel[grid](x, out, x.stride(0), out.stride(0), n, BLOCK_SIZE=BLOCK_SIZE,
                              num_warps=num_warps)
    return out


AOT = [dict(fn=silu_and_mul_kernel,
            signature={"x_ptr": "*fp16", "out_ptr": "*fp16", "x_row_stride": "i32",
                       "out_row_stride": "i32", "N": "i32"},
            constexprs={"BLOCK_SIZE": 1024}, num_warps=4)]


def reference(x):
    n = x.shape[1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[:, :n]) * xf[:, n:]).to(x.dtype)


def bytes_moved(m, n, dtype=torch.float16):
    return 3 * m * n * torch.empty((), dtype=dtype).element_size()  # read 2N, write N per row


def check(device, small=True):
    shapes = [(1, 7), (5, 1500), (3, 2053)] if small else [(5, 1500), (301, 11008), (8192, 8192)]
    for m, n in shapes:
        x = (torch.randn(m, 2 * n, device=device) * 3).half()
        out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
        silu_and_mul(x, out)
        assert_close(out, reference(x), msg=f"silu_and_mul {m}x{n}")
    return shapes[-1]


def timed(shape):
    m, n = shape
    x = torch.randn(m, 2 * n, device="cuda").half()
    out = torch.empty((m, n), dtype=x.dtype, device="cuda")
    return bytes_moved(m, n), [
        ("newt", lambda: silu_and_mul(x, out)),
        ("torch", lambda: torch.nn.functional.silu(x[:, :n]) * x[:, n:])]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    run_example(argv, check, lambda s: f"silu-and-mul: matches torch (up to {s[0]}x{s[1]}, fp16)",
                timed)


if __name__ == "__main__":
    main()
