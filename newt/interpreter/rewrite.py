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
    makes loop-carried values (`i = 0; while ...: i += 1` then `i.to(nl.float32)`).

Line numbers are the file's, so tracebacks and error locations point at the user's source. A
function whose source cannot be read (the acceptance check has already needed it) is run as it
is.
"""
from __future__ import annotations

import ast
import copy

from ..frontend.names import assigned_names
from ..frontend.source import get_source

_AND, _OR, _NOT, _CARRY, _DEVICE, _CHAIN = ("__newt_and", "__newt_or", "__newt_not",
                                            "__newt_carry", "__newt_device_loop",
                                            "__newt_chain")
HELPERS = (_AND, _OR, _NOT, _CARRY, _DEVICE, _CHAIN)


def twin_code(fn):
    """The code object of fn's rewritten twin, or None when nothing needs rewriting."""
    try:
        src = get_source(fn)
    except Exception:  # noqa: BLE001  (no source: run the original code)
        return None
    node = copy.deepcopy(src.node)
    node.decorator_list = []
    if not any(isinstance(n, (ast.BoolOp, ast.Not, ast.For, ast.While))
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
    stmts = []
    for n in names:
        # if "n" in locals(): n = __newt_carry(n)
        stmts.append(ast.If(
            test=ast.Compare(left=ast.Constant(n), ops=[ast.In()],
                             comparators=[_call("locals")]),
            body=[ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                             value=_call(_CARRY, ast.Name(id=n, ctx=ast.Load())))],
            orelse=[]))
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
