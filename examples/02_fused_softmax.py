"""02: fused softmax, one row per program (Triton's tutorial 02 with `tl` swapped for `nl`).

Each program loads a whole row into registers (BLOCK_SIZE = next power of two >= n_cols, the
tail masked with -inf), subtracts the row max, exponentiates, and divides by the row sum: one
read and one write of the matrix, where eager torch makes several passes. On the GPU this is
the TARGETS.md workload (fp32 32768 x 4096, 8 warps); without a GPU it runs small odd shapes on
the CPU interpreter. Either way the result is checked against torch first.

    python examples/02_fused_softmax.py [--small]
"""
import sys

import torch

import newt
import newt.language as nl
from newt.testing import assert_close, run_example


@newt.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                   BLOCK_SIZE: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # -inf padding leaves the max unchanged and contributes exp(-inf) = 0 to the sum
    x = nl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - nl.max(x, axis=0)
    num = nl.exp(x)
    den = nl.sum(num, axis=0)
    nl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def softmax(x, out=None, num_warps=8):
    """Row-wise softmax of a 2-D tensor (last dim stride 1)."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    block = newt.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block,
                              num_warps=num_warps)
    return out


AOT = [dict(fn=softmax_kernel, signature={"out_ptr": "*fp32", "in_ptr": "*fp32",
                                          "in_row_stride": "i32", "out_row_stride": "i32",
                                          "n_cols": "i32"},
            constexprs={"BLOCK_SIZE": 4096}, num_warps=8)]


def bytes_moved(m, n, dtype=torch.float32):
    return 2 * m * n * torch.empty((), dtype=dtype).element_size()


def check(device, small=True):
    shapes = [(1, 1), (37, 781), (5, 1024)] if small else [(37, 781), (1823, 4097), (32768, 4096)]
    for m, n in shapes:
        x = torch.randn(m, n, device=device) * 4
        out = torch.full_like(x, float("nan"))
        softmax(x, out)
        assert_close(out, torch.softmax(x, dim=1), msg=f"softmax {m}x{n}")
    # a strided input (a view of every other row) and a row of equal values
    x = torch.randn(2 * 13, 300, device=device)[::2]
    x[3] = 1.5
    out = torch.full((13, 300), float("nan"), device=device)
    softmax(x, out)
    assert_close(out, torch.softmax(x, dim=1), msg="softmax strided")
    return shapes[-1]


def timed(shape):
    x = torch.randn(*shape, device="cuda")
    out = torch.empty_like(x)
    return bytes_moved(*shape), [("newt", lambda: softmax(x, out)),
                                 ("torch", lambda: torch.softmax(x, dim=1))]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    run_example(argv, check, lambda s: f"fused softmax: matches torch (up to {s[0]}x{s[1]}, fp32)",
                timed)


if __name__ == "__main__":
    main()
