"""`newt._C.libtriton`: the `nvidia` namespace of Triton's extension, as programs use it.

Only `nvidia.cublas.CublasLt` (blas.py) is offered: the vendor GEMM that tutorials compare
their kernels against. Nothing in newt's own pipeline imports this module.
"""
from __future__ import annotations

import types

from . import blas

nvidia = types.SimpleNamespace(cublas=types.SimpleNamespace(CublasLt=blas.CublasLt))
"""`nvidia.cublas.CublasLt(workspace)`: see blas.CublasLt."""
