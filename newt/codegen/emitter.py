"""The emitter: turns decided IR (after newt.passes) into the text of one CUDA C++ kernel.

It owns naming, C types, indentation and op dispatch; each hardware concern lives in its own
module (elementwise.py, shapes.py, memory.py, reduce.py, control.py, atomics.py, debug.py,
libdevice.py, inline_asm.py, gather.py, sort.py, scan_fn.py)
that registers handlers with `@handles("opcode", ...)`. A handler reads layouts and plans
from the IR (decided by the passes) and writes lines; it makes no decisions of its own.

Values in C:
  scalar (uniform)   a local `T name`
  block              a register array `T name[nslots]` in the value's layout; element work is a
                     `#pragma unroll` loop over slots with constant bounds, so arrays are only
                     indexed by constants after unrolling (no local memory)
  splat block        no array: every slot reads the scalar (`inline`)
  lazy block         no array: a per-slot expression over other arrays, evaluated at each use
                     (`lazy`; a loaded block whose registers are its packed storage bits, so
                     the conversion to its register type happens where the value is used)
"""
from __future__ import annotations

import contextlib
import re

from ..errors import CompilationError
from ..ir.core import Value, is_block

HANDLERS: dict = {}


def handles(*opcodes):
    """Marks a function as the handler of `opcodes`; `register` (called once, by
    codegen/__init__.py) puts the marked functions of each listed module in the table."""
    def deco(f):
        f.newt_opcodes = opcodes
        return f
    return deco


def register(*modules):
    """The handler table from the handlers of `modules` (listed in codegen/__init__.py)."""
    for m in modules:
        for f in vars(m).values():
            for c in getattr(f, "newt_opcodes", ()):
                assert HANDLERS.get(c, f) is f, f"two handlers of {c}"
                HANDLERS[c] = f


_REG_TYPE = {"float16": "float", "bfloat16": "float", "float32": "float", "float64": "double",
             "float8e4nv": "float", "float8e5": "float",
             "int1": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
             "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64"}
_STORAGE = dict(_REG_TYPE, float16="u16", bfloat16="u16", int1="u8", float8e4nv="u8",
                float8e5="u8")


def reg_type(dt, wide=False) -> str:
    """C type of a value of `dt` in registers (`wide`: widened to 64 bits by the index pass)."""
    if dt.is_ptr():
        return storage_type(dt.element_ty) + "*"
    if wide:
        return "u64" if dt.kind == "uint" else "i64"
    return _REG_TYPE[dt.name]


def storage_type(dt) -> str:
    """C type of one element of `dt` in global memory."""
    return _STORAGE[dt.name]


class Emitter:
    def __init__(self, fn, options):
        self.fn, self.options = fn, options
        self.T = options.num_threads
        self.lines: list[str] = []
        self.ind = 1
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.tmp = 0
        self.helpers: dict[str, str] = {}   # device functions emitted once (atomics)
        self.inline: dict[int, str] = {}    # block values that are one scalar in every slot
        self.lazy: dict[int, object] = {}   # block values given as slot -> C expression
        # 16-bit values staged through shared memory whose storage bits are also held in an
        # array (codegen/tc/dot_epilogue.py): value id -> that array, for stores of the value
        self.staged_bits: dict[int, str] = {}
        # values staged in the box format for a TMA store (codegen/tc/store_tma.py): value id ->
        # the name of the tile's shared-space address
        self.staged_tiles: dict[int, str] = {}
        self._users = None
        self._needed: dict[int, bool] = {}
        # program_id(0) as a C expression when it is not blockIdx.x (codegen/tc/persistent.py)
        self.pid_x: str | None = None
        self.last_loc = None   # (file, line) of the last source comment (Options.debug)
        # the C names codegen declared for a plan object of the IR (a ring, a persistent plan,
        # a prefetch), by id: codegen's memory of this compile, kept out of the IR
        self.memo: dict[int, dict] = {}
        # ids of the stores marked dot_store (passes/tc/dot_stores.py) once their dot_acc_out
        # was emitted: handled by dot_epilogue.py's `dot_store` from then on
        self.claims: set[int] = set()

    def state(self, obj) -> dict:
        """This compile's C names for the plan object `obj` (see `memo`)."""
        return self.memo.setdefault(id(obj), {})

    # ------------------------------------------------------------------ text
    def emit(self, line: str):
        self.lines.append("  " * self.ind + line)

    @contextlib.contextmanager
    def scope(self, head: str, tail: str = "}"):
        self.emit(head + " {")
        self.ind += 1
        try:
            yield
        finally:
            self.ind -= 1
            self.emit(tail)

    @contextlib.contextmanager
    def slots(self, n: int, var: str = "s"):
        """A loop over slots 0..n-1 with a constant bound, fully unrolled by NVRTC, so arrays
        are indexed by constants only (no local memory). Emitting the loop rather than n
        copies measured cheaper to compile."""
        self.emit("#pragma unroll")
        with self.scope(f"for (int {var} = 0; {var} < {n}; ++{var})"):
            yield var

    # ------------------------------------------------------------------ names and types
    def fresh(self, hint: str) -> str:
        self.tmp += 1
        return f"{hint}{self.tmp}"

    def name(self, v: Value) -> str:
        n = self.names.get(v.id)
        if n is None:
            base = re.sub(r"\W", "_", v.name) if v.name else "v"
            if base[0].isdigit():
                base = "v" + base
            n = f"{base}_{len(self.names)}"
            self.names[v.id] = n
        return n

    def alias(self, v: Value, other: Value):
        """`v` is held in the same C variable as `other` (free reshapes, loop results)."""
        if other.id in self.inline:
            self.inline[v.id] = self.inline[other.id]
        if other.id in self.lazy:
            self.lazy[v.id] = self.lazy[other.id]
        self.names[v.id] = self.name(other)

    def ctype(self, v: Value) -> str:
        return reg_type(v.dtype, v.attrs.get("wide", False))

    def layout(self, v: Value):
        return v.attrs["layout"]

    def nslots(self, v: Value) -> int:
        return v.attrs["layout"].nslots

    def declare(self, v: Value, init: str | None = None) -> str:
        """Declare the C variable of `v` (an array for blocks) and return its name."""
        n = self.name(v)
        if is_block(v.type):
            self.emit(f"{self.ctype(v)} {n}[{self.nslots(v)}];")
        elif init is not None:
            self.emit(f"{self.ctype(v)} {n} = {init};")
        else:
            self.emit(f"{self.ctype(v)} {n};")
        return n

    # ------------------------------------------------------------------ operand access
    def at(self, v: Value, s, lay=None) -> str:
        """C expression of operand `v` at slot `s` of layout `lay` (default: v's own layout).
        Index-computable values in another layout are recomputed where they are needed."""
        if not is_block(v.type):
            return self.name(v)
        if v.id in self.inline:
            return self.inline[v.id]
        own = v.attrs["layout"]
        if lay is None or lay == own:
            lazy = self.lazy.get(v.id)
            return lazy(s) if lazy is not None else f"{self.name(v)}[{s}]"
        if v.attrs.get("icomp"):
            from .shapes import value_at
            from ..ir.layouts import coords_of
            return value_at(self, v, coords_of(lay.flat("tid", s), v.shape))
        raise self.error(v.owner, "internal: operand layout differs and no conversion was planned")

    def users(self, v: Value) -> list:
        """The ops that use v as an operand (anywhere in the function)."""
        if self._users is None:
            self._users = {}
            for op in self.fn.walk():
                for o in op.operands:
                    self._users.setdefault(o.id, []).append(op)
        return self._users.get(v.id, [])

    def valid(self, v: Value, s) -> str | None:
        return v.attrs["layout"].valid("tid", s) if is_block(v.type) else None

    def error(self, op, msg) -> CompilationError:
        return CompilationError(msg, getattr(op, "loc", None))

    # ------------------------------------------------------------------ ops
    def block(self, block):
        for op in block.ops:
            self.op(op)

    def op(self, op):
        h = HANDLERS.get("dot_store" if id(op) in self.claims else op.opcode)
        if h is None:
            raise self.error(op, f"codegen: op `{op.opcode}` is not supported")
        loc = op.loc
        if self.options.debug and loc is not None and (loc.file, loc.line) != self.last_loc:
            # NEWT_DEBUG: the Python line of the code below (a comment: the cubin is the same)
            self.last_loc = (loc.file, loc.line)
            text = loc.source_line.strip().replace("*/", "* /")
            self.emit(f"// {loc.file.rsplit('/', 1)[-1]}:{loc.line}" + (f": {text}" if text else ""))
        h(self, op)

    def elementwise(self, op, expr_fn):
        """Define op.result as expr_fn(slot) per slot (blocks) or once (scalars);
        expr_fn receives the slot variable (None for scalars)."""
        r = op.result
        if is_block(r.type):
            if not self.needs_array(r):
                return
            probe = expr_fn("s")
            for o in op.operands:   # a pure copy (e.g. fp16 -> fp32): share the operand's array
                if (is_block(o.type) and o.id not in self.inline and probe == self.at(o, "s")
                        and self.ctype(o) == self.ctype(r)
                        and o.attrs.get("layout") == r.attrs.get("layout")):
                    self.alias(r, o)
                    return
            n = self.declare(r)
            k = uniform_run(r)
            with self.slots(self.nslots(r)) as s:
                # a value the runs pass knows constant over each slot group (`cols < N` with
                # N divisible by 16) is computed at the group's first slot: NVRTC cannot prove
                # the group's vec compares equal, and a per-element mask costs 16 compares
                # plus predicate spills into a bit-packed register where the group needs one
                self.emit(f"{n}[{s}] = {expr_fn(f'({s}) - ({s}) % {k}' if k > 1 else s)};")
        else:
            self.declare(r, expr_fn(None))

    def needs_array(self, v: Value) -> bool:
        """Whether block v must be held in an array: false for an index-computable block
        whose every use evaluates it from its index math (a cheap pointer or mask operand
        of a load or store, a shape op that recomputes, another such block), so the kernel
        text holds no per-element pointer or mask arrays nobody reads."""
        if not v.attrs.get("icomp"):
            return True
        memo = self._needed
        if v.id not in memo:
            memo[v.id] = True                   # (cycles cannot occur; be safe anyway)
            memo[v.id] = any(self._use_needs(u, v) for u in self.users(v))
        return memo[v.id]

    _RECOMPUTING = {"binary", "unary", "cast", "select", "fma", "addptr"}

    def _use_needs(self, u, v) -> bool:
        c = "dot_store" if id(u) in self.claims else u.opcode
        if c in ("load", "store"):
            from .memory import recomputable
            return not recomputable(self, v)
        if c in ("broadcast", "reshape", "permute", "convert_layout"):
            how = u.attrs.get("movement", "smem")
            return how != "recompute" and (how != "none" or self.needs_array(u.results[0]))
        if c in self._RECOMPUTING and u.results[0].attrs.get("icomp"):
            r = u.results[0]
            return self.needs_array(r) and r.attrs.get("layout") == v.attrs.get("layout")
        return True

    def barrier(self):
        self.emit("__syncthreads();")

    def smem(self, op, ctype: str, offset_bytes: int = 0) -> str:
        """A typed pointer into the op's scratch region of the arena."""
        off = op.attrs["smem"].offset + offset_bytes
        return f"(({ctype}*)(nt_smem + {off}))"


def uniform_run(v: Value) -> int:
    """The number of consecutive slots of block `v` that hold one value by construction: the
    layout's vec when the runs pass (passes/runs.py) marks `v` constant over aligned runs of
    at least vec elements and the layout is the group-cyclic one, whose slot groups are
    aligned runs of vec consecutive elements; 1 otherwise."""
    from ..ir.layouts import CyclicLayout
    lay = v.attrs.get("layout")
    if not isinstance(lay, CyclicLayout) or lay.vec < 2:
        return 1
    return lay.vec if v.attrs.get("const", 1) >= lay.vec else 1
