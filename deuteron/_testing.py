"""`deuteron._testing`: the same names as deuteron.testing, under the module name Helion's
examples import them from (`from helion._testing import run_example, DEVICE`), so that such a
program runs on deuteron with `helion` replaced by `deuteron` in its imports and nothing else.
deuteron.testing is the public module; this one only re-exports it."""
from .testing import (  # noqa: F401
    DEVICE, HALF_DTYPE, LONG_INT_TYPE, code_and_output, run_example,
)

__all__ = ["DEVICE", "HALF_DTYPE", "LONG_INT_TYPE", "run_example", "code_and_output"]
