"""Mask pass: masks that value ranges prove all-true are dropped.

Where it sits: the first pass, on the frontend's IR. It changes what the IR computes only where
the result is provably the same: a load or store whose mask is true in every lane becomes an
unmasked one, `where(c, x, y)` with c true (false) everywhere becomes x (y), `a & b` with b
true everywhere becomes a. Ops left without uses by these rewrites are removed.

Why: with constexpr sizes (deuteron's static shapes, `N: nl.constexpr` in a kernel), bounds
checks such as `offs_k < K` with `offs_k = arange(0, 64)` and K = 64, or `start_n + arange(0,
64) < N` inside `for start_n in range(0, N, 64)` with N = 4096, are true in every lane. Left in,
they cost a compare and a select per element, and a mask that varies along a tile's contiguous
axis keeps the dot pipeline from copying the tile in 16-byte chunks.

The ranges: each integer value gets an interval [lo, hi] of what any lane may hold, or none.
Constants, `arange`, `program_id` (>= 0), shape ops and casts that keep the value, add / sub /
mul, `//` and `%` of a non-negative value by a positive constant, maximum / minimum, and the
induction variable of a `for` whose bounds and step are constants (inside the body the loop
runs, so lb <= iv <= the last value it takes). An interval that leaves its type's range is
dropped (the arithmetic could wrap). A comparison of two intervals that do not overlap is
decided; booleans carry [1, 1], [0, 0] or [0, 1] through `&`, `|` and the shape ops.
"""
from __future__ import annotations

from ..ir.core import Op

_SAME = ("splat", "broadcast", "reshape", "permute", "convert_layout")
# ops with no effect but their results: removed once nothing reads them
_PURE = {"constant", "arange", "splat", "broadcast", "reshape", "permute", "cast", "binary",
         "unary", "select", "fma", "addptr", "program_id", "num_programs", "convert_layout"}
_PID_MAX = 2 ** 31 - 1
_COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")
_BOOL_ALIAS = {"maximum": "or", "minimum": "and"}   # max / min of booleans


def drop_true_masks(fn, options=None):
    rng: dict = {}
    sub: dict = {}
    changed = False
    for op in list(fn.walk()):
        if sub:
            op.operands = [sub.get(o.id, o) for o in op.operands]
        if op.opcode == "for":
            _loop_range(op, rng)
        r = _range(op, rng)
        if r is not None and op.results and _fits(op.result, r):
            rng[op.result.id] = r
        changed |= _simplify(op, rng, sub)
    if changed:
        remove_dead(fn)
    return fn


def _range(op: Op, rng):
    """[lo, hi] of op's single integer or boolean result, or None."""
    if len(op.results) != 1:
        return None
    res = op.result
    if not res.dtype.is_int():      # (bool included)
        return None
    get = (lambda i: rng.get(op.operands[i].id))   # noqa: E731
    k = op.opcode
    if k == "constant":
        return (int(op.attrs["value"]),) * 2
    if k == "arange":
        return (op.attrs["start"], op.attrs["end"] - 1)
    if k == "program_id":
        return (0, _PID_MAX)
    if k in _SAME:
        return get(0)
    if k == "cast" and not op.attrs.get("bitcast") and op.operands[0].dtype.is_int():
        return get(0)           # int -> int: _fits drops it when the value does not fit
    if k != "binary":
        return None
    a, b = get(0), get(1)
    if a is None or b is None:
        return None
    name = op.attrs["op"]
    if res.dtype.is_bool():
        name = _BOOL_ALIAS.get(name, name) if op.operands[0].dtype.is_bool() else name
        if name in ("and", "or"):
            f = (lambda x, y: x & y) if name == "and" else (lambda x, y: x | y)  # noqa: E731
            return (f(a[0], b[0]), f(a[1], b[1]))
        if name == "xor":   # decided only when both sides are
            return (a[0] ^ b[0],) * 2 if a[0] == a[1] and b[0] == b[1] else (0, 1)
        if name in _COMPARES and op.operands[0].dtype.is_int():
            return _compare(name, a, b)
        return None     # any other op on booleans: no range, the op stays as it is
    if name == "add":
        return (a[0] + b[0], a[1] + b[1])
    if name == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if name == "mul":
        p = [x * y for x in a for y in b]
        return (min(p), max(p))
    if name in ("maximum", "minimum"):
        f = max if name == "maximum" else min
        return (f(a[0], b[0]), f(a[1], b[1]))
    if name in ("idiv", "mod") and a[0] >= 0 and b[0] == b[1] and b[0] > 0:
        c = b[0]
        return (a[0] // c, a[1] // c) if name == "idiv" else (0, min(a[1], c - 1))
    return None


def _compare(name, a, b):
    """[1, 1] / [0, 0] when every pair of values compares the same way, else [0, 1]."""
    yes = {"lt": a[1] < b[0], "le": a[1] <= b[0], "gt": a[0] > b[1], "ge": a[0] >= b[1],
           "eq": a[0] == a[1] == b[0] == b[1], "ne": a[1] < b[0] or a[0] > b[1]}[name]
    no = {"lt": a[0] >= b[1], "le": a[0] > b[1], "gt": a[1] <= b[0], "ge": a[1] < b[0],
          "eq": a[1] < b[0] or a[0] > b[1], "ne": a[0] == a[1] == b[0] == b[1]}[name]
    return (1, 1) if yes else (0, 0) if no else (0, 1)


def _loop_range(op: Op, rng):
    """The induction variable of a loop with constant bounds and step (positive: the frontend
    checks it): inside the body the loop runs, so it takes lb, lb + step, ... up to the last
    value below ub."""
    bounds = [rng.get(o.id) for o in op.operands[:3]]
    if any(b is None or b[0] != b[1] for b in bounds):
        return
    lb, ub, step = (b[0] for b in bounds)
    if step > 0 and ub > lb:
        rng[op.regions[0].args[0].id] = (lb, lb + (ub - lb - 1) // step * step)


def _fits(v, r) -> bool:
    t = v.dtype
    if t.is_bool():
        return 0 <= r[0] <= r[1] <= 1
    lo, hi = (-2 ** (t.bits - 1), 2 ** (t.bits - 1) - 1) if t.is_signed() else (0, 2 ** t.bits - 1)
    return lo <= r[0] <= r[1] <= hi


def _simplify(op: Op, rng, sub) -> bool:
    """Rewrite op when a boolean operand is decided; True if something changed."""
    def decided(v):
        r = rng.get(v.id)
        return r[0] if r is not None and r[0] == r[1] else None

    k = op.opcode
    if k == "binary" and op.attrs["op"] in ("and", "or") and op.result.dtype.is_bool():
        a, b = op.operands
        keep = {"and": 1, "or": 0}[op.attrs["op"]]     # x & true == x, x | false == x
        for x, y in ((a, b), (b, a)):
            if decided(y) == keep:
                sub[op.result.id] = x
                return True
        return False
    if k == "select":
        c = decided(op.operands[0])
        if c is not None:
            sub[op.result.id] = op.operands[1 if c else 2]
            return True
        return False
    if k in ("load", "store") and op.attrs.get("has_mask"):
        m = 1 if k == "load" else 2
        if decided(op.operands[m]) == 1:
            op.operands = op.operands[:m]           # the mask and a load's `other` go
            op.attrs["has_mask"] = False
            if k == "load":
                op.attrs["has_other"] = False
            return True
    return False


def remove_dead(fn):
    """Remove pure ops whose results nothing reads. Walked backwards, an op's readers are seen
    before it (a loop's body before the loop), so one walk removes whole dead chains."""
    uses = {k: len(v) for k, v in fn.uses().items()}
    for op in reversed(list(fn.walk())):
        if op.opcode in _PURE and op.results and not any(uses.get(r.id) for r in op.results):
            op.parent.ops.remove(op)
            for o in op.operands:
                uses[o.id] -= 1
