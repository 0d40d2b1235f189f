"""`newt._C.libtriton.nvidia.cublas.CublasLt`: the vendor GEMM baseline programs written for
Triton import (newt/_C/blas.py), against torch on odd sizes with NaN-poisoned outputs, on the
CPU and (skipped without one) on the GPU."""
import pytest
import torch

from conftest import HAS_CUDA

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA,
                                                                reason="no CUDA device"))]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn]


def _blas(device):
    from newt._C.libtriton import nvidia
    return nvidia.cublas.CublasLt(torch.empty(1 << 20, dtype=torch.uint8, device=device))


def _close(got, want):
    """`got` against the float64 product `want`, rounded to got's dtype: one rounding of the
    output (fp8's is 1/16 relative) plus the accumulation order."""
    rel = {torch.float8_e4m3fn: 0.13, torch.float16: 2e-3, torch.bfloat16: 1e-2,
           torch.float32: 1e-3}[got.dtype]
    err = (got.double() - want).abs()
    assert not got.double().isnan().any()
    assert (err <= rel * want.abs() + 0.05).all(), err.max()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mnk", [(37, 53, 29), (64, 32, 48)], ids=["odd", "by16"])
def test_matmul_is_a_times_b_transposed(device, dtype, mnk):
    M, N, K = mnk
    a = torch.randn(M, K, device=device).to(dtype)
    b = torch.randn(N, K, device=device).to(dtype)       # (N, K): the product is a @ b.T
    c = torch.full((M, N), float("nan"), device=device).to(dtype)
    _blas(device).matmul(a, b, c)
    _close(c, a.double() @ b.double().T)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e4m3fn], ids=str)
def test_gemm_adds_beta_c(device, dtype):
    M, N, K = 45, 19, 33
    a = torch.randn(M, K, device=device).to(dtype)
    b = torch.randn(N, K, device=device).to(dtype)
    c = torch.randn(M, N, device=device).half()
    d = torch.full((M, N), float("nan"), device=device).to(dtype)
    _blas(device).gemm(a, b, c, d, 0.75, -1.5)
    _close(d, 0.75 * (a.double() @ b.double().T) - 1.5 * c.double())


def test_checks_name_what_is_wrong():
    blas = _blas("cpu")
    a, b = torch.randn(8, 4).half(), torch.randn(6, 4).half()
    with pytest.raises(ValueError, match="does not give"):
        blas.matmul(a, b, torch.empty(6, 8).half())
    with pytest.raises(ValueError, match="dtypes must match"):
        blas.matmul(a, b.float(), torch.empty(8, 6).half())
    with pytest.raises(ValueError, match="unsupported dtype float64"):
        blas.matmul(a.double(), b.double(), torch.empty(8, 6).double())
    with pytest.raises(ValueError, match="c must be float16"):
        blas.gemm(a, b, torch.empty(8, 6), torch.empty(8, 6).half(), 1.0, 0.0)
