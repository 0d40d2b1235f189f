"""`newt.language.extra.cuda`: the CUDA-specific extras (`libdevice`)."""
from . import libdevice  # noqa: F401
