"""Typed block IR (see core.py for the shape, ops.py for the opcode table)."""
from .core import (Block, BlockType, Function, Loc, Op, Param, ScalarType, Value,  # noqa: F401
                   is_block)
from .ops import BINARY_OPS, COMPARISONS, OPCODES, REDUCE_KINDS, UNARY_OPS  # noqa: F401
from .builder import Builder  # noqa: F401,E402
from .printer import format_function  # noqa: F401,E402
from .verifier import VerifierError, verify  # noqa: F401,E402
