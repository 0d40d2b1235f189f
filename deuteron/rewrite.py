"""Rewriting a kernel function so that `if` statements inside its tile loops can branch on values
computed in the kernel (branches.py traces them).

Consumes the user's function (its source, through inspect); produces a function of the same
code with each such `if` turned into calls of deuteron.branches, or the function itself when
there is none (or its source cannot be read). Line numbers are kept, so errors still point at
the user's lines. Under a branch on a host value (and in the oracle) the rewritten code does
what the `if` did. An `if` whose branches hold `break`, `continue` or `return` is left alone
(those would leave the rewritten form), as are ifs outside tile loops; first, an
`if ...: ...; continue` in a tile loop's body becomes an if / else holding the rest of the body.
A `while` inside a tile loop (without `else` or `return`) gets its test through branches.py
too, which traces it when the test is a kernel value; a `break` in it (under `if`s only)
becomes a flag that fails the next test, the rest of the body moved into the sides that go on:

    while test:                      stop = False; w = <deuteron.branches>.enter_while()
        a                   ->       while w.test(w.go(stop) and test, locals()):
        if c:                            a
            break                        if c: stop = True
        b                                else: b
                                     w.done()

    if test:                         b = <deuteron.branches>.enter(test, locals())
        body                         if b.then():
    else:                                body
        orelse               ->      if b.other(locals()):
                                         if b.traced: x = b.before("x") ...   (then's names)
                                         orelse
                                     if b.traced:
                                         b.close(locals(), ("x", ...)); x = b.merged("x") ...
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types

_LOOPS = ("tile", "grid", "jagged_tile", "vtile")


def with_branches(fn):
    """fn rewritten (see the module docstring), or fn when nothing needs rewriting."""
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return fn
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return fn
    count = _Rewriter().rewrite(fdef)
    if not count:
        return fn
    fdef.decorator_list = []
    ast.increment_lineno(tree, start - 1)
    indent = len(lines[0]) - len(lines[0].lstrip())
    for node in ast.walk(tree) if indent else ():    # columns as in the file (errors' carets)
        if getattr(node, "col_offset", None) is not None:
            node.col_offset += indent
            if getattr(node, "end_col_offset", None) is not None:
                node.end_col_offset += indent
    free = fn.__code__.co_freevars
    if free:      # compile inside a function whose locals are the free names: same closure
        outer = ast.FunctionDef(name="__deuteron_outer__", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in free], kwonlyargs=[], kw_defaults=[],
            defaults=[]), body=[fdef], decorator_list=[], returns=None)
        tree.body = [ast.copy_location(outer, fdef)]
    ast.fix_missing_locations(tree)
    for node in ast.walk(tree):     # new nodes took a span from a neighbour: keep it ordered
        if getattr(node, "end_lineno", None) is not None and node.end_lineno < node.lineno:
            node.end_lineno, node.end_col_offset = node.lineno, node.col_offset + 1
    try:
        code = compile(tree, fn.__code__.co_filename, "exec")
    except SyntaxError:
        return fn
    if free:
        code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    code = next(c for c in code.co_consts if isinstance(c, types.CodeType)
                and c.co_name == fn.__code__.co_name)
    if code.co_freevars != free:
        return fn
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__, new.__annotations__ = fn.__kwdefaults__, fn.__annotations__
    new.__qualname__, new.__module__ = fn.__qualname__, fn.__module__
    return new


def _is_tile_loop(node) -> bool:
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return False
    f = node.iter.func
    return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) in _LOOPS


def _leaves(stmts) -> bool:
    """Do these statements hold a break / continue / return outside nested loops/functions?"""
    for s in stmts:
        for node in _walk_same_frame(s, loops=True):
            if isinstance(node, (ast.Break, ast.Continue, ast.Return)):
                return True
    return False


def _has(stmts, kinds) -> bool:
    """Do these statements hold a node of `kinds` of their own loop (not of a loop inside)?"""
    return any(isinstance(node, kinds) for s in stmts for node in _walk_same_frame(s, loops=True))


def _breaks_in_ifs(stmts) -> bool:
    """Is every `break` of these statements' loop in them or in `if`s only (not in a `with` or
    `try`), so that `_without_break` can rewrite it?"""
    for s in stmts:
        if isinstance(s, ast.If):
            if not (_breaks_in_ifs(s.body) and _breaks_in_ifs(s.orelse)):
                return False
        elif not isinstance(s, ast.Break) and _has([s], ast.Break):
            return False
    return True


def _without_break(stmts, flag):
    """A `while` body with each `break` turned into `flag = True`, the rest of the body moved
    into the sides of the `if`s around it that go on (as `_without_continue` does)."""
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Break):
            return stmts[:i] + [ast.copy_location(
                ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(True)), s)]
        if isinstance(s, ast.If) and _has([s], ast.Break):
            rest = stmts[i + 1:]
            s.body = _without_break(s.body + copy.deepcopy(rest), flag) or [ast.Pass()]
            s.orelse = _without_break(s.orelse + copy.deepcopy(rest), flag)
            return stmts[:i] + [s]
    return stmts


def _walk_same_frame(node, loops=False):
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if loops and isinstance(child, (ast.For, ast.While)):
            yield from (n for n in _walk_same_frame(child, loops)
                        if not isinstance(n, (ast.Break, ast.Continue)))
            continue
        yield from _walk_same_frame(child, loops)


def _stored(stmts) -> list:
    names = []
    for s in stmts:
        for node in _walk_same_frame(s):
            # (a while's break flag is merged after an `if` like any name)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) \
                    and not node.id.startswith(("__deuteron_if", "__deuteron_while")) \
                    and node.id not in names:
                names.append(node.id)
    return names


def _continues(s) -> bool:
    """Does statement s hold a `continue` of the loop around it (not of a loop inside it)?"""
    return any(isinstance(n, ast.Continue) for n in _walk_same_frame(s, loops=True))


def _without_continue(stmts):
    """A loop body with each `if ...: ...; continue` turned into an if / else holding the rest
    of the body (copied into every side that goes on), so the `if` can be traced."""
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Continue):
            return stmts[:i]
        if isinstance(s, ast.If) and _continues(s) and not any(
                isinstance(n, (ast.Break, ast.Return)) for n in _walk_same_frame(s, loops=True)):
            rest = stmts[i + 1:]
            s.body = _without_continue(s.body + copy.deepcopy(rest))
            s.orelse = _without_continue(s.orelse + copy.deepcopy(rest))
            return stmts[:i] + [s]
    return stmts


def _inside(node, tree) -> bool:
    return any(node is n for n in ast.walk(tree))


class _Rewriter:
    def __init__(self):
        self.count = 0

    def rewrite(self, fdef) -> int:
        fdef.body = self._stmts(fdef.body, inside=False)
        return self.count

    def _stmts(self, stmts, inside):
        out = []
        if inside:
            stmts = _without_continue(stmts)
        for s in stmts:
            if isinstance(s, ast.If) and inside and not _leaves(s.body + s.orelse):
                out += self._branch(s)
                continue
            if isinstance(s, ast.While) and inside and not s.orelse and not _has(
                    s.body, ast.Return) and _breaks_in_ifs(s.body):
                out += self._while(s)
                continue
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, field, None), list) and not isinstance(
                        s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    body = getattr(s, field)
                    if _is_tile_loop(s) and field == "body":   # `continue` of this loop: an else
                        body = _without_continue(body)
                    setattr(s, field, self._stmts(body, inside or _is_tile_loop(s)))
            out.append(s)
        return out

    def _while(self, s):
        """`while test: body` -> w = enter_while(); while w.test(test, locals()): body;
        w.done() (branches.py traces it when the test is a kernel value)."""
        self.count += 1
        w = f"__deuteron_while{self.count}__"
        module = ast.parse('__import__("deuteron.branches", fromlist=["enter_while"])',
                           mode="eval").body
        enter = ast.Call(ast.Attribute(module, "enter_while", ast.Load()), [], [])
        first = []
        if _has(s.body, ast.Break):    # `w.go(stop) and test`: a break sets stop, the test fails
            flag = f"__deuteron_stop{self.count}__"
            s.body = _without_break(s.body, flag)
            first = [ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(False))]
            go = ast.Call(ast.Attribute(ast.Name(w, ast.Load()), "go", ast.Load()),
                          [ast.Name(flag, ast.Load())], [])
            s.test = ast.BoolOp(ast.And(), [ast.copy_location(go, s.test), s.test])
        test = ast.Call(ast.Attribute(ast.Name(w, ast.Load()), "test", ast.Load()),
                        [s.test, ast.Call(ast.Name("locals", ast.Load()), [], [])], [])
        for node in ast.walk(test):           # errors raised in test() point at the test
            if node is not s.test and not _inside(node, s.test):
                ast.copy_location(node, s.test)
        s.test = test
        s.body = self._stmts(s.body, True)
        done = ast.Expr(ast.Call(ast.Attribute(ast.Name(w, ast.Load()), "done", ast.Load()),
                                 [], []))
        new = first + [ast.Assign([ast.Name(w, ast.Store())], enter), s, done]
        for n in new:
            if n is not s:
                ast.copy_location(n, s)
        return new

    def _branch(self, s):
        self.count += 1
        b = f"__deuteron_if{self.count}__"
        body, orelse = self._stmts(s.body, True), self._stmts(s.orelse, True)
        then_names, names = _stored(s.body), _stored(s.body + s.orelse)

        def call(method, *args):
            return ast.Call(ast.Attribute(ast.Name(b, ast.Load()), method, ast.Load()),
                            list(args), [])

        def loc():
            return ast.Call(ast.Name("locals", ast.Load()), [], [])

        def assign(name, value):
            return ast.Assign([ast.Name(name, ast.Store())], value)

        traced = ast.Attribute(ast.Name(b, ast.Load()), "traced", ast.Load())
        restore = [assign(n, call("before", ast.Constant(n))) for n in then_names]
        merge = [ast.Expr(call("close", loc(), ast.Tuple([ast.Constant(n) for n in names],
                                                          ast.Load())))]
        merge += [assign(n, call("merged", ast.Constant(n))) for n in names]
        module = ast.parse('__import__("deuteron.branches", fromlist=["enter"])',
                           mode="eval").body
        enter = ast.Call(ast.Attribute(module, "enter", ast.Load()), [s.test, loc()], [])
        for node in ast.walk(enter):          # errors raised in enter() point at the test
            if node is not s.test and not _inside(node, s.test):
                ast.copy_location(node, s.test)
        new = [assign(b, enter),
               ast.If(call("then"), body or [ast.Pass()], []),
               ast.If(call("other", loc()),
                      ([ast.If(traced, restore, [])] if restore else []) + (orelse or [ast.Pass()]),
                      []),
               ast.If(traced, merge, [])]
        for n in new:
            ast.copy_location(n, s)
        return new
