"""compile(): the whole pipeline as a short list of named stages (DESIGN.md, principle 1).

    python function --frontend--> typed IR --passes--> decided IR --codegen--> CUDA C++
                    --nvrtc--> PTX + cubin (+ ptxas report)

The same stage names appear in NEWT_DEBUG dumps. Needs no GPU: `newt.compile(...)` is the AOT
entry point CI uses; the JIT (jit.py) calls the same function on a cache miss.

CONTRACT (used by jit.py, the runtime and tests):

    compile(fn, signature, constexprs=None, *, arch="sm_90a", num_warps=4, num_stages=3,
            specialization=None) -> CompiledKernel

    fn            a JITFunction or a plain Python function
    signature     {param_name: "*fp32" | "i32" | nl dtype | ...} for every runtime parameter,
                  Triton spelling (constexpr params are absent from it)
    constexprs    {param_name: python value} for every constexpr parameter
    specialization {param_name: {"divisible_by_16": bool, "equal_to_1": bool, "large": bool}}
                  (JIT fills this from the actual arguments; AOT callers may omit it)

CompiledKernel.params lists the parameters the launcher passes, in order, each with `.index`,
its position among the Python function's parameters. Parameters equal to 1 are compiled as the
constant 1 and are not passed; constexprs are not passed.
"""
from __future__ import annotations

import dataclasses

from .options import Options


@dataclasses.dataclass
class CompiledKernel:
    name: str                 # extern "C" entry symbol in the cubin
    source: str               # the generated CUDA C++
    ptx: str
    cubin: bytes
    ir: str                   # the printed IR after passes (layouts and decisions visible)
    params: list              # list[newt.ir.Param], in launch order
    options: Options
    num_threads: int
    shared_bytes: int         # dynamic shared memory the launch must request
    n_regs: int = -1
    n_spills: int = 0         # spill stores + spill loads reported by ptxas
    local_bytes: int = 0      # stack frame bytes reported by ptxas
    log: str = ""             # NVRTC/ptxas log
