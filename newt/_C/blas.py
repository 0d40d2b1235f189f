"""`CublasLt`: the vendor GEMM baseline of Triton's `nvidia.cublas`, through torch.

Sits beside the pipeline: host code that compares a kernel against cuBLAS. Triton binds
cuBLASLt itself; newt calls torch's matrix product, which on a CUDA device is cuBLAS (cuBLASLt
for fp8, through `torch._scaled_mm`), so the numbers a program times are cuBLAS's. The calls and
their checks are Triton's:

    blas = CublasLt(workspace)          # workspace: a uint8 tensor (kept; torch has its own)
    blas.matmul(a, b, c)                # c = a @ b.T          a (M, K), b (N, K), c (M, N)
    blas.gemm(a, b, c, d, alpha, beta)  # d = alpha * a @ b.T + beta * c   (c float16)

a, b and the output share one dtype among float16, bfloat16, float32 and float8_e4m3fn.
Differences from Triton's: tensors on the CPU work too (the interpreter's programs); fp8 on the
CPU, or with a size that is not a multiple of 16 (which cuBLASLt's fp8 GEMM needs), is
multiplied in float32 and rounded once; float32 follows torch's TF32 setting
(`torch.backends.cuda.matmul.allow_tf32`) where Triton's always computes in TF32.
"""
from __future__ import annotations

DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn")


def _name(t) -> str:
    return str(t.dtype).rsplit(".", 1)[-1]


def _check(a, b, out, what: str):
    if a.dim() != 2 or b.dim() != 2 or out.dim() != 2:
        raise ValueError(f"cublasLt.{what}: operands must be 2-D, got {tuple(a.shape)}, "
                         f"{tuple(b.shape)}, {tuple(out.shape)}")
    if not (a.dtype == b.dtype == out.dtype):
        raise ValueError(f"cublasLt.{what}: dtypes must match, got {_name(a)}, {_name(b)}, "
                         f"{_name(out)}")
    if _name(a) not in DTYPES:
        raise ValueError(f"cublasLt.{what}: unsupported dtype {_name(a)} (one of {DTYPES})")
    (m, k), (n, kb) = a.shape, b.shape
    if k != kb or tuple(out.shape) != (m, n):
        raise ValueError(f"cublasLt.{what}: a {tuple(a.shape)} @ b.T {(kb, n)} does not give "
                         f"{tuple(out.shape)} (b is (N, K))")


def _product(a, b, out_dtype):
    """a @ b.T in `out_dtype` (fp32 accumulation)."""
    import torch
    if a.dtype == torch.float8_e4m3fn:
        if a.is_cuda and not (a.shape[0] % 16 or b.shape[0] % 16 or a.shape[1] % 16):
            one = torch.ones((), device=a.device, dtype=torch.float32)
            # b.T of a row-major (N, K) is the column-major operand _scaled_mm wants
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=out_dtype)
        return (a.float() @ b.float().t()).to(out_dtype)
    return torch.mm(a, b.t()).to(out_dtype)


class CublasLt:
    """A GEMM handle; `workspace` is a tensor of scratch bytes, kept for Triton's signature."""

    def __init__(self, workspace):
        self.workspace = workspace

    def matmul(self, a, b, c):
        """c = a @ b.T, written into c: a (M, K), b (N, K), c (M, N), one dtype."""
        _check(a, b, c, "matmul")
        c.copy_(_product(a, b, c.dtype))

    def gemm(self, a, b, c, d, alpha: float, beta: float):
        """d = alpha * (a @ b.T) + beta * c, written into d; c is float16, shaped like d."""
        import torch
        _check(a, b, d, "gemm")
        if c.dtype != torch.float16:
            raise ValueError(f"cublasLt.gemm: c must be float16, got {_name(c)}")
        if c.shape != d.shape:
            raise ValueError(f"cublasLt.gemm: c {tuple(c.shape)} and d {tuple(d.shape)} differ")
        acc = _product(a, b, torch.float32)
        d.copy_((alpha * acc + beta * c.float()).to(d.dtype))
