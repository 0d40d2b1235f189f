"""`TensorDescriptor`: a tensor and the block shape a kernel reads and writes it in.

The host half of tensor descriptors (Triton's `triton.tools.tensor_descriptor`). Passed as a
kernel argument, a descriptor becomes several parameters of the compiled kernel: the base
pointer, then each dimension's size and stride (ints, specialized like any int argument, so a
stride of 1 is compiled as the constant 1); the block shape is part of the specialization key.
Inside the kernel it is the same value `nl.make_tensor_descriptor` returns (frontend/
descriptors.py lowers its loads and stores to masked pointer accesses).

The fields stay mutable, as in Triton: autotuning pre-hooks set `block_shape` per config.
"""
from __future__ import annotations

import dataclasses
from typing import Any, List


@dataclasses.dataclass
class TensorDescriptor:
    """`base` (a torch tensor), `shape` and `strides` (ints, in elements), `block_shape` (the
    powers of two each load and store moves), `padding` ("zero" or "nan": what out-of-bounds
    elements read as)."""
    base: Any
    shape: List[int]
    strides: List[int]
    block_shape: List[int]
    padding: str = "zero"

    def __post_init__(self):
        rank = len(self.shape)
        if not 1 <= rank <= 5:
            raise ValueError(f"a tensor descriptor has 1 to 5 dimensions, got shape {self.shape}")
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"shape {list(self.shape)}, strides {list(self.strides)} and "
                             f"block_shape {list(self.block_shape)} must have one entry per "
                             "dimension")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"padding must be 'zero' or 'nan', got {self.padding!r}")

    @staticmethod
    def from_tensor(tensor, block_shape, padding="zero") -> "TensorDescriptor":
        """The descriptor of a whole tensor: its shape and strides."""
        return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()),
                                list(block_shape), padding)
