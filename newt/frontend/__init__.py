"""Frontend: Python AST -> typed block IR (newt/ir). Three layers, as in Triton:

    newt/language/     what users call (names and docstrings only)
    semantic.py        type rules: promotion, broadcasting, casts, operators, pointer arithmetic
    shapes.py          creation (arange, full, zeros) and shape ops (reshape, permute, x[:, None])
    reductions.py      sum / max / min / argmax / argmin / cumsum, dot
    memory.py          load / store / atomics (mask, other, pointee casts)
    random.py          rand / randn / randint over the philox op
    libdevice.py       libdevice calls: the variant by argument dtypes -> one libdevice op
    movement.py        join / split / interleave / flip / gather / sort / topk / histogram
    combine.py         reduce / associative_scan with user combine functions, cumprod
    inline_asm.py      inline_asm_elementwise
    builtins.py        nl.* name -> rule; block methods; Python's min / max / abs / print
    values.py          Tensor: the frontend's runtime value (an IR Value + its Builder)
    visitor.py         the AST walker: statements, inlined @jit calls, dispatch and error locations
    control.py         if / for / while / ternaries -> structured regions, loop-carried values
    expressions.py     expressions: folding of compile-time values, operators, calls
    source.py          parsed source + Loc of every node (real file lines), cached per function

Entry point: build_ir(fn, signature, constexprs, specialization=None) -> newt.ir.Function,
verified (newt/ir/verifier.py) before it is returned.
"""
from __future__ import annotations

import gc
import inspect

from .. import dtypes as D
from ..descriptors import parse_signature
from ..errors import CompilationError
from ..ir.builder import Builder
from ..ir.core import Param
from ..ir.verifier import verify
from . import descriptors
from .expressions import _unwrap
from .source import get_source
from .values import Tensor
from .visitor import CodeGen, Context


def build_ir(fn, signature, constexprs=None, specialization=None):
    """Build the IR of kernel `fn` (a JITFunction or a plain function).

    signature       {runtime param name: dtype or Triton spelling ("*fp32", "i32"), or
                    "tensordesc<fp16[64,64]>" for a tensor descriptor (newt/descriptors.py)}
    constexprs      {constexpr param name: Python value}
    specialization  {param name: {"divisible_by_16", "equal_to_1", "large"}}: params equal to 1
                    become the constant 1 (not parameters); the others are recorded on the
                    Param and as attrs of its Value.
    """
    # IR objects form reference cycles (op <-> value); a full collection of torch's large heap
    # in the middle of a build costs more than the build itself
    gc_on = gc.isenabled()
    gc.disable()
    try:
        return _build(fn, signature, constexprs, specialization)
    finally:
        if gc_on:
            gc.enable()


def _build(fn, signature, constexprs, specialization):
    pyfn = fn
    while hasattr(pyfn, "fn") and not hasattr(pyfn, "__code__"):
        pyfn = pyfn.fn   # JITFunction, and @autotune / @heuristics wrappers around one
    src = get_source(pyfn)
    constexprs = dict(constexprs or {})
    specialization = specialization or {}
    params, scope, ones, descs = [], {}, [], []
    py_params = inspect.signature(pyfn).parameters
    next_index = len(py_params)      # a descriptor's ints are numbered after the parameters
    for i, (name, p) in enumerate(py_params.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise CompilationError(f"kernels cannot take *args / **kwargs (`{name}`)",
                                   src.loc(src.node))
        if name in constexprs:
            scope[name] = _unwrap(constexprs[name])
            continue
        if name in signature and parse_signature(signature[name]) is not None:
            base, ps, ints, block, padding = descriptors.parameter(
                name, signature[name], specialization.get(name) or {}, signature,
                specialization, i, next_index)
            params += ps
            next_index += 2 * len(block)
            descs.append((name, base, ints, block, padding))
        elif name in signature:
            dt = signature[name]
            dt = D.from_signature(dt) if isinstance(dt, str) else dt
            spec = specialization.get(name) or {}
            if spec.get("equal_to_1"):
                ones.append((name, dt))   # a typed constant below, not a weak Python 1
                continue
            params.append(Param(name, dt, i, divisible_by_16=bool(spec.get("divisible_by_16")),
                                large=bool(spec.get("large"))))
        elif p.default is not p.empty:
            scope[name] = _unwrap(p.default)
        else:
            raise CompilationError(f"parameter `{name}` is neither in the signature nor a "
                                   f"constexpr", src.loc(src.node))
    b = Builder.for_function(pyfn.__name__, params, loc=src.loc(src.node))
    for prm in params:
        scope[prm.name] = Tensor(prm.value, b)
    for name, base, ints, block, padding in descs:   # (replaces the base pointer's entry)
        for prm in ints:
            if prm[0] == "param":
                del scope[prm[1].name]
        scope[name] = descriptors.descriptor_value(b, base, ints, block, padding)
    # A runtime int specialized as equal to 1 keeps its parameter's type: the kernel must mean
    # the same whatever value the argument happens to have (int8_block + n stays int32 math).
    for name, dt in ones:
        scope[name] = Tensor(b.constant(1, dt), b)
    cg = CodeGen(Context(b), pyfn, is_kernel=True)
    cg.scope = scope
    cg.visit_stmts(src.node.body)
    verify(b.func)   # a failure here is a frontend bug: it names the op and the user's line
    return b.func


__all__ = ["build_ir"]
