"""Codegen: decided IR (after newt.passes) -> the CUDA C++ text of one kernel.

    generate(fn, options) -> (source, entry_name)

The kernel is `extern "C" __global__ void __launch_bounds__(T) name(params)`, with one
parameter per runtime Param (in order), blockIdx.{x,y,z} as program ids, 32*num_warps threads
and one dynamic shared-memory arena `nt_smem` (sized by passes/smem.py). One module per
hardware concern registers op handlers with the emitter (emitter.py).

dot hook: `nl.dot` is emitted by `newt.codegen.dot.emit_dot(em, op)` when that module exists
(matmul work). It receives the Emitter (em.emit / em.declare / em.name / em.at / em.slots /
em.smem / em.barrier, see emitter.py) and the `dot` op (operands a, b, acc with their layouts
in attrs["layout"], attrs input_precision/out_dtype), and must define op.result as a register
array in op.result.attrs["layout"]. Without the module, a kernel using dot raises
CompilationError at the user's line.
"""
from __future__ import annotations

from ..errors import CompilationError
from . import atomics, control, debug, elementwise, memory, reduce, shapes  # noqa: F401 (handlers)
from . import gather, inline_asm, libdevice, scan_fn, sort  # noqa: F401 (handlers)
from .emitter import Emitter, handles
from .header import HEADER


@handles("dot")
def _dot(em, op):
    try:
        from . import dot as dot_module
    except ModuleNotFoundError as e:
        if e.name and e.name.endswith("codegen.dot"):
            raise CompilationError("nl.dot is not supported yet", op.loc) from None
        raise
    dot_module.emit_dot(em, op)


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
    if fn.attrs.get("smem_bytes", 0):
        em.emit("extern __shared__ __align__(16) unsigned char nt_smem[];")
    for p in fn.params:
        if p.value is not None and p.name in eq1:
            em.emit(f"const {em.ctype(p.value)} {em.name(p.value)} = 1;")
    plan = fn.attrs.get("persistent")
    if plan is not None:   # the body inside the loop over programs (codegen/persistent.py)
        from . import persistent
        em.pid_x = "nt_pid"
        persistent.open_kernel(em)
        em.block(fn.body)
        persistent.close_kernel(em)
    else:
        em.block(fn.body)
    # TMA tensor maps (passes/dot_tma.py): 128-byte parameters after the user's, in recipe order
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
