"""03: layer norm, forward and backward, one row per program (in the spirit of Triton's
tutorial 05).

Forward: each program loads a whole row (BLOCK_SIZE >= N, tail masked), computes mean and
variance in fp32 with two block reductions, normalizes, applies weight and bias, and stores the
fp16 result (store casts to the pointee type) plus the row's mean and 1/std for the backward
pass. On the GPU this is the TARGETS.md workload (fp16 32768 x 4096, BLOCK 4096, 8 warps) and
N = 1,500, which needs masking; without a GPU it runs small odd shapes on the CPU interpreter.

Backward, two kernels: the first computes a row's dX and adds the row's share of dW and dB
into one of GROUP_SIZE_M partial-sum rows (row r into r % GROUP_SIZE_M). Programs of a group
take turns through a spin lock, `atomic_cas` to take it and `atomic_xchg` to give it back,
and a per-group count tells the first of them that the partial rows hold nothing yet. The
second kernel sums the partial rows into dW and dB. `LayerNorm` wraps both passes in a
torch.autograd.Function, so a model can train with them.

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


# ----------------------------------------------------------------------------- backward

@newt.jit
def layernorm_bwd_dx_kernel(dx_ptr, dy_ptr, dw_part_ptr, db_part_ptr, x_ptr, w_ptr, mean_ptr,
                            rstd_ptr, locks_ptr, row_stride, N,
                            GROUP_SIZE_M: nl.constexpr, BLOCK_SIZE: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK_SIZE)
    mask = cols < N
    offs = row * row_stride + cols
    x = nl.load(x_ptr + offs, mask=mask, other=0.0).to(nl.float32)
    dy = nl.load(dy_ptr + offs, mask=mask, other=0.0).to(nl.float32)
    w = nl.load(w_ptr + cols, mask=mask, other=0.0).to(nl.float32)
    rstd = nl.load(rstd_ptr + row)
    xhat = nl.where(mask, (x - nl.load(mean_ptr + row)) * rstd, 0.0)
    g = w * dy   # the gradient reaching xhat; 0 in the padding, where w and dy load as 0
    # xhat depends on every x of the row through its mean and variance: two row means correct g
    dx = (g - nl.sum(g, axis=0) / N - xhat * (nl.sum(g * xhat, axis=0) / N)) * rstd
    nl.store(dx_ptr + offs, dx, mask=mask)
    # the row's share of dW and dB joins partial row `row % GROUP_SIZE_M`, one program at a time
    group = row % GROUP_SIZE_M
    lock = locks_ptr + group
    count = locks_ptr + GROUP_SIZE_M + group   # 0 until the group's first program has written
    part = group * N + cols
    dw = dy * xhat
    db = dy
    while nl.atomic_cas(lock, 0, 1, sem="acquire") == 1:
        pass
    first = nl.load(count) == 0
    # every thread has read the count before thread 0 sets it (newt's passes place this barrier
    # themselves, passes/thread_order.py; Triton needs it written)
    nl.debug_barrier()
    if first:
        nl.store(count, 1)   # the first of its group: the partial row holds garbage, not sums
    else:
        dw += nl.load(dw_part_ptr + part, mask=mask, other=0.0)
        db += nl.load(db_part_ptr + part, mask=mask, other=0.0)
    nl.store(dw_part_ptr + part, dw, mask=mask)
    nl.store(db_part_ptr + part, db, mask=mask)
    nl.debug_barrier()   # every thread's stores come before the release
    nl.atomic_xchg(lock, 0, sem="release")


@newt.jit
def layernorm_bwd_dwdb_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, M, N,
                              BLOCK_SIZE_M: nl.constexpr, BLOCK_SIZE_N: nl.constexpr):
    cols = nl.program_id(0) * BLOCK_SIZE_N + nl.arange(0, BLOCK_SIZE_N)
    dw = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)
    db = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)
    for start in range(0, M, BLOCK_SIZE_M):   # M partial rows, BLOCK_SIZE_M at a time
        rows = start + nl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += nl.load(dw_part_ptr + offs, mask=mask, other=0.0)
        db += nl.load(db_part_ptr + offs, mask=mask, other=0.0)
    nl.store(dw_ptr + cols, nl.sum(dw, axis=0), mask=cols < N)
    nl.store(db_ptr + cols, nl.sum(db, axis=0), mask=cols < N)


BWD_KERNELS = (layernorm_bwd_dx_kernel, layernorm_bwd_dwdb_kernel)

AOT = [dict(fn=layernorm_fwd_kernel,
            signature={"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16",
                       "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "row_stride": "i32",
                       "N": "i32", "eps": "fp32"},
            constexprs={"BLOCK_SIZE": 4096}, num_warps=8),
       dict(fn=layernorm_bwd_dx_kernel,
            signature={"dx_ptr": "*fp16", "dy_ptr": "*fp16", "dw_part_ptr": "*fp32",
                       "db_part_ptr": "*fp32", "x_ptr": "*fp16", "w_ptr": "*fp16",
                       "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "locks_ptr": "*i32",
                       "row_stride": "i32", "N": "i32"},
            constexprs={"GROUP_SIZE_M": 256, "BLOCK_SIZE": 4096}, num_warps=8),
       dict(fn=layernorm_bwd_dwdb_kernel,
            signature={"dw_part_ptr": "*fp32", "db_part_ptr": "*fp32", "dw_ptr": "*fp16",
                       "db_ptr": "*fp16", "M": "i32", "N": "i32"},
            constexprs={"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64}, num_warps=4)]


def backward_config(m, n):
    """Launch parameters of the backward. GROUP_SIZE_M trades lock contention (rows per group)
    against the partial rows the second kernel reads; here the partial rows (dW and dB, fp32)
    stay near 8 MB, well inside the L2 cache, and there are never more groups than rows."""
    block = newt.next_power_of_2(n)
    group = max(16, min(256, newt.next_power_of_2(max(1, (1 << 20) // n))))
    return dict(group=min(group, newt.next_power_of_2(m)), block=block,
                num_warps=min(8, max(1, block // 256)), block_m=32, block_n=64)


def layernorm_backward(dy, x, weight, mean, rstd, kernels=BWD_KERNELS, config=None, dx=None,
                       dw=None, db=None, partials=None):
    """(dx, dw, db) of y = layernorm(x) * weight + bias for the upstream gradient dy; mean and
    rstd are the forward's. x, dy (and dx) are 2-D with one row stride. `kernels` may be other
    compilations of the same two kernels (the benchmark's Triton twins); `partials` the
    (dw, db) partial-row buffers (fp32, at least group x n each)."""
    m, n = x.shape
    assert dy.shape == x.shape and dy.stride() == x.stride() and x.stride(1) == 1
    cfg = config or backward_config(m, n)
    group = cfg["group"]
    assert cfg["block"] >= n, "one program holds a whole row"
    dx = torch.empty_like(x) if dx is None else dx
    dw = torch.empty_like(weight) if dw is None else dw
    db = torch.empty_like(weight) if db is None else db
    if partials is None:   # no zeroing needed: each group's first program overwrites its row
        partials = [torch.empty(group, n, dtype=torch.float32, device=x.device) for _ in "wb"]
    locks = torch.zeros(2 * group, dtype=torch.int32, device=x.device)   # locks, then counts
    dx_kernel, dwdb_kernel = kernels
    dx_kernel[(m,)](dx, dy, partials[0], partials[1], x, weight, mean, rstd, locks, x.stride(0),
                    n, GROUP_SIZE_M=group, BLOCK_SIZE=cfg["block"], num_warps=cfg["num_warps"])
    dwdb_kernel[(newt.cdiv(n, cfg["block_n"]),)](partials[0], partials[1], dw, db,
                                                 min(group, m), n, BLOCK_SIZE_M=cfg["block_m"],
                                                 BLOCK_SIZE_N=cfg["block_n"], num_warps=4)
    return dx, dw, db


class LayerNorm(torch.autograd.Function):
    """Layer norm over the last dim with newt's forward and backward kernels."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y, mean, rstd = layernorm(x2, weight, bias, eps)
        ctx.save_for_backward(x2, weight, mean, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = layernorm_backward(dy.reshape(x.shape).contiguous(), x, weight, mean, rstd)
        return dx.view(dy.shape), dw, db, None


def reference_backward(dy, x, w, b, eps=1e-5):
    """(dx, dw, db) from torch autograd, in fp32."""
    xf, wf, bf = (t.detach().float().requires_grad_() for t in (x, w, b))
    y = torch.nn.functional.layer_norm(xf, (x.shape[-1],), wf, bf, eps)
    return torch.autograd.grad(y, (xf, wf, bf), dy.float())


def check_backward_result(got, expected, what):
    """dx, dw, db against fp32 references, each to 1% of its largest magnitude (dW and dB are
    sums over every row: an absolute bound would grow with the row count)."""
    for name, a, e in zip(("dx", "dw", "db"), got, expected):
        scale = float(e.abs().max())
        assert_close(a.float(), e, atol=1e-2 * scale, rtol=1e-2, msg=f"{what} {name}")


def check_backward(device, small=True):
    # (rows, columns, groups or None for backward_config's): groups shared by several rows
    cases = ([(5, 64, 2), (37, 1151, 8)] if small else
             [(37, 1151, 8), (4096, 1500, None), (32768, 4096, None)])
    for m, n, group in cases:
        x = (torch.randn(m, n, device=device) * 2 + 0.5).half()
        w = torch.randn(n, device=device).half()
        b = torch.randn(n, device=device).half()
        dy = torch.randn(m, n, device=device).half()
        _, mean, rstd = layernorm(x, w, b)
        cfg = dict(backward_config(m, n), **({"group": group} if group else {}))
        outs = [torch.full_like(t, float("nan")) for t in (x, w, w)]
        parts = [torch.full((cfg["group"], n), float("nan"), device=device) for _ in "wb"]
        got = layernorm_backward(dy, x, w, mean, rstd, config=cfg, dx=outs[0], dw=outs[1],
                                 db=outs[2], partials=parts)
        check_backward_result(got, reference_backward(dy, x, w, b), f"layernorm bwd {m}x{n}")
    return cases[-1][:2]


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
    device = run_example(argv, check, lambda s: f"layernorm forward: matches torch (up to "
                         f"{s[0]}x{s[1]}, fp16, N = 1,500 included)", timed)
    m, n = check_backward(device, small=device == "cpu" or "--small" in argv)
    # (worded apart from the forward's line, which scripts/gpu_check.sh picks by its words)
    print(f"layernorm backward: dx, dw and db agree with torch autograd (up to {m}x{n}, fp16)")


if __name__ == "__main__":
    main()
