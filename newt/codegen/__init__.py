"""Codegen: decided IR (after newt.passes) -> the CUDA C++ text of one kernel.

    generate(fn, options) -> (source, entry_name)

The kernel is `extern "C" __global__ void __launch_bounds__(T) name(params)`, with one
parameter per runtime Param (in order), blockIdx.{x,y,z} as program ids, 32*num_warps threads
and one dynamic shared memory `nt_smem` (every region placed by passes/smem.py:
newt/ir/shared_memory.py). One module per
hardware concern holds op handlers (marked `@handles`); the `register` call below lists them
all, so the handler table does not depend on which modules happen to be imported.

The tensor-core ops: `dot` (dot.py), the ring's loads (dot_ring.py), tile loads and staged A
(dot_loads.py), row statistics in the fragment (dot_rows.py), the accumulator's way out
(dot_epilogue.py, store_tma.py). They read the plans the passes recorded (newt/ir/schedule.py)
and the layouts (newt/ir/layouts.py); they never import newt/passes.
"""
from __future__ import annotations

from . import (atomics, control, debug, elementwise, gather, inline_asm, libdevice, memory, reduce,
               scan_fn, shapes, sort)
from .tc import dot, dot_epilogue, dot_loads, dot_ring, dot_rows, store_tma
from .emitter import Emitter, register
from .header import HEADER
from ..ir.shared_memory import OWN

# every op handler, by module (each marks its functions with @handles)
register(atomics, control, debug, elementwise, memory, reduce, shapes,
         gather, inline_asm, libdevice, scan_fn, sort,
         dot, dot_ring, dot_loads, dot_rows, dot_epilogue, store_tma)


def generate(fn, options) -> tuple[str, str]:
    em = Emitter(fn, options)
    eq1 = fn.attrs.get("equal_to_1", ())   # params compiled as the constant 1, not passed
    params = []
    for p in fn.params:
        if p.value is None or p.name in eq1:
            continue
        params.append(f"{em.ctype(p.value)} {em.name(p.value)}")
    em.emit("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;")
    em.emit("(void)lane; (void)warp;")
    n_maps = len(fn.attrs.get("tma_maps", ()))
    if n_maps:   # first thing: the descriptor fetch overlaps the kernel's index math
        em.emit("if (tid == 0) { " + " ".join(f"newt_tma_prefetch(&nt_tmap{k});"
                                              for k in range(n_maps)) + " }")
    smem = fn.attrs.get("smem")      # (regions of their own declare the name they use)
    if smem is not None and any(r.where != OWN for r in smem.regions):
        em.emit("extern __shared__ __align__(16) unsigned char nt_smem[];")
    for p in fn.params:
        if p.value is not None and p.name in eq1:
            em.emit(f"const {em.ctype(p.value)} {em.name(p.value)} = 1;")
    plan = fn.attrs.get("persistent")
    if plan is not None:   # the body inside the loop over programs (codegen/tc/persistent.py)
        from .tc import persistent
        em.pid_x = "nt_pid"
        persistent.open_kernel(em)
        em.block(fn.body)
        persistent.close_kernel(em)
    else:
        em.block(fn.body)
    # TMA tensor maps (passes/tc/dot_tma.py): 128-byte parameters after the user's, in recipe order
    params += [f"const __grid_constant__ newt_tmap nt_tmap{k}"
               for k in range(len(fn.attrs.get("tma_maps", ())))]
    if plan is not None:
        params.append("i32 nt_grid")     # the launch's grid x, after the maps (launch.py)
    T = options.num_threads
    name = fn.name
    mb = fn.attrs.get("min_blocks", 1)
    head = (f'extern "C" __global__ void __launch_bounds__({T}, {mb}) {name}({", ".join(params)}) {{')
    parts = [HEADER] + list(em.helpers.values()) + [head] + em.lines + ["}", ""]
    return "\n".join(parts), name
