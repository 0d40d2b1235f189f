"""AST walker, statements half: assignments, control flow and inlined calls -> IR regions.

  - `if` on a constexpr is pruned (the untaken branch is never visited); on a runtime scalar
    it becomes an `if` op whose results are the variables either branch changed;
  - `for` over range / nl.range is a `for` op carrying the variables the body assigns that
    exist before the loop (their type must not change); nl.static_range and tuples unroll;
  - `while` is a `while` op (cond region + body region) with the same carried-variable rule;
  - `return` in the kernel: inside a runtime `if` it becomes a `return` op, and the statements
    after that `if` continue in the branch that did not return;
  - calls to other @newt.jit functions are inlined by a nested CodeGen sharing the Builder.
"""
from __future__ import annotations

import ast
import builtins as _pybuiltins

from .. import dtypes as D
from ..errors import CompilationError
from ..ir.core import Block, is_block
from . import semantic
from .control import RETURNED, ControlFlow
from .expressions import UNSUPPORTED, ExprVisitor, _unwrap
from .semantic import error
from .source import get_source
from .values import Tensor


class Context:
    """State shared by a kernel's CodeGen and every inlined callee's."""

    def __init__(self, b):
        self.b = b
        self.stack: list = []   # functions being inlined (recursion check)


class CodeGen(ControlFlow, ExprVisitor):
    def __init__(self, ctx: Context, fn, is_kernel: bool):
        self.ctx = ctx
        self.b = ctx.b
        self.fn = fn
        self.src = get_source(fn)
        self.is_kernel = is_kernel
        self.scope: dict = {}
        self.dead: dict = {}        # name -> why it is not visible here (loop/branch local)
        self.loop_depth = 0         # device loops (for/while ops) we are inside
        self.static_depth = 0       # unrolled loops (nl.static_range, tuples) we are inside
        self.runtime_if = 0         # runtime `if` regions we are inside
        self.ret = None             # an inlined function's return value
        self._globals = None

    # ------------------------------------------------------------------ dispatch
    def visit(self, node):
        m = getattr(self, "visit_" + type(node).__name__, None)
        if m is None:
            what = UNSUPPORTED.get(type(node).__name__, type(node).__name__)
            raise CompilationError(f"{what} is not supported inside a kernel", self.src.loc(node))
        b = self.b
        old = b.loc
        b.loc = self.src.loc(node)
        try:
            return m(node)
        except CompilationError as e:
            if e.loc is None:
                raise CompilationError(e.msg, self.src.loc(node)) from None
            raise
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, IndexError,
                KeyError, AttributeError, RecursionError) as e:
            raise CompilationError(f"{type(e).__name__}: {e}", self.src.loc(node)) from e
        except Exception as e:  # noqa: BLE001 - a frontend bug still points at the user's line
            raise CompilationError(f"internal compiler error ({type(e).__name__}: {e})",
                                   self.src.loc(node)) from e
        finally:
            b.loc = old

    def lookup_global(self, name):
        g = self._globals
        if g is None:
            g = self._globals = _globals_of(self.fn)
        if name in g:
            return _unwrap(g[name])
        bi = _pybuiltins.__dict__
        if name in bi:
            return bi[name]
        error(f"undefined name `{name}`")

    # ------------------------------------------------------------------ statement lists
    def visit_stmts(self, stmts):
        """Visit statements in order. Returns True when every path through them returned
        (the rest of the enclosing list is dead)."""
        for i, s in enumerate(stmts):
            if isinstance(s, ast.If):
                returned, consumed = self.with_loc(s, self.visit_if, s, stmts[i + 1:])
                if returned or consumed:
                    return returned
                continue
            if isinstance(s, ast.Return):
                self.visit(s)
                return True
            r = self.visit(s)
            if r is True and isinstance(s, (ast.For, ast.While)):
                return True
        return False

    def with_loc(self, node, fn, *args):
        """Run fn(*args) with errors located at node (for visitors called directly)."""
        b = self.b
        old = b.loc
        b.loc = self.src.loc(node)
        try:
            return fn(*args)
        except CompilationError as e:
            if e.loc is None:
                raise CompilationError(e.msg, self.src.loc(node)) from None
            raise
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, IndexError,
                KeyError, AttributeError) as e:
            raise CompilationError(f"{type(e).__name__}: {e}", self.src.loc(node)) from e
        finally:
            b.loc = old

    # ------------------------------------------------------------------ simple statements
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return None  # docstrings, bare literals
        self.visit(node.value)

    def visit_Pass(self, node):
        return None

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for t in node.targets:
            self.assign(t, value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.visit(node.value)
        ann = self.visit(node.annotation)
        from ..language import constexpr
        if ann is constexpr and isinstance(value, Tensor):
            error(f"`{ast.unparse(node.target)}` is annotated constexpr but its value is a "
                  f"runtime value")
        if isinstance(ann, D.dtype) and isinstance(value, Tensor):
            value = semantic.cast(self.b, value, ann)
        self.assign(node.target, _unwrap(value))

    def visit_AugAssign(self, node):
        t = node.target
        if not isinstance(t, ast.Name):
            self.assign(t, None)  # raises the right error
        cur = self.visit_Name(ast.Name(id=t.id, ctx=ast.Load()))
        if isinstance(node.op, ast.MatMult):
            error("@= is not supported on blocks; use acc = nl.dot(a, b, acc)")
        from .expressions import _BINOPS
        self.assign(t, self.binop(_BINOPS[type(node.op)], cur, self.visit(node.value)))

    def assign(self, target, value):
        if isinstance(target, ast.Name):
            name = target.id
            if isinstance(value, Tensor) and not value.v.name:
                value.v.name = name
            self.scope[name] = value
            self.dead.pop(name, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Tensor):
                error("cannot unpack a block into several names")
            try:
                vals = list(value)
            except TypeError:
                error(f"cannot unpack {value!r}")
            if len(vals) != len(target.elts):
                error(f"cannot unpack {len(vals)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, vals):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            error("assigning to an element of a block (x[i] = ...) is not supported: blocks "
                  "are immutable (use nl.where, or nl.store to memory)")
        elif isinstance(target, ast.Attribute):
            error("assigning to an attribute is not supported inside a kernel")
        else:
            error(f"cannot assign to {type(target).__name__}")

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        if node.msg is not None:
            msg = self.visit(node.msg)
            if isinstance(msg, Tensor):
                error("an assert message must be a compile-time string")
            msg = str(msg)
        else:
            msg = f"Assertion `{self.src.text(node.test)}` failed"
        from .builtins import device_assert
        device_assert(self.b, cond, msg)

    def visit_Raise(self, node):
        exc = self.visit(node.exc) if node.exc is not None else None
        error(f"kernel raised {type(exc).__name__ if isinstance(exc, BaseException) else ''}"
              f"{': ' + str(exc) if exc is not None else ''}")

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        if self.is_kernel:
            if value is not None:
                error("a kernel cannot return a value (store results to memory)")
            if self.loop_depth:
                error("return inside a loop is not supported")
            if self.runtime_if:
                self.b.ret()
            return
        if self.loop_depth:
            error("return inside a loop is not supported")
        if self.runtime_if:      # the enclosing runtime `if`s merge it (control.py)
            self.scope[RETURNED] = value
            return
        self.ret = value

    # ------------------------------------------------------------------ inlining
    def inline_call(self, jf, args, kwargs):
        fn = jf.fn
        if fn in self.ctx.stack or fn is self.fn:
            error(f"recursion is not supported: `{fn.__name__}` calls itself")
        try:
            bound = jf.signature.bind(*args, **kwargs)
        except TypeError as e:
            error(f"{fn.__name__}(): {e}")
        bound.apply_defaults()
        sub = CodeGen(self.ctx, fn, is_kernel=False)
        for name, v in bound.arguments.items():
            # a constexpr annotation on a helper's parameter does not reject runtime values
            # (Triton's attention tutorial passes offsets blocks that way)
            sub.scope[name] = _unwrap(v)
        self.ctx.stack.append(fn)
        site = self.b.loc
        try:
            sub.visit_stmts(sub.src.node.body)
        except CompilationError as e:
            if site is None or e.loc is None or e.loc.file == site.file and e.loc.line == site.line:
                raise
            raise CompilationError(f"{e.msg} (in {fn.__name__}(), called from "
                                   f"{site.file}:{site.line})", e.loc) from None
        finally:
            self.ctx.stack.pop()
        return sub.scope[RETURNED] if RETURNED in sub.scope else sub.ret


def _globals_of(fn) -> dict:
    g = dict(fn.__globals__)
    code = fn.__code__
    if fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                g[name] = cell.cell_contents
            except ValueError:
                pass
    return g


def region_types(values):
    return [v.type for v in values]


__all__ = ["CodeGen", "Context", "Block", "is_block"]
