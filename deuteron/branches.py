"""Tracing `if` on values computed in the kernel: what the code rewrite.py makes of an `if`
inside a tile loop calls.

`enter(test, locals)` looks at the test: a scalar tile value (a loaded scalar, a tile's
`.begin`, a comparison of them) makes a traced branch, anything else (a host value, or a torch
tensor in the oracle) a plain one that does what the `if` did. A traced branch records an
`ir.If` in the current block and runs BOTH sides once, each into its own block: `then()` and
`other()` switch the block, and before the else side runs the names the then side assigned are
put back (`before`). `close` compares each assigned name after either side: where they differ,
a `phi` value (lowered to a variable both sides assign) is what the name holds after the `if`;
a name only one side defines is unusable after it.

`while` on a scalar kernel value (rewrite.py turns its test into `w.test(test, locals())`): the
first test opens an `ir.Loop` without dims and the body runs once into it; the second test,
evaluated at the end of the body, is the value the loop tests next, carried with the names
the body updates (Tracer.finish_loop). A host or oracle test makes a plain `while`.
"""
from __future__ import annotations

import torch

from . import ir, ops
from .errors import TraceError, user_loc


class _Undefined:
    """What a name holds after a traced `if` when only one side (or neither) defined it."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return (f"<`{self.name}`: defined on only one side of an `if` on a kernel value, so "
                "undefined after it>")


def enter(test, local_names):
    from .proxy import TileValue
    if isinstance(test, TileValue) and test.tracer.program is not None:
        return _Traced(test, dict(local_names))
    return _Plain(test)


class _Plain:
    traced = False

    def __init__(self, test):
        self.value = bool(test)

    def then(self):
        return self.value

    def other(self, local_names):
        return not self.value


class _Traced:
    traced = True

    def __init__(self, test, local_names):
        tr, loc = test.tracer, user_loc()
        if test.rank:
            raise TraceError("Python control flow on a tile of values: an `if` needs a scalar "
                             "(one value per program: a loaded scalar, tile.begin); for a "
                             "per-element choice use torch.where", loc)
        cond = test if test.dtype == torch.bool else ops.binary(tr, "ne", test, 0)
        self.tracer, self.before_names = tr, local_names
        self.node = ir.If(cond, parent=tr.current_block, loc=loc)
        tr.current_block.append(self.node)
        tr.parents[id(self.node.then)] = tr.parents[id(self.node.other)] = tr.current_block

    def then(self):
        self.tracer.current_block = self.node.then
        return True

    def other(self, local_names):
        self.after_then = dict(local_names)
        self.tracer.current_block = self.node.other
        return True

    def before(self, name):
        return self.before_names.get(name, _Undefined(name))

    def close(self, local_names, names):
        tr, node = self.tracer, self.node
        after_else = dict(local_names)
        tr.current_block = node.parent
        self.out = {}
        for name in names:
            t, e = self.after_then.get(name, _MISSING), after_else.get(name, _MISSING)
            if t is e:
                self.out[name] = t if t is not _MISSING else _Undefined(name)
            elif not all(isinstance(v, (ir.Value, int, float)) for v in (t, e)):
                self.out[name] = _Undefined(name)
            else:
                self.out[name] = self._phi(name, t, e)

    def _phi(self, name, t, e):
        tr, node = self.tracer, self.node
        values = [v for v in (t, e) if isinstance(v, ir.Value)]
        if values:
            dims, dtype = values[0].dims, values[0].dtype
            if len(values) == 2:
                dtype = torch.promote_types(t.dtype, e.dtype)
        else:       # two numbers: a scalar of the kernel's type for them (a literal's)
            dims = ()
            dtype = (torch.bool if all(isinstance(v, bool) for v in (t, e)) else
                     torch.float32 if any(isinstance(v, float) for v in (t, e)) else torch.int32)
        t = self._in_block(node.then, t, dims, dtype)
        e = self._in_block(node.other, e, dims, dtype)
        if not ir.dims_match(t.dims, e.dims):
            raise TraceError(f"`{name}` has different tile shapes on the two sides of an `if` "
                             "on a kernel value", node.loc)
        v = tr.new("phi", [t, e], t.dims, dtype, None, node=node)
        v.name = name
        node.merges.append(v)
        return v

    def _in_block(self, block, v, dims, dtype):
        """v as a value of `dtype` made on that side (a number becomes a full tile)."""
        tr = self.tracer
        saved, tr.current_block = tr.current_block, block
        try:
            if not isinstance(v, ir.Value):
                return tr.new("full", [], dims, dtype, v, value=v)
            return ops.cast(tr, v, dtype)
        finally:
            tr.current_block = saved

    def merged(self, name):
        return self.out[name]


_MISSING = object()


def enter_while():
    return _While()


class _While:
    def __init__(self):
        self.state, self.stop = "start", False

    def go(self, stop):
        """Before each test of a `while` holding a `break`: False once a break set `stop` (a
        host bool); while traced, True, and the test then fails where `stop` (a kernel value
        after an `if` that breaks) holds."""
        if self.state == "body":
            self.stop = stop
            return True
        if isinstance(stop, ir.Value):
            raise TraceError("a `break` under an `if` on a kernel value leaves a `while` whose "
                             "test is a host value: make the test a kernel value too",
                             user_loc())
        return not stop

    def test(self, value, local_names):
        from .proxy import TileValue
        if self.state == "start":
            traced = isinstance(value, TileValue) and value.tracer.program is not None
            self.state = "body" if traced else "plain"
            if traced:
                self._open(value, local_names)
                return True
        if self.state == "plain":
            return bool(value)
        if self.state == "body":
            self._close(value, local_names)
            self.state = "closed"
            return False
        raise AssertionError("a traced `while` tested after it closed")

    def done(self):
        if self.state == "body":
            raise TraceError("a `while` on a kernel value was left without testing its "
                             "condition again (a `break`?): its body must end by reaching "
                             "the test", self.node.loc)

    def _cond(self, value):
        tr = value.tracer
        if not isinstance(value, ir.Value) or value.tracer is not self.tracer or value.rank:
            raise TraceError("Python control flow on a tile of values: a `while` needs a "
                             "scalar condition (one value per program: a loaded scalar, a "
                             "reduction, tile.begin) before and after its body", user_loc())
        if value.attrs.get("partial") is not None:
            # a reduction over the launch grid's tile: each program would test its own tile,
            # the oracle the whole dim, and they could loop a different number of times
            raise value.attrs["partial"]
        return value if value.dtype == torch.bool else ops.binary(tr, "ne", value, 0)

    def _open(self, value, local_names):
        tr = self.tracer = value.tracer
        cond = self._cond(value)
        self.node = ir.Loop([], parent=tr.current_block, loc=user_loc())
        tr.current_block.append(self.node)
        tr.parents[id(self.node.items)] = tr.current_block
        self.outer, tr.current_block = tr.current_block, self.node.items
        self.start, self.first = dict(local_names), cond

    def _close(self, value, local_names):
        tr, loop = self.tracer, self.node
        nxt = self._cond(value)
        if isinstance(self.stop, ir.Value):
            nxt = ops.binary(tr, "and", ops.unary(tr, "invert", self._cond(self.stop)), nxt)
        elif self.stop:                # a break on every path: the body runs at most once
            nxt = tr.new("full", [], (), torch.bool, False, value=False)
        tr.finish_loop(loop, self.start, dict(local_names))
        loop.cond = ir.Carried("cond", self.first, nxt)
        loop.carried.append(loop.cond)
        tr.current_block = self.outer
