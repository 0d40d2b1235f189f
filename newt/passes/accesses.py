"""Access forms: how each block load and store is cut into vector accesses, and how each of
its groups is guarded and addressed. codegen/memory.py emits what this pass records as
`op.attrs["access"]`: an Access (printed as e.g. `access=v4x16B tested index`), or "scalar"
for one predicated access per element. Every block access gets one; codegen decides nothing.

Per group of `vec` consecutive slots (layouts.py) an access is one or more vector loads or
stores of `width` bytes. Two choices remain per access:

    groups  static   the run facts (runs.py) prove every group consecutive, aligned to the
                     width and under one mask bit: one predicated vector access, no test
            tested   each group tests at run time that its pointers are consecutive and
                     aligned and its mask bits set, and takes a predicated scalar path if not
    addr    offsets  the block is contiguous as a whole: every group's pointer is one base
                     plus a constant, which the instruction takes as an immediate offset
            index    every group's pointer comes from its own index math

The rule, from benchmarks/lab/memory_variants.py on the H200 (2026-12-02, three calls, 7
interleaved rounds; docs/results/2026-12-02-1630-h200.md):
  - Masked groups of 32-bit or wider elements are tested and indexed even when the facts
    prove them static. The softmax (fp32) reads 1% faster that way (4,104 against 4,064
    GB/s; Triton 4,082), the loads and the stores each giving half of it; the vector add is
    level. Their scalar path is at most four whole-register accesses, and it costs the
    softmax no register.
  - Narrower elements keep the static form and immediate offsets. A 16-byte group of fp16 is
    eight scalar accesses packed into words; that path costs the layernorm 7 registers, one
    CTA per SM and 8% (3,706 against 4,037), and without immediate offsets it reads 0.5% less.
  - Unmasked groups proved static stay one plain vector access: nothing to branch on.

A block `atomic_add` whose old values are never read (split-K's `atomic_add(c_ptrs, acc)`)
becomes vector reductions on sm_90 (PTX `red.global.add.v2/.v4.f32`, `.v2/.v4/.v8.f16` and
`.bf16`, sm_90 and PTX ISA 8.1) when the same run facts prove each group consecutive, aligned
to the vector and under one mask bit: `op.attrs["red"]` (a Red, printed `red=v4.f32`), else
`red_why` saying which fact is missing, and codegen/atomics.py keeps one scalar atomic per
element. A vector reduction's elements are not ordered among themselves; the atomic's
acquire / release semantics come from one `fence.acq_rel` before the thread's reductions
(release) and one after them (acquire) instead of one per element: a tile's elements were
never ordered among each other (Triton does not order them either).
"""
from __future__ import annotations

import dataclasses

from ..ir.core import is_block
from ..ir.pointers import static_groups



@dataclasses.dataclass(frozen=True)
class Access:
    vec: int          # slots per group
    width: int        # bytes per vector access
    per: int          # vector accesses per group
    groups: str       # "static" or "tested"
    addr: str         # "offsets" or "index"

    def __str__(self):
        return f"v{self.vec}x{self.width}B {self.groups} {self.addr}"


def vector_plan(op, lay, dt):
    """(vec, access width in bytes, accesses per group), or None for scalar-only access.

    vec is the layout's group, except for an index-computable pointer whose proven run length
    (attrs contig, e.g. the 4 columns of a [256, 4] block) is shorter: its accesses are that
    long, as in Triton, rather than tested element by element at run time for a longer run."""
    size = max(1, dt.bits // 8)
    vec = lay.vec
    ptr = op.operands[0]
    contig = ptr.attrs.get("contig", 1)
    if ptr.attrs.get("icomp") and 1 < contig < vec:
        vec = contig
    if vec < 2 or op.attrs.get("volatile"):
        return None
    width = min(16, vec * size)
    return vec, width, vec * size // width


def choose(kind, ptr, mask, lay, dt, plan) -> Access:
    """The rule (module docstring) for one access with vector plan `plan`."""
    from ..ir.layouts import CyclicLayout
    vec, width, per = plan
    size = max(1, dt.bits // 8)
    static = static_groups(ptr, mask, vec, width, size)
    whole = ptr.attrs.get("contig", 1) >= lay.numel and isinstance(lay, CyclicLayout)
    wide = size >= 4 and mask is not None
    groups = "static" if static and not wide else "tested"
    addr = "offsets" if whole and not wide else "index"
    return Access(vec, width, per, groups, addr)


# elements per vector reduction (PTX ISA, red: .v2/.v4 of .f32, .v2/.v4/.v8 of 16-bit floats)
RED_WIDEST = {"float32": 4, "float16": 8, "bfloat16": 8}
RED_TYPE = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


@dataclasses.dataclass(frozen=True)
class Red:
    vec: int          # slots per group (the layout's)
    n: int            # elements per red instruction (vec is a multiple)
    ptx: str          # the element type's PTX name

    def __str__(self):
        return f"v{self.n}.{self.ptx}"


def plan_red(op, options, uses):
    """(Red or None, why not) of a block atomic: the module docstring's rule."""
    if op.attrs.get("kind") != "add" or not is_block(op.operands[0].type) or options.sm < 90:
        return None, ""
    r = op.result
    if uses.get(r.id):
        return None, "the old values are read"
    widest = RED_WIDEST.get(r.dtype.name)
    if widest is None:
        return None, f"no vector reduction of {r.dtype.name}"
    lay = r.attrs.get("layout")
    if lay is None or not hasattr(lay, "vec") or lay.vec < 2:
        return None, "the layout gives each thread one element of a run"
    n = min(lay.vec, widest)
    size = r.dtype.bits // 8
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    if not static_groups(op.operands[0], mask, lay.vec, n * size, size):
        return None, (f"the pointers are not proven consecutive and {n * size}-byte aligned "
                      f"under one mask bit per group of {lay.vec}")
    return Red(lay.vec, n, RED_TYPE[r.dtype.name]), ""


def plan_accesses(fn, options):
    uses = None
    for op in fn.walk():
        if op.opcode == "atomic":
            uses = uses if uses is not None else fn.body.uses()
            red, why = plan_red(op, options, uses)
            if red is not None:
                op.attrs["red"] = red
            elif why:
                op.attrs["red_why"] = why
            continue
        if op.opcode not in ("load", "store") or not is_block(op.operands[0].type):
            continue
        ptr = op.operands[0]
        if op.opcode == "load":
            dt, lay = op.results[0].dtype, op.results[0].attrs.get("layout")
            mask = op.operands[1] if op.attrs.get("has_mask") else None
        else:
            dt, lay = op.operands[1].dtype, ptr.attrs.get("layout")
            mask = op.operands[2] if op.attrs.get("has_mask") else None
        if lay is None or not hasattr(lay, "vec"):
            continue                       # taken by another path (a dot's ring, TMA)
        plan = vector_plan(op, lay, dt)
        # "scalar": one predicated access per element (volatile, or groups of one slot)
        op.attrs["access"] = "scalar" if plan is None else choose(op.opcode, ptr, mask, lay,
                                                                   dt, plan)
    return fn
