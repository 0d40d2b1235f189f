"""`newt._C`: the names Triton's programs import from Triton's compiled extension.

Sits beside the pipeline, not in it. Triton ships a C++ extension, `triton._C.libtriton`, and its
tutorials reach into it for a vendor-library baseline (`from triton._C.libtriton import nvidia`,
then `nvidia.cublas.CublasLt(workspace)`). newt has no compiled extension; this package holds
plain-Python stand-ins for the few names such programs use (libtriton.py), so that they run
with their imports pointed at newt.
"""
