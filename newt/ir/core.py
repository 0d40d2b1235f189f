"""The typed block IR: the contract between the frontend (which builds it) and passes/codegen
(which decide on it and print it as CUDA C++).

Shape of the IR:
  Function -> one Block of Ops; an Op has operands (Values), results (Values), attrs (a dict),
  regions (Blocks, for structured control flow) and a Loc pointing at the user's source.
  Every Value has a Type: ScalarType (one value, the same in every thread of the program) or
  BlockType (a block of elements spread across the threads).

Invariants the frontend guarantees (the verifier checks them):
  - Constexprs never appear: they are folded in Python by the frontend.
  - No implicit conversions: operands of elementwise ops have identical types. The frontend
    inserts `splat` (scalar -> block), `broadcast` (size-1 dims -> full), `reshape` (rank change)
    and `cast` ops explicitly, following Triton's promotion rules (newt/dtypes.py).
  - All control flow is structured (for / while / if with regions ending in `yield`) and uniform
    across the program, since conditions are scalars.

Passes may attach facts to values in `Value.attrs` (e.g. "layout", "vec", "wide_index") and to
ops in `Op.attrs`; the printer shows them, so every decision is visible in NEWT_DEBUG output.
The opcode table with each op's exact semantics is in ops.py.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Optional

from ..dtypes import dtype


# ----------------------------------------------------------------------------- types

@dataclasses.dataclass(frozen=True)
class ScalarType:
    dtype: dtype

    @property
    def shape(self) -> tuple:
        return ()

    @property
    def numel(self) -> int:
        return 1

    def __str__(self):
        return self.dtype.short


@dataclasses.dataclass(frozen=True)
class BlockType:
    dtype: dtype
    shape: tuple  # of positive ints (constexpr), row-major

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self):
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"


Type = ScalarType | BlockType


def is_block(t) -> bool:
    return isinstance(t, BlockType)


# ----------------------------------------------------------------------------- source locations

@dataclasses.dataclass(frozen=True)
class Loc:
    file: str
    line: int          # 1-based, in the file
    col: int           # 0-based
    source_line: str = ""
    func: str = ""

    def __str__(self):
        return f"{self.file}:{self.line}:{self.col}"


# ----------------------------------------------------------------------------- values, ops, blocks

_ids = itertools.count()


class Value:
    """An SSA value. `owner` is the Op that defines it, or the Block it is an argument of."""

    __slots__ = ("type", "owner", "index", "id", "name", "attrs")

    def __init__(self, type, owner=None, index: int = 0, name: str = ""):
        self.type = type
        self.owner = owner
        self.index = index
        self.id = next(_ids)
        self.name = name          # a readable hint for codegen (the user's variable name)
        self.attrs: dict = {}     # pass facts and user hints: "multiple_of", "max_contiguous", ...

    @property
    def dtype(self) -> dtype:
        return self.type.dtype

    @property
    def shape(self) -> tuple:
        return self.type.shape

    def __repr__(self):
        return f"%{self.id}:{self.type}"


class Op:
    __slots__ = ("opcode", "operands", "results", "attrs", "regions", "loc", "parent")

    def __init__(self, opcode: str, operands=(), result_types=(), attrs=None, regions=(),
                 loc: Optional[Loc] = None):
        self.opcode = opcode
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict = dict(attrs or {})
        self.regions: list[Block] = list(regions)
        self.loc = loc
        self.parent: Optional[Block] = None
        for r in self.regions:
            r.parent = self

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.opcode} has {len(self.results)} results"
        return self.results[0]

    def __repr__(self):
        return f"<Op {self.opcode} {self.attrs}>"


class Block:
    """A straight-line list of ops with block arguments (a loop body's induction variable and
    carried values, or a function's parameters)."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types=()):
        self.args: list[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: list[Op] = []
        self.parent: Optional[Op] = None

    def append(self, op: Op) -> Op:
        op.parent = self
        self.ops.append(op)
        return op

    def walk(self):
        """Every op in this block and, recursively, in its regions, in program order."""
        for op in self.ops:
            yield op
            for r in op.regions:
                yield from r.walk()

    def uses(self) -> dict:
        """value id -> the ops (in this block or nested in it) that read the value, in
        program order. A snapshot: passes that rewrite operands rebuild it."""
        out: dict[int, list] = {}
        for op in self.walk():
            for o in op.operands:
                out.setdefault(o.id, []).append(op)
        return out


@dataclasses.dataclass
class Param:
    """A runtime kernel parameter: what the launcher passes, in order."""
    name: str
    dtype: dtype              # pointer_type(...) for tensors
    index: int                # position among the Python function's parameters
    divisible_by_16: bool = False
    large: bool = False       # pointer to a tensor of >= 2**31 elements: offsets need 64 bits
    value: Optional[Value] = None


@dataclasses.dataclass
class Function:
    name: str
    params: list[Param]
    body: Block
    loc: Optional[Loc] = None
    attrs: dict = dataclasses.field(default_factory=dict)  # e.g. "num_warps", pass results

    def walk(self):
        return self.body.walk()

    def uses(self) -> dict:
        return self.body.uses()
