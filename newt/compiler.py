"""compile(): the whole pipeline as a short list of named stages (DESIGN.md, principle 1).

    python function --frontend--> typed IR --passes--> decided IR --codegen--> CUDA C++
                    --nvrtc--> PTX + cubin (+ ptxas report)

The same stage names appear in NEWT_DEBUG / NEWT_DUMP output (debug_dump.py). Needs no GPU: `newt.compile(...)` is the AOT
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
constant 1 and are not passed; constexprs are not passed. After them come the TMA maps
(`tma_maps`, one 128-byte `__grid_constant__` each) and, for a `persistent` kernel, one i32:
the grid's x (the number of programs), with at most one CTA per SM launched
(passes/tc/persistent.py; the launcher does both, runtime/launch.py).
"""
from __future__ import annotations

import dataclasses

from . import debug_dump, dtypes
from .options import Options, flags


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
    tma_maps: list = dataclasses.field(default_factory=list)   # recipes of the extra TMA map
    #                           parameters (passes/tc/dot_tma.py), built by the launcher per call
    persistent: bool = False  # one CTA per SM loops over the programs; the grid is a hidden
    #                           last parameter (passes/tc/persistent.py)
    stages: list | None = None  # NEWT_DEBUG / NEWT_DUMP: the stages shown (debug_dump.py)


# ----------------------------------------------------------------------------- the stages

def compile(fn, signature, constexprs=None, *, arch="sm_90a", num_warps=4, num_stages=3,
            specialization=None) -> CompiledKernel:
    """Compile a kernel ahead of time (no GPU needed); see the module docstring."""
    from .frontend import build_ir
    from .runtime import nvrtc
    options = Options(arch=arch, num_warps=num_warps, num_stages=num_stages, debug=flags.debug,
                      nvrtc_version=nvrtc.version())
    pyfn = getattr(fn, "fn", fn)
    sig = {k: (dtypes.from_signature(v) if isinstance(v, str) and not v.startswith("tensordesc")
               else v) for k, v in signature.items()}    # descriptors: frontend/descriptors.py
    spec = dict(specialization or {})
    ir_fn = build_ir(pyfn, sig, dict(constexprs or {}), spec)          # stage: frontend
    return compile_ir(ir_fn, options, spec)


def compile_ir(ir_fn, options: Options, specialization=None) -> CompiledKernel:
    """The stages after the frontend: passes -> codegen -> nvrtc. Tests call it with IR
    built by hand (newt.ir.builder)."""
    from .codegen import generate
    from .ir.printer import format_function
    from .runtime import nvrtc
    _apply_specialization(ir_fn, specialization or {})
    eq1 = ir_fn.attrs["equal_to_1"]
    ir_fn.attrs["num_warps"] = options.num_warps
    stages = debug_dump.start(options)    # NEWT_DEBUG / NEWT_DUMP (None: neither)
    with _at_kernel(ir_fn):
        debug_dump.run_passes(ir_fn, options, stages)                   # stage: passes
        ir_text = format_function(ir_fn)
        source, name = generate(ir_fn, options)                         # stage: codegen
    extra = ("-lineinfo",) if options.debug else ()
    res = nvrtc.compile_cuda(source, name, options.arch, extra)        # stage: nvrtc
    rep = res.report
    tight = rep["n_spills"] or (rep["local_bytes"] and "printf(" not in source)  # printf: stack
    if tight and ir_fn.attrs.get("min_blocks", 1) > 1:
        ir_fn.attrs["min_blocks"] = 1        # the register budget was too tight: lift it
        source, name = generate(ir_fn, options)
        res = nvrtc.compile_cuda(source, name, options.arch, extra)
        rep = res.report
    elif not tight:
        source, name, res, rep = _raise_occupancy(ir_fn, options, extra, source, name, res, rep)
    _check_shared_memory(ir_fn, options, rep)                           # stage: limits
    shown = debug_dump.finish(stages, options, name, ir_fn, source, res.ptx, res.cubin)
    params = [p for p in ir_fn.params if p.name not in eq1]
    return CompiledKernel(
        name=name, source=source, ptx=res.ptx, cubin=res.cubin, ir=ir_text, params=params,
        options=options, num_threads=options.num_threads,
        shared_bytes=ir_fn.attrs.get("smem_bytes", 0), n_regs=rep["n_regs"],
        n_spills=rep["n_spills"], local_bytes=rep["local_bytes"], log=res.log,
        tma_maps=list(ir_fn.attrs.get("tma_maps", ())),
        persistent="persistent" in ir_fn.attrs, stages=shown)


class _at_kernel:
    """A CompilationError from a pass or codegen that has no source location (a whole-kernel
    limit, such as shared memory) points at the kernel's definition instead."""

    def __init__(self, ir_fn):
        self.loc = ir_fn.loc

    def __enter__(self):
        return self

    def __exit__(self, tp, e, tb):
        from .errors import CompilationError
        if isinstance(e, CompilationError) and e.loc is None and self.loc is not None:
            raise CompilationError(e.msg, self.loc) from None
        return False


def _blocks_per_sm(n_regs: int, threads: int) -> int:
    """Blocks of `threads` one SM holds at n_regs registers per thread: registers go to warps
    in units of 256, 64K per SM, at most 2048 threads and 32 blocks."""
    warps = -(-threads // 32)
    per_warp = -(-n_regs * 32 // 256) * 256
    return min(65536 // (per_warp * warps), 2048 // threads, 32)


def _raise_occupancy(ir_fn, options, extra, source, name, res, rep, steps=2):
    """Steps up for a memory-bound kernel that ptxas left below full occupancy: ask for one
    more block per SM (a lower register budget) and keep the result if nothing spills, at most
    `steps` times. Memory bandwidth needs many loads in flight; ptxas packs a kernel's values
    tightly only when asked (the layer norm's 53 registers at no budget fit in 40 without a
    spill: 6 blocks of 256 threads instead of 4). Kernels with a dot keep the whole register
    file (passes/smem.py: plan_occupancy)."""
    from .codegen import generate
    from .runtime import nvrtc
    threads = options.num_threads
    if rep["n_regs"] <= 0 or any(op.opcode == "dot" for op in ir_fn.walk()):
        return source, name, res, rep
    for _ in range(steps):
        have = _blocks_per_sm(rep["n_regs"], threads)
        want = have + 1
        budget = 65536 // (want * -(-threads // 32)) // 32 // 8 * 8     # registers per thread
        if have >= 2048 // threads or budget < 32:
            break
        before = ir_fn.attrs.get("min_blocks", 1)
        ir_fn.attrs["min_blocks"] = want
        source2, name2 = generate(ir_fn, options)
        res2 = nvrtc.compile_cuda(source2, name2, options.arch, extra)
        rep2 = res2.report
        if rep2["n_spills"] or (rep2["local_bytes"] and "printf(" not in source2):
            ir_fn.attrs["min_blocks"] = before
            break
        source, name, res, rep = source2, name2, res2, rep2
    return source, name, res, rep


def _check_shared_memory(ir_fn, options: Options, report: dict):
    """Dynamic (newt's arena) plus static (`__shared__` in the source, from the ptxas report)
    shared memory must fit the arch's opt-in maximum per block: a kernel over it could never
    launch, so it is a CompilationError at the kernel's definition, with no GPU needed. (The
    launcher checks again against the device's own attribute.)"""
    from .errors import CompilationError
    from .ir.schedule import smem_limit
    dynamic = ir_fn.attrs.get("smem_bytes", 0)
    static = max(report.get("shared_bytes", 0), 0)
    limit = smem_limit(options.arch)
    if dynamic + static > limit:
        raise CompilationError(
            f"kernel `{ir_fn.name}` needs {dynamic + static} bytes of shared memory ({dynamic} "
            f"dynamic + {static} static, {(dynamic + static) / 1024:.1f} KB); {options.arch} "
            f"allows at most {limit} bytes ({limit // 1024} KB) per block: use smaller blocks, "
            f"fewer num_stages or fewer num_warps", ir_fn.loc)


def _apply_specialization(ir_fn, spec: dict):
    """Record the specialization facts the passes rely on (alignment, 64-bit offsets, params
    compiled as the constant 1) on the IR."""
    for p in ir_fn.params:
        s = spec.get(p.name, {})
        p.divisible_by_16 = p.divisible_by_16 or bool(s.get("divisible_by_16"))
        p.large = p.large or bool(s.get("large"))
        if p.value is not None:
            for k in ("divisible_by_16", "large"):
                if getattr(p, k):
                    p.value.attrs[k] = True
    ir_fn.attrs["equal_to_1"] = {n for n, s in spec.items() if s.get("equal_to_1")}
