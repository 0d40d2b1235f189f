"""Scratch-arena needs of the ops that move elements across threads through shared memory:
gather, sort, scan_fn (scans and reductions with a combine function) and histogram
(ops.py). The shared-memory pass (smem.py) asks `plan_scratch` for their bytes, and places them
in its ping-pong regions like every other scratch user.

Each element is held at its register width (fp16/bf16 as fp32, 64-bit types at 8 bytes); a
scan_fn with several operands gets one part per operand, at the byte offsets recorded in
op.attrs["parts"].
"""
from __future__ import annotations

SCRATCH_OPS = ("gather", "sort", "scan_fn", "histogram")


def elem_bytes(dt) -> int:
    return 8 if dt.bits == 64 or dt.is_ptr() else 4


def plan_scratch(op) -> int:
    """Bytes of scratch `op` needs (recording op.attrs["parts"] for scan_fn)."""
    c = op.opcode
    if c in ("gather", "sort"):
        x = op.operands[0]
        return x.type.numel * elem_bytes(x.dtype)
    if c == "histogram":
        return op.attrs["num_bins"] * 4
    if c == "scan_fn":
        parts, off = [], 0
        for x in op.operands:
            parts.append(off)
            off += -(-x.type.numel * elem_bytes(x.dtype) // 8) * 8
        op.attrs["parts"] = tuple(parts)
        return off
    return 0
