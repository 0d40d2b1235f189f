"""The acceptance check the interpreter shares with the compiler: one frontend, one rule.

Before the interpreter runs a kernel for a specialization it has not seen, it builds the
kernel's IR with the frontend (newt/frontend: the AST walker and the type, shape and block-limit
rules), from the same signature, constexprs and specialization the compiled path derives from
the same arguments (runtime/specialize.py). So a program is accepted by both paths or rejected
by both, with the same CompilationError at the same line; the interpreter then runs the
kernel's Python code with Triton's semantics. The IR is discarded; a specialization is checked
once per kernel (about the cost of the frontend stage of one compile).
"""
from __future__ import annotations

from ..frontend import build_ir
from ..runtime import specialize


def check(jitfn, arguments: dict) -> None:
    """Raise the CompilationError (or LaunchError) the compiled path raises for these
    arguments; return once the kernel is accepted."""
    sig, cx, spec, _ = specialize.specialize(jitfn, arguments, allow_cpu=True)
    key = (tuple(sig.items()), tuple((k, type(v), v) for k, v in cx.items()),
           tuple((k, tuple(sorted(s.items()))) for k, s in spec.items()))
    seen = jitfn.__dict__.setdefault("_interpreter_checked", set())
    if key in seen:
        return
    build_ir(jitfn, sig, cx, spec)
    seen.add(key)
