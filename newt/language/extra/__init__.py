"""`newt.language.extra`: Triton's `tl.extra` namespace. `extra.libdevice` (also importable as
`extra.cuda.libdevice`) holds CUDA's math library under libdevice's names."""
from . import cuda, libdevice  # noqa: F401
