"""Shared-memory regions: where each piece of a kernel's dynamic shared memory lives.

Where it sits: in the IR. The shared-memory pass (newt/passes/smem.py, with the tensor-core
regions of newt/passes/tc/regions.py) places every region and records it; codegen reads the
offsets and allocates nothing. The kernel's dynamic shared memory (`nt_smem`, of
CompiledKernel.shared_bytes bytes, printed as the function's `smem_bytes`) is laid out as

    the scratch arena    at 0: the ping-pong regions of the ops that exchange data between
                         threads (reductions, scans, sorts, ...), 16-byte aligned offsets
    the dot area         tiles of synchronous dots, staged A tiles and accumulator staging,
                         shared by liveness, from `anchor` (the arena's end) rounded up to
                         1024 bytes at run time (wgmma's 128-byte swizzle needs it)
    own regions          rings (with their mbarriers), attention's ring barriers, an
                         accumulator staged in, fma operands, persistent C panels: one each,
                         from its own anchor rounded up to 1024 at run time

Each 1024-aligned window reserves 1024 bytes of slack for that run-time rounding.

The facts: op.attrs["smem"] (the op's region: a scratch user's, a dot's tiles or ring, a ring
load's ring, an epilogue's staging, ...), op.attrs["smem_a"] (a dot's staged A tile),
op.attrs["smem_acc"] (a dot's accumulator staged in) and fn.attrs["smem"] (every region, an
SmemPlan, with the total).
"""
from __future__ import annotations

import dataclasses

SCRATCH, AREA, OWN = "arena", "area", "own"


@dataclasses.dataclass(frozen=True)
class SmemRegion:
    what: str            # "scratch", "tiles", "staged_a", "acc_out", "ring", "ring_bars",
    #                      "acc_in", "fma", "panels"
    where: str           # SCRATCH, AREA or OWN (module docstring)
    anchor: int          # the window's first byte before run-time rounding (0 for SCRATCH)
    offset: int          # bytes from the (rounded) anchor
    nbytes: int

    @property
    def end(self) -> int:
        """The last byte the region may reach, plus one (the rounding slack included)."""
        return self.anchor + self.offset + self.nbytes + (0 if self.where == SCRATCH else 1024)

    def __str__(self):
        at = str(self.offset) if self.where == SCRATCH else \
            f"^{self.anchor}" + (f"+{self.offset}" if self.offset else "")
        return f"{self.what}[{self.nbytes}]@{at}"


@dataclasses.dataclass(frozen=True)
class SmemPlan:
    """Every region of the kernel, in placement order, and the bytes the launch requests."""
    regions: tuple
    nbytes: int

    def __str__(self):
        return "[" + ", ".join(str(r) for r in dict.fromkeys(self.regions)) + "]"
