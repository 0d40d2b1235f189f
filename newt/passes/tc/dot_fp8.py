"""fp8 dots: native 8-bit wgmma where the hardware can take the operands, fp16 otherwise.

Where it sits: the `fp8_dots` entry of PASSES (newt/passes/__init__.py), after loop-carried
pointer blocks were rewritten as `I + splat(offset)` (so their strides can be read) and before
rings are planned (a cast between a load and its dot keeps the load out of the ring).
Consumes `dot` ops whose two operands are fp8 blocks (the frontend keeps them: any pair of
float8e4nv / float8e5, as Triton accepts); afterwards every dot either has fp8 operands and a
plan on the wgmma engine (kinds e4m3 / e5m2 / e4m3_e5m2 / e5m2_e4m3, newt/passes/tc/dot.py), or
fp16 operands made by a `cast` in front of it.

Why the conditions: wgmma.mma_async reads 8-bit operands from shared memory only K-major (no
transpose operand for them, PTX ISA "wgmma: matrix descriptor"). A's tile is always [M][K]; B's
is [N][K], which TMA fills straight from memory when B's pointer block is contiguous along K
(the tutorial's `b.T`, or weights stored [N, K]) -- dot_tma.py's transposed box. A B contiguous
along N would have to be transposed byte by byte by the cp.async ring on its way to shared
memory; measured on the H200 (2026-11-30, fp8 4096^3, B row-major) that runs at 50-95 TFLOP/s
over four configs, the fp16 path (one cast per element in registers, ldmatrix.trans /
transposed wgmma B) at 61 in the one config measured: no faster, so fp16 stays. (Triton reaches
95-281 there; int8, which has no fp16 path, takes the transposed copies: 155 TOPS at 8192^3.)
Other archs have no 8-bit wgmma (mma.sync on fp8 exists from sm_89 but is not built): fp16
there too. Every fp8 value is exact in fp16, so both paths compute the same products; the
native one accumulates them with the tensor cores' fp8 precision, as Triton's does.
"""
from __future__ import annotations

from ... import dtypes as D
from ...ir.builder import type_like
from ...ir.core import Op
from ...ir.pointers import k_contiguous
from ...ir.schedule import plan_dot, uses_wgmma


def _is_fp8_dot(op) -> bool:
    return op.opcode == "dot" and all(v.dtype.is_fp8() for v in op.operands[:2])


def _loaded(v):
    """The `load` op that defines v, or None."""
    o = v.owner
    return o if isinstance(o, Op) and o.opcode == "load" else None


def native(op, options) -> tuple[bool, str]:
    """(whether fp8 dot `op` runs on 8-bit wgmma, why not)."""
    plan = plan_dot(op, options.num_threads)
    if not uses_wgmma(options.arch, options.num_threads, plan):
        return False, "8-bit wgmma needs sm_90a, num_warps % 4 == 0 and a tensor-core shape"
    a, b = (_loaded(v) for v in op.operands[:2])
    if a is None or b is None:
        return False, "an operand is not loaded from memory"
    if not k_contiguous(b.operands[0]):
        return False, "B is not contiguous along K"
    return True, ""


def lower_fp8_dots(fn, options):
    for op in [o for o in fn.walk() if _is_fp8_dot(o)]:
        ok, why = native(op, options)
        if ok:       # the plan (an fp8 kind) is made where every dot's is (passes/tc/dot.py)
            continue
        op.attrs["fp8_via_fp16"] = why      # printed: why the dot runs on fp16 tensor cores
        blk = op.parent
        for i in (0, 1):
            v = op.operands[i]
            c = Op("cast", [v], [type_like(v.type, D.float16)],
                   {"bitcast": False, "fp_rounding": "rtne"}, (), op.loc)
            c.parent = blk
            blk.ops.insert(blk.ops.index(op), c)
            op.operands[i] = c.result
    return fn
