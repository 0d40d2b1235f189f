"""03: layer norm forward, one row per program (in the spirit of Triton's tutorial 05).

Each program loads a whole row (BLOCK_SIZE >= N, tail masked), computes mean and variance in
fp32 with two block reductions, normalizes, applies weight and bias, and stores the fp16 result
(store casts to the pointee type) plus the row's mean and 1/std for a backward pass. On the GPU
this is the TARGETS.md workload (fp16 32768 x 4096, BLOCK 4096, 8 warps) and N = 1,500, which
needs masking; without a GPU it runs small odd shapes on the CPU interpreter.

    python examples/03_layernorm.py [--small]
"""
import sys

import torch

import newt
import newt.language as nl
from newt.testing import assert_close, run_example


@newt.jit
def layernorm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, row_stride, N, eps,
                         BLOCK_SIZE: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = nl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(nl.float32)
    mean = nl.sum(x, axis=0) / N
    xc = nl.where(mask, x - mean, 0.0)  # padding must not add (0 - mean)^2 to the variance
    var = nl.sum(xc * xc, axis=0) / N
    rstd = 1 / nl.sqrt(var + eps)
    w = nl.load(w_ptr + cols, mask=mask).to(nl.float32)
    b = nl.load(b_ptr + cols, mask=mask).to(nl.float32)
    nl.store(y_ptr + row * row_stride + cols, xc * rstd * w + b, mask=mask)
    nl.store(mean_ptr + row, mean)
    nl.store(rstd_ptr + row, rstd)


def layernorm(x, weight, bias, eps=1e-5, out=None, block=None, num_warps=8):
    """Layer norm over the last dim of a 2-D tensor; returns (y, mean, rstd)."""
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    mean = torch.empty(m, dtype=torch.float32, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    block = newt.next_power_of_2(n) if block is None else block
    assert block >= n, "one program holds a whole row"
    layernorm_fwd_kernel[(m,)](x, y, weight, bias, mean, rstd, x.stride(0), n, eps,
                               BLOCK_SIZE=block, num_warps=num_warps)
    return y, mean, rstd


AOT = [dict(fn=layernorm_fwd_kernel,
            signature={"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16",
                       "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "row_stride": "i32",
                       "N": "i32", "eps": "fp32"},
            constexprs={"BLOCK_SIZE": 4096}, num_warps=8)]


def bytes_moved(m, n, dtype=torch.float16):
    # x read and y written once; w, b, mean and rstd are small
    return (2 * m * n + 2 * n) * torch.empty((), dtype=dtype).element_size() + 8 * m


def reference(x, w, b, eps=1e-5):
    xf = x.float()
    mean = xf.mean(dim=1)
    rstd = torch.rsqrt(xf.var(dim=1, unbiased=False) + eps)
    y = torch.nn.functional.layer_norm(xf, (x.shape[1],), w.float(), b.float(), eps)
    return y.to(x.dtype), mean, rstd


def check(device, small=True):
    cases = ([(3, 1500, None), (7, 781, None), (2, 1500, 4096)] if small else
             [(37, 781, None), (4096, 1500, None), (4096, 1500, 4096), (32768, 4096, 4096)])
    for m, n, block in cases:
        x = (torch.randn(m, n, device=device) * 2 + 0.5).half()
        w = torch.randn(n, device=device).half()
        b = torch.randn(n, device=device).half()
        out = torch.full_like(x, float("nan"))
        y, mean, rstd = layernorm(x, w, b, out=out, block=block)
        y_ref, mean_ref, rstd_ref = reference(x, w, b)
        assert_close(y, y_ref, atol=1e-2, rtol=1e-2, msg=f"layernorm y {m}x{n}")
        assert_close(mean, mean_ref, atol=1e-4, rtol=1e-4, msg=f"layernorm mean {m}x{n}")
        assert_close(rstd, rstd_ref, atol=1e-4, rtol=1e-4, msg=f"layernorm rstd {m}x{n}")
    return cases[-1][:2]


def timed(shape):
    m, n = shape
    x = torch.randn(m, n, device="cuda").half()
    w, b = torch.randn(n, device="cuda").half(), torch.randn(n, device="cuda").half()
    out = torch.empty_like(x)
    return bytes_moved(m, n), [
        ("newt", lambda: layernorm(x, w, b, out=out, block=4096)),
        ("torch", lambda: torch.nn.functional.layer_norm(x, (n,), w, b))]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    run_example(argv, check, lambda s: f"layernorm forward: matches torch (up to {s[0]}x{s[1]}, "
                "fp16, N = 1,500 included)", timed)


if __name__ == "__main__":
    main()
