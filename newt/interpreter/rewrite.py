"""Kernel functions as the interpreter runs them: the user's code with the constructs whose
Python meaning differs from the compiler's rewritten to the compiler's meaning.

Where it sits: launch.py's rebinder makes each kernel's (and each @jit callee's) twin from this
file's `twin_code`, then runs it with the interpreter's `nl`. The frontend (newt/frontend)
decides what these constructs mean; here they are mapped onto runtime helpers:

  - `a and b`, `a or b`: Python's short circuit on compile-time values, the elementwise logical
    and / or of the truth values (int1) once a block or runtime scalar is involved, as
    expressions.py's visit_BoolOp (Python's `and` would ask a block for a single truth value);
  - `not x`: logical not of x != 0 for a runtime value;
  - a chained comparison `a < b < c`: every operand evaluated once, in order, and the
    comparisons joined by the elementwise logical and once a block or runtime scalar is
    involved, as expressions.py's visit_Compare (Python's would ask a block for a truth value);
  - a device loop (`for ... in range(...)`, `while`): a Python number held by a name the body
    assigns becomes a typed scalar before the loop (int32, int64, fp32, int1), as the compiler
    makes loop-carried values (`i = 0; while ...: i += 1` then `i.to(nl.float32)`);
  - an `if` on a runtime value: a Python number a branch assigns, or a @jit function returns
    from inside it, becomes a typed scalar after it, as the compiler's `if` yields it
    (`if x > 0: c = 1 else: c = 3` then `c.to(nl.float32)`); so does the value of
    `a if c else b` on a runtime `c` (only the side taken is evaluated).

Line numbers are the file's, so tracebacks and error locations point at the user's source. A
function whose source cannot be read (the acceptance check has already needed it) is run as it
is.
"""
from __future__ import annotations

import ast
import copy

from ..frontend.names import assigned_names
from ..frontend.source import get_source

_AND, _OR, _NOT, _CARRY, _DEVICE, _CHAIN, _RUNTIME, _RET, _IFEXP = (
    "__newt_and", "__newt_or", "__newt_not", "__newt_carry", "__newt_device_loop",
    "__newt_chain", "__newt_runtime", "__newt_return", "__newt_ifexp")
HELPERS = (_AND, _OR, _NOT, _CARRY, _DEVICE, _CHAIN, _RUNTIME, _RET, _IFEXP)


def twin_code(fn):
    """The code object of fn's rewritten twin, or None when nothing needs rewriting."""
    try:
        src = get_source(fn)
    except Exception:  # noqa: BLE001  (no source: run the original code)
        return None
    node = copy.deepcopy(src.node)
    node.decorator_list = []
    if not any(isinstance(n, (ast.BoolOp, ast.Not, ast.For, ast.While, ast.If,
                                ast.IfExp))
               or (isinstance(n, ast.Compare) and len(n.ops) > 1) for n in ast.walk(node)):
        return None
    node = _Rewriter().visit(node)
    tree = ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[]))
    ast.increment_lineno(tree, src.first_line - 1)
    module = compile(tree, src.file, "exec")
    return next(c for c in module.co_consts if getattr(c, "co_name", None) == fn.__name__)


def _call(name, *args):
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _thunk(e):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                         defaults=[]), body=e)


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.conds = []      # the names holding the conditions of the enclosing `if`s

    def visit_If(self, node):
        # __newt_cond = test; if __newt_cond: ...; if __newt_runtime(__newt_cond): <carry>
        cond = _cond_name(node)
        node.test = self.visit(node.test)
        head = ast.Assign(targets=[ast.Name(id=cond, ctx=ast.Store())], value=node.test)
        node.test = ast.Name(id=cond, ctx=ast.Load())
        self.conds.append(cond)
        node.body = self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        self.conds.pop()
        names = sorted(set(assigned_names(node.body)) | set(assigned_names(node.orelse)))
        stmts = [head, node]
        # (an `if` with a branch that returns yields nothing: the compiler keeps the other
        # branch's numbers as they are)
        if names and not (_returns(node.body) or _returns(node.orelse)):
            stmts.append(ast.If(test=_call(_RUNTIME, ast.Name(id=cond, ctx=ast.Load())),
                                body=_carry_names(names), orelse=[]))
        for st in stmts:
            for n in ast.walk(st):
                if not hasattr(n, "lineno") and isinstance(n, (ast.stmt, ast.expr)):
                    ast.copy_location(n, node)
        return stmts

    def visit_FunctionDef(self, node):
        node.body = self._stmts(node.body)
        return node

    def _stmts(self, stmts):
        # the statements after an `if` that returns somewhere are inside it for the compiler
        # (visit_if moves them into the branch that goes on): their returns are under its test
        out, depth = [], len(self.conds)
        for st in stmts:
            r = self.visit(st)
            out.extend(r if isinstance(r, list) else [r])
            if isinstance(st, ast.If) and any(isinstance(n, ast.Return) for n in ast.walk(st)):
                self.conds.append(_cond_name(st))
        del self.conds[depth:]
        return out

    def visit_Return(self, node):
        self.generic_visit(node)
        if node.value is not None and self.conds:
            conds = ast.Tuple(elts=[ast.Name(id=c, ctx=ast.Load()) for c in self.conds],
                              ctx=ast.Load())
            node.value = ast.copy_location(_call(_RET, conds, node.value), node.value)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return ast.copy_location(_call(_IFEXP, node.test, _thunk(node.body),
                                       _thunk(node.orelse)), node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        name = _AND if isinstance(node.op, ast.And) else _OR
        return ast.copy_location(_call(name, *map(_thunk, node.values)), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_NOT, node.operand), node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        # __newt_chain(("Lt", "LtE"), a, b, c)
        ops = ast.Tuple(elts=[ast.Constant(type(op).__name__) for op in node.ops], ctx=ast.Load())
        return ast.copy_location(_call(_CHAIN, ops, node.left, *node.comparators), node)

    def visit_For(self, node):
        self.generic_visit(node)
        return [*_carry(node), node]     # (a list replaces one statement)

    visit_While = visit_For


def _carry(loop):
    """Statements before `loop`: each name its body assigns that holds a Python number becomes a
    typed scalar, when the loop is a device loop (a `while`, or a `for` over `range`)."""
    names = sorted(assigned_names(loop.body))
    if isinstance(loop, ast.For):   # the target is the loop's own: not carried
        names = [n for n in names if n not in {t.id for t in ast.walk(loop.target)
                                              if isinstance(t, ast.Name)}]
    if not names:
        return []
    stmts = _carry_names(names)
    if isinstance(loop, ast.For):   # only a device loop carries: static_range unrolls
        iterator = "__newt_iter_%d" % loop.lineno
        head = ast.Assign(targets=[ast.Name(id=iterator, ctx=ast.Store())], value=loop.iter)
        loop.iter = ast.Name(id=iterator, ctx=ast.Load())
        guard = ast.If(test=_call(_DEVICE, ast.Name(id=iterator, ctx=ast.Load())), body=stmts,
                       orelse=[])
        stmts = [head, guard]
    for s in stmts:
        for n in ast.walk(s):
            if not hasattr(n, "lineno") and isinstance(n, (ast.stmt, ast.expr)):
                ast.copy_location(n, loop)
    return stmts


def _carry_names(names):
    """`if "n" in locals(): n = __newt_carry(n)` for each name."""
    return [ast.If(test=ast.Compare(left=ast.Constant(n), ops=[ast.In()],
                                    comparators=[_call("locals")]),
                   body=[ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                                    value=_call(_CARRY, ast.Name(id=n, ctx=ast.Load())))],
                   orelse=[]) for n in names]


def _returns(stmts) -> bool:
    """Every path through `stmts` ends in a `return` (the frontend's visit_stmts rule)."""
    for st in stmts:
        if isinstance(st, ast.Return):
            return True
        if isinstance(st, ast.If) and _returns(st.body) and _returns(st.orelse):
            return True
    return False


def _cond_name(node):
    return "__newt_cond_%d_%d" % (node.lineno, node.col_offset)
