"""AST walker, expressions half: Python expressions -> Tensors (IR) or folded Python values.

Any expression whose operands are all compile-time values (constexpr parameters, literals,
globals, dtypes, tuples) is evaluated by Python itself; once a runtime Tensor is involved, the
semantic layer builds IR. Calls go to the builtin table (builtins.py), are inlined (other
@newt.jit functions), or are folded (plain Python functions on compile-time values).
"""
from __future__ import annotations

import ast
import builtins as _pybuiltins
import operator

from ..errors import CompilationError
from . import semantic
from .builtins import IMPLS, PY_BUILTINS
from .semantic import error
from .values import Tensor

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or",
           ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr", ast.Pow: "pow"}
_PYOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
          "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
          "and": operator.and_, "or": operator.or_, "xor": operator.xor,
          "shl": operator.lshift, "shr": operator.rshift, "pow": operator.pow,
          "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
          "eq": operator.eq, "ne": operator.ne}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
           ast.NotEq: "ne"}
_MATMUL_MSG = "@ (matmul) is not supported on blocks; use nl.dot(a, b)"

UNSUPPORTED = {
    "Lambda": "lambda", "ListComp": "a list comprehension", "SetComp": "a set comprehension",
    "DictComp": "a dict comprehension", "GeneratorExp": "a generator expression",
    "Await": "await", "Yield": "yield", "YieldFrom": "yield from",
    "NamedExpr": "an assignment expression (:=)", "Starred": "a starred expression",
    "Set": "a set literal", "Try": "try/except", "TryStar": "try/except*",
    "With": "a with statement", "AsyncWith": "async with", "AsyncFor": "async for",
    "FunctionDef": "a nested function definition (def)",
    "AsyncFunctionDef": "a nested function definition (async def)",
    "ClassDef": "a class definition", "Global": "a global statement",
    "Nonlocal": "a nonlocal statement", "Delete": "del", "Import": "import",
    "ImportFrom": "import", "Break": "break", "Continue": "continue",
    "Match": "a match statement",
}


def _unwrap(v):
    from ..language import constexpr
    return v.value if isinstance(v, constexpr) else v


class ExprVisitor:
    """Mixin: the expression visitors of CodeGen (visitor.py), which provides self.b (Builder),
    self.src (Source), self.scope, self.lookup_global, self.inline_call, self.runtime_if."""

    # ------------------------------------------------------------------ names, literals
    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        name = node.id
        try:
            return self.scope[name]
        except KeyError:
            pass
        why = self.dead.get(name)
        if why:
            error(why)
        return self.lookup_global(name)

    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        if isinstance(obj, Tensor):
            try:
                return getattr(obj, node.attr)
            except AttributeError as e:
                error(str(e))
        try:
            return _unwrap(getattr(obj, node.attr))
        except AttributeError:
            what = getattr(obj, "__name__", None) or type(obj).__name__
            error(f"`{what}` has no attribute `{node.attr}`")

    def visit_Tuple(self, node):
        return tuple(self._elements(node.elts))

    def visit_List(self, node):
        return list(self._elements(node.elts))

    def _elements(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self._iterable(self.visit(e.value)))
            else:
                out.append(self.visit(e))
        return out

    def _iterable(self, v):
        if isinstance(v, Tensor):
            error("cannot unpack a block with *")
        return v

    def visit_Dict(self, node):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                out.update(self.visit(v))
            else:
                out[self.visit(k)] = self.visit(v)
        return out

    def visit_Slice(self, node):
        parts = [self.visit(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_JoinedStr(self, node):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
                continue
            x = self.visit(v.value)
            if isinstance(x, Tensor):
                error("f-strings can only format compile-time values (use nl.device_print for "
                      "runtime values)")
            spec = self.visit(v.format_spec) if v.format_spec is not None else ""
            if v.conversion == ord("r"):
                x = repr(x)
            elif v.conversion == ord("s"):
                x = str(x)
            out.append(format(x, spec))
        return "".join(out)

    # ------------------------------------------------------------------ operators
    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult):
            error(_MATMUL_MSG)
        lhs, rhs = self.visit(node.left), self.visit(node.right)
        return self.binop(_BINOPS[type(node.op)], lhs, rhs)

    def binop(self, op, lhs, rhs):
        if isinstance(lhs, Tensor) or isinstance(rhs, Tensor):
            return semantic.binary(self.b, op, lhs, rhs)
        return _PYOPS[op](lhs, rhs)

    def visit_UnaryOp(self, node):
        x = self.visit(node.operand)
        op = node.op
        if not isinstance(x, Tensor):
            if isinstance(op, ast.Not):
                return not x
            return {ast.USub: operator.neg, ast.UAdd: operator.pos,
                    ast.Invert: operator.invert}[type(op)](x)
        name = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not"}[type(op)]
        return semantic.unary_operator(self.b, name, x)

    def visit_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        acc = self.visit(node.values[0])
        for e in node.values[1:]:
            if not isinstance(acc, Tensor):
                # Python short-circuit on compile-time values
                if (not acc) if is_and else bool(acc):
                    return acc
                acc = self.visit(e)
                continue
            rhs = self.visit(e)
            if not isinstance(rhs, Tensor):
                if is_and and not rhs:
                    return rhs
                if not is_and and rhs:
                    return rhs
            acc = semantic.logical(self.b, "and" if is_and else "or", acc, rhs)
        return acc

    def visit_Compare(self, node):
        lhs = self.visit(node.left)
        result = None
        for op, right in zip(node.ops, node.comparators):
            rhs = self.visit(right)
            if isinstance(op, (ast.Is, ast.IsNot)):
                r = (lhs is rhs) == isinstance(op, ast.Is)
            elif isinstance(op, (ast.In, ast.NotIn)):
                if isinstance(lhs, Tensor) or isinstance(rhs, Tensor):
                    error("`in` is not supported on runtime values")
                r = (lhs in rhs) == isinstance(op, ast.In)
            else:
                r = self.binop(_CMPOPS[type(op)], lhs, rhs)
            if result is None:
                result = r
            elif isinstance(result, Tensor) or isinstance(r, Tensor):
                result = semantic.logical(self.b, "and", result, r)
            else:
                result = result and r
            lhs = rhs
        return result

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Tensor):
            return self.visit(node.body if cond else node.orelse)
        return self.runtime_ifexp(node, cond)

    def visit_Subscript(self, node):
        obj = self.visit(node.value)
        idx = self.visit(node.slice)
        if isinstance(obj, Tensor):
            return obj[idx]
        if isinstance(idx, Tensor):
            error("a compile-time sequence cannot be indexed with a runtime value")
        return _unwrap(obj[idx])

    # ------------------------------------------------------------------ calls
    def visit_Call(self, node):
        fn = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self._iterable(self.visit(a.value)))
            else:
                args.append(self.visit(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.visit(kw.value))
            else:
                kwargs[kw.arg] = self.visit(kw.value)
        return self.call(fn, args, kwargs, node)

    def call(self, fn, args, kwargs, node=None):
        from ..jit import JITFunction
        from ..language import constexpr, range as nl_range, static_range
        b = self.b
        name = getattr(fn, "__newt_builtin__", None)
        if name is not None:
            impl = IMPLS.get(name)
            if impl is None:
                error(f"nl.{name} is not supported by the compiler yet")
            return self._apply(impl, f"nl.{name}", (b, *args), kwargs)
        inner = fn
        for _ in range(4):   # @autotune / @heuristics wrappers around a @jit function
            if isinstance(inner, JITFunction):
                fn = inner
                break
            inner = getattr(inner, "fn", None)
            if inner is None or isinstance(inner, Tensor):
                break
        if isinstance(fn, JITFunction):
            return self.inline_call(fn, args, kwargs)
        if fn is constexpr:
            return _unwrap(args[0]) if args else None
        if fn in (nl_range, static_range, _pybuiltins.range):
            if any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
                error("range(...) with runtime bounds can only be used as a for loop iterator")
            if fn is _pybuiltins.range:
                return range(*args, **kwargs)
        try:
            special = PY_BUILTINS.get(fn)
        except TypeError:  # unhashable callable
            special = None
        if special is not None:
            return self._apply(special, fn.__name__, (b, *args), kwargs)
        if not callable(fn):
            error(f"`{fn!r}` is not callable")
        if any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
            owner = getattr(fn, "__self__", None)
            # methods of the language's own values (desc.load(...)) build IR themselves
            if not (isinstance(owner, Tensor) or _is_tensor_method(fn)
                    or getattr(owner, "__newt_kernel_value__", False)):
                fname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
                error(f"calling the plain Python function `{fname}` on a runtime value is not "
                      f"supported inside a kernel (decorate it with @newt.jit to inline it)")
        return self._apply(fn, getattr(fn, "__name__", "function"), args, kwargs)

    def _apply(self, fn, what, args, kwargs):
        try:
            return fn(*args, **kwargs)
        except CompilationError:
            raise
        except TypeError as e:
            msg = str(e)
            if "argument" in msg:
                error(f"{what}: {msg}")
            raise


def _is_tensor_method(fn) -> bool:
    return getattr(fn, "__name__", "") == "method" and getattr(fn, "__qualname__", "").startswith(
        "Tensor.__getattr__")
