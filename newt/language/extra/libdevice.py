"""`from newt.language.extra import libdevice`: the same functions as
`newt.language.extra.cuda.libdevice` (the table and its rules are there)."""
from .cuda.libdevice import *  # noqa: F401,F403
from .cuda.libdevice import DTYPES, FUNCTIONS, TABLE, __all__, choose  # noqa: F401
