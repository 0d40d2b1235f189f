"""A kernel's identity for the disk cache: the bytecode, constants and names of its function,
of every @newt.jit function it calls and of the plain constants it reads (newt/jit.py's
source_key). Bytecode rather than source text, so the warm path reads no file.
"""
from __future__ import annotations

import sys
import types

from .language import constexpr as _constexpr


def code_names(code, out: set):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            code_names(c, out)


def code_identity(code) -> tuple:
    """What a code object computes: bytecode, constants (nested code objects recursively), names.
    Comments, blank lines and line numbers do not change it; any edit to an expression does."""
    consts = tuple(code_identity(c) if isinstance(c, types.CodeType) else repr(c)
                   for c in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_argcount, code.co_kwonlyargcount)


def collect_sources(jf, seen: set, parts: list):
    """Identity of a kernel for the disk cache, from its bytecode rather than its source text:
    no file reading or tokenizing on the warm path (inspect.getsource costs milliseconds)."""
    from .jit import JITFunction   # (late: jit.py imports this module)
    if id(jf) in seen:
        return
    seen.add(id(jf))
    fn = jf.fn
    parts.append((fn.__module__, fn.__qualname__, str(jf.signature), sys.version_info[:2],
                  code_identity(fn.__code__)))
    names: set = set()
    code_names(fn.__code__, names)
    scope = dict(fn.__globals__)
    for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        if cell_ok(c):
            scope[n] = c.cell_contents
    for name in sorted(names | set(fn.__code__.co_freevars)):
        v = scope.get(name)
        if isinstance(v, JITFunction):
            collect_sources(v, seen, parts)
        elif isinstance(v, _constexpr):
            parts.append((name, repr(v.value)))
        elif isinstance(v, (bool, int, float, str)):
            parts.append((name, repr(v)))


def cell_ok(c) -> bool:
    try:
        c.cell_contents
        return True
    except ValueError:
        return False
