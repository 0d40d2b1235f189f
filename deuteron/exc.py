"""`deuteron.exc` (Helion's `helion.exc`): the error deuteron raises and the warning classes
Helion's programs name in `@kernel(ignore_warnings=[...])`.

deuteron reports what it cannot compile with one error, TraceError (errors.py), at the user's
line; Helion has one class per cause. The warning classes exist so that such a keyword
argument evaluates: deuteron issues none of these warnings, so ignoring them changes nothing.
"""
from __future__ import annotations

from .errors import TraceError  # noqa: F401


class BaseWarning(UserWarning):
    """What Helion's kernel warnings derive from."""


class TensorOperationInWrapper(BaseWarning):
    """Helion: a torch operation in host code outside the tile loops (runs eagerly there)."""


class BlockSizeIgnoredInInterpretMode(BaseWarning):
    """Helion: a block size that the interpreter does not use."""


class TiledKMatmulAccumulationWarning(BaseWarning):
    """Helion: a matmul accumulated over a tiled K outside an accumulator."""


class WrongDevice(BaseWarning):
    """Helion: a tensor created on another device than the kernel's."""


__all__ = ["TraceError", "BaseWarning", "TensorOperationInWrapper",
           "BlockSizeIgnoredInInterpretMode", "TiledKMatmulAccumulationWarning", "WrongDevice"]
