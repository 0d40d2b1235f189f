"""AST walker, control-flow half: `if`, `for`, `while` and ternaries -> structured IR regions.

A variable is *carried* by a loop when the body assigns it and it exists before the loop: the
loop op takes its value in, the body sees it as a block argument, and the body's final value is
yielded back. Its type must stay the same (Triton's rule); a variable first defined inside the
loop is not visible after it. Branches of a runtime `if` yield the variables either changed;
one defined in only one branch is not visible after the `if`.
"""
from __future__ import annotations

import ast

from .. import dtypes as D
from ..ir.core import Block, BlockType, ScalarType
from . import semantic
from .semantic import error, is_number
from .names import assigned_names, carryable, name_loads, within, written_first
from .values import Tensor, leaves, rebuild


class ControlFlow:
    """Mixin of CodeGen (visitor.py)."""

    # ------------------------------------------------------------------ helpers
    def _zero(self, t):
        """A placeholder value of type t (what a branch that returned yields: never used)."""
        b = self.b
        dt = t.dtype
        if dt.is_ptr():
            v = b.cast(b.constant(0, D.int64), dt, bitcast=True)
        else:
            v = b.constant(0, dt)
        return b.splat(v, t.shape) if isinstance(t, BlockType) else v

    def _leaf_types(self, name, values, want=None):
        """Tensors for `values` (numbers become constants of the wanted type)."""
        out = []
        for i, x in enumerate(values):
            if isinstance(x, Tensor):
                out.append(x)
            elif is_number(x):
                out.append(semantic.to_tensor(self.b, x, want[i].dtype if want else None))
                if want and want[i].shape:
                    out[-1] = semantic.broadcast_to_shape(self.b, out[-1], want[i].shape)
            else:
                error(f"`{name}` holds {x!r}, which cannot change at run time")
        return out

    # ------------------------------------------------------------------ if
    def visit_if(self, node, rest):
        """Returns (returned, consumed_rest)."""
        cond = self.visit(node.test)
        if not isinstance(cond, Tensor):
            # constexpr: prune, and continue with the rest in the same list (so a runtime
            # `if ...: return` inside the taken branch can own the rest too)
            return self.visit_stmts(list(node.body if cond else node.orelse) + list(rest)), True
        if cond.is_block():
            error(f"an `if` condition must be a scalar, got a block of shape {list(cond.shape)} "
                  f"(use nl.where for elementwise choices)")
        c = semantic.to_bool(self.b, cond)
        saved = self.scope
        then_blk, else_blk = Block(), Block()
        self.runtime_if += 1
        try:
            self.scope = dict(saved)
            with self.b.at(then_blk):
                t_ret = self.visit_stmts(node.body)
            then_scope = self.scope
            self.scope = dict(saved)
            consumed = False
            with self.b.at(else_blk):
                if t_ret:
                    e_ret = self.visit_stmts(list(node.orelse) + list(rest))
                    consumed = True
                else:
                    e_ret = self.visit_stmts(node.orelse)
            else_scope = self.scope
            if e_ret and not t_ret and rest:
                self.scope = then_scope
                with self.b.at(then_blk):
                    t_ret = self.visit_stmts(rest)
                then_scope = self.scope
                consumed = True
        finally:
            self.runtime_if -= 1
            self.scope = saved
        if not self.is_kernel and (t_ret or e_ret):
            return self._merge_return(c, node, saved, then_blk, then_scope, t_ret, else_blk,
                                      else_scope, e_ret)
        if (t_ret and e_ret) or (consumed and self.is_kernel and not self.runtime_if
                                 and not self.loop_depth and not self.static_depth):
            # nothing after this `if` can use its values: no results
            self.b.create("if", [c.v], [], {}, [then_blk, else_blk])
            with self.b.at(then_blk):
                self.b.yield_()
            with self.b.at(else_blk):
                self.b.yield_()
            return t_ret and e_ret, True
        self._merge_if(c, node, saved, then_blk, then_scope, t_ret, else_blk, else_scope, e_ret)
        return False, consumed

    def _merge_return(self, c, node, saved, then_blk, then_scope, t_ret, else_blk, else_scope,
                      e_ret):
        """An inlined function's `return` inside a runtime `if`: the `if` yields the returned
        value (the rest of the function was moved into the branch that did not return). A path
        that falls off the end returns None; one that would go on after an enclosing `if` or
        loop is an error."""
        ends = not (self.runtime_if or self.loop_depth or self.static_depth)
        if not (t_ret and e_ret) and not ends:
            error("a `return` inside a runtime `if` of an inlined @newt.jit function needs every "
                  "path through the enclosing `if`s to return (or compute the result with "
                  "nl.where and return once)")
        then_scope, else_scope = (dict(saved, **{RETURNED: sc.get(RETURNED)})
                                  for sc in (then_scope, else_scope))
        if (then_scope[RETURNED] is None) != (else_scope[RETURNED] is None):
            error("an inlined @newt.jit function returns a value on one path of this `if` and "
                  "None on the other")
        self._merge_if(c, node, saved, then_blk, then_scope, False, else_blk, else_scope, False)
        return True, True

    def _merge_if(self, c, node, saved, then_blk, then_scope, t_ret, else_blk, else_scope, e_ret):
        """Emit the `if` op: yield every variable a (non-returning) branch changed."""
        names = []
        for n in dict.fromkeys(list(then_scope) + list(else_scope)):
            pv = saved.get(n, _MISSING)
            tv = then_scope.get(n, _MISSING)
            ev = else_scope.get(n, _MISSING)
            if t_ret or e_ret:   # only the branch that goes on matters
                v = ev if t_ret else tv
                if v is pv or v is _MISSING:
                    continue
                if not carryable(v):
                    self.scope[n] = v   # a compile-time value: no region owns it
                    continue
                names.append((n, v, v))
                continue
            if tv is pv and ev is pv:
                continue
            if tv is _MISSING or ev is _MISSING:
                self.dead[n] = (f"`{n}` is assigned in only one branch of the `if` at line "
                                f"{self.src.loc(node).line}; define it before the `if` to use it "
                                f"after")
                self.scope.pop(n, None)
                continue
            if tv is ev:
                self.scope[n] = tv
                continue
            if not (carryable(tv) and carryable(ev)):
                if type(tv) is type(ev) and tv == ev:
                    self.scope[n] = tv
                    continue
                error(f"`{n}` gets different compile-time values in the branches of a runtime "
                      f"`if`")
            names.append((n, tv, ev))
        then_vals, else_vals, structure = [], [], []
        for n, tv, ev in names:
            tl, el = leaves(tv), leaves(ev)
            if len(tl) != len(el) or isinstance(tv, (tuple, list)) != isinstance(ev, (tuple, list)):
                error(f"`{n}` has a different structure in the two branches of the `if`")
            types = []
            for x, y in zip(tl, el):
                # a Python number adopts the other branch's type; two numbers use Triton's
                if isinstance(x, Tensor):
                    types.append(x.type)
                elif isinstance(y, Tensor):
                    types.append(y.type)
                else:
                    types.append(ScalarType(semantic.python_dtype(x)))
            with self.b.at(then_blk):
                tvals = [Tensor(self._zero(t), self.b) for t in types] if t_ret else \
                    self._leaf_types(n, tl, types)
            with self.b.at(else_blk):
                evals = [Tensor(self._zero(t), self.b) for t in types] if e_ret else \
                    self._leaf_types(n, el, types)
            for x, y in zip(tvals, evals):
                if x.type != y.type:
                    error(f"`{n}` has type {x.type} in the then branch but {y.type} in the else "
                          f"branch of the `if` (cast one of them with .to())")
            then_vals.extend(tvals)
            else_vals.extend(evals)
            structure.append((n, tv, [x.type for x in tvals]))
        with self.b.at(then_blk):
            self.b.yield_([v.v for v in then_vals])
        with self.b.at(else_blk):
            self.b.yield_([v.v for v in else_vals])
        _sink_return(then_blk)
        _sink_return(else_blk)
        all_types = [t for _, _, ts in structure for t in ts]
        op = self.b.create("if", [c.v], all_types, {}, [then_blk, else_blk])
        it = iter([Tensor(r, self.b) for r in op.results])
        for n, like, _ in structure:
            val = rebuild(like, it)
            for x in leaves(val):
                x.v.name = n
            self.scope[n] = val

    def runtime_ifexp(self, node, cond):
        if cond.is_block():
            error("a block cannot be the condition of `x if c else y` (use nl.where)")
        c = semantic.to_bool(self.b, cond)
        then_blk, else_blk = Block(), Block()
        with self.b.at(then_blk):
            tv = self.visit(node.body)
        with self.b.at(else_blk):
            ev = self.visit(node.orelse)
        if not isinstance(tv, Tensor) and not isinstance(ev, Tensor):
            if not (is_number(tv) and is_number(ev)):
                error("both sides of a runtime `x if c else y` must be numbers or blocks")
        want = tv.type if isinstance(tv, Tensor) else ev.type if isinstance(ev, Tensor) else \
            ScalarType(semantic.python_dtype(tv))
        with self.b.at(then_blk):
            (tv,) = self._leaf_types("x if c else y", [tv], [want])
        with self.b.at(else_blk):
            (ev,) = self._leaf_types("x if c else y", [ev], [want])
        if tv.type != ev.type:
            error(f"the two sides of `x if c else y` have different types: {tv.type} and "
                  f"{ev.type}")
        with self.b.at(then_blk):
            self.b.yield_([tv.v])
        with self.b.at(else_blk):
            self.b.yield_([ev.v])
        return Tensor(self.b.create("if", [c.v], [tv.type], {}, [then_blk, else_blk]).result,
                      self.b)

    # ------------------------------------------------------------------ loops
    def _carried(self, node, exclude=()):
        """(assigned names, carried names, compile-time names the body must not change).

        A name defined before the loop and assigned in the body is carried, unless it is a
        temporary: the body writes it before reading it, and the function never reads it
        outside the loop body (so no iteration and no later code sees the old value)."""
        body = node.body
        names = assigned_names(body)
        carried, fixed = [], []
        for n in names:
            if n in exclude or n not in self.scope:
                continue
            if written_first(body, n) and not self._read_later(node, n):
                continue
            (carried if carryable(self.scope[n]) else fixed).append(n)
        return names, carried, fixed

    def _read_later(self, loop, name) -> bool:
        """Could code outside `loop`'s body read `name` after the loop started? Reads after the
        loop count; inside an enclosing device loop, any read outside the body does."""
        end = (loop.end_lineno, loop.end_col_offset)
        start = (loop.lineno, loop.col_offset)
        for n in name_loads(self.src.node).get(name, ()):
            pos = (n.lineno, n.col_offset)
            if isinstance(loop, ast.While) and within(n, loop.test):
                return True        # the test runs again after every iteration of the body
            if start <= pos <= end:
                continue
            if self.loop_depth or self.static_depth or pos > end:
                return True
        return False

    def _loop_inits(self, carried):
        inits, likes = [], []
        for n in carried:
            v = self.scope[n]
            ls = self._leaf_types(n, leaves(v))
            inits.extend(ls)
            likes.append(v)
        return inits, likes

    def _bind_carried(self, carried, likes, args):
        it = iter([Tensor(a, self.b) for a in args])
        for n, like in zip(carried, likes):
            val = rebuild(like, it)
            for x in leaves(val):
                x.v.name = n
            self.scope[n] = val

    def _yield_carried(self, carried, likes, inits, what):
        vals = []
        k = 0
        for n, like in zip(carried, likes):
            new = self.scope[n]
            nl_, ol = leaves(new), leaves(like)
            if len(nl_) != len(ol) or isinstance(new, (tuple, list)) != isinstance(like, (tuple, list)):
                error(f"loop-carried variable `{n}` changes structure inside the {what}")
            want = [i.type for i in inits[k:k + len(ol)]]
            ts = self._leaf_types(n, nl_, want)
            for t, w in zip(ts, want):
                if t.type != w:
                    error(f"loop-carried variable `{n}` has type {w} before the {what} but "
                          f"{t.type} at the end of its body; its type must stay the same "
                          f"(initialize it with the final type, e.g. nl.zeros(..., dtype) or "
                          f"x.to(...))")
            vals.extend(ts)
            k += len(ol)
        self.b.yield_([v.v for v in vals])

    def _after_loop(self, node, names, carried, fixed, saved, results, likes, what):
        body_scope = self.scope
        self.scope = saved
        for n in fixed:
            new, old = body_scope.get(n), saved[n]
            if not (new is old or (type(new) is type(old) and new == old)):
                error(f"`{n}` holds a compile-time value ({saved[n]!r}) that the {what} body "
                      f"changes; only numbers and blocks can change in a loop")
        self._bind_carried(carried, likes, results)
        line = self.src.loc(node).line
        for n in names:
            if n not in saved:
                self.dead[n] = (f"`{n}` is defined inside the {what} at line {line} and cannot be "
                                f"used after it (define it before the loop)")

    def visit_For(self, node):
        from ..language import range as nl_range, static_range
        if node.orelse:
            error("for ... else is not supported inside a kernel")
        it = node.iter
        fn, args, kwargs = None, [], {}
        if isinstance(it, ast.Call):
            fn = self.visit(it.func)
            if fn in (range, nl_range, static_range):
                args = [self.visit(a) for a in it.args]
                kwargs = {k.arg: self.visit(k.value) for k in it.keywords}
            else:
                fn = None
        if fn is None:
            seq = self.visit(it)
            if isinstance(seq, (tuple, list)):
                return self._unrolled(node, list(seq))
            error("a for loop must iterate over range(...), nl.range(...), nl.static_range(...) "
                  "or a compile-time tuple")
        if fn is static_range:
            r = static_range(*args, **kwargs)
            bounds = (r.start, r.end, r.step)
            if any(isinstance(x, Tensor) for x in bounds):
                error("nl.static_range bounds must be compile-time constants")
            return self._unrolled(node, list(range(*bounds)))
        r = nl_range(*args, **kwargs)
        return self._device_for(node, r.start, r.end, r.step, r.num_stages)

    def _unrolled(self, node, values):
        self.static_depth += 1
        try:
            for v in values:
                self.assign(node.target, v)
                if self.visit_stmts(node.body):
                    return True
        finally:
            self.static_depth -= 1
        return False

    def _device_for(self, node, lb, ub, step, num_stages):
        b = self.b
        if not isinstance(node.target, ast.Name):
            error("a device loop variable must be a single name")
        for x, what in ((lb, "start"), (ub, "stop"), (step, "step")):
            if isinstance(x, Tensor):
                if x.is_block():
                    error(f"range {what} must be a scalar, got a block")
                if not x.dtype.is_int():
                    error(f"range {what} must be an integer, got {x.dtype.name}")
            elif not isinstance(x, int) or isinstance(x, bool):
                error(f"range {what} must be an integer, got {x!r}")
        if not isinstance(step, Tensor) and step == 0:
            error("range step is 0")
        # A constant negative step (Python's countdown, which Triton accepts) runs as the
        # ascending loop over range(ub, lb, -step), its variable read as lb + ub - v: the
        # same values in the same order, and every pass sees a loop that counts up.
        down = not isinstance(step, Tensor) and step < 0
        if down:
            lb, ub, step = ub, lb, -step
        if num_stages is not None and (isinstance(num_stages, Tensor) or not isinstance(num_stages, int)):
            error("num_stages must be a compile-time int")
        dt = D.int32
        for x in (lb, ub, step):
            xd = x.dtype if isinstance(x, Tensor) else semantic.python_dtype(x)
            if xd.is_bool():
                xd = D.int32
            dt = D.integer_promote(dt, xd)
        lbv, ubv, stv = (semantic.cast(b, x, dt) for x in (lb, ub, step))
        ends = semantic.binary(b, "add", lbv, ubv) if down else None
        target = node.target.id
        names, carried, fixed = self._carried(node, exclude=(target,))
        inits, likes = self._loop_inits(carried)
        op = b.for_(lbv.v, ubv.v, stv.v, [v.v for v in inits], num_stages)
        body = op.regions[0]
        saved = self.scope
        self.scope = dict(saved)
        self.loop_depth += 1
        try:
            with b.at(body):
                iv = Tensor(body.args[0], b)
                if down:
                    iv = semantic.binary(b, "sub", ends, iv)
                iv.v.name = target
                self.scope[target] = iv
                self.dead.pop(target, None)
                self._bind_carried(carried, likes, body.args[1:])
                self.visit_stmts(node.body)
                self._yield_carried(carried, likes, inits, "loop")
        finally:
            self.loop_depth -= 1
        self._after_loop(node, names, carried, fixed, saved, op.results, likes, "loop")
        if target not in saved:
            self.dead[target] = (f"`{target}` is the variable of the loop at line "
                                 f"{self.src.loc(node).line} and cannot be used after it")
        return False

    def visit_While(self, node):
        b = self.b
        if node.orelse:
            error("while ... else is not supported inside a kernel")
        names, carried, fixed = self._carried(node)
        inits, likes = self._loop_inits(carried)
        op = b.while_([v.v for v in inits])
        cond_blk, body = op.regions
        saved = self.scope
        self.loop_depth += 1
        try:
            self.scope = dict(saved)
            with b.at(cond_blk):
                self._bind_carried(carried, likes, cond_blk.args)
                c = self.visit(node.test)
                if not isinstance(c, Tensor):
                    error("a while condition must be a runtime scalar (a compile-time condition "
                          "would loop forever or never)")
                if c.is_block():
                    error(f"a while condition must be a scalar, got a block of shape "
                          f"{list(c.shape)}")
                b.condition(semantic.to_bool(b, c).v)
            self.scope = dict(saved)
            with b.at(body):
                self._bind_carried(carried, likes, body.args)
                self.visit_stmts(node.body)
                self._yield_carried(carried, likes, inits, "while loop")
        finally:
            self.loop_depth -= 1
        self._after_loop(node, names, carried, fixed, saved, op.results, likes, "while loop")
        return False


_MISSING = object()
RETURNED = "return value"    # the scope entry of an inlined function's value returned in an `if`


def _sink_return(block):
    """Keep `return` last before the terminator (placeholder yields were built after it)."""
    for i, op in enumerate(block.ops):
        if op.opcode == "return" and i != len(block.ops) - 2:
            block.ops.append(block.ops.pop(i))
            block.ops[-1], block.ops[-2] = block.ops[-2], block.ops[-1]
            return
