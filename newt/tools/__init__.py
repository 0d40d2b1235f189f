"""Host-side helpers of Triton's `triton.tools`, under newt's names (tensor_descriptor.py)."""
