"""Which arguments a deuteron kernel may write, read from its source: asked by torch.compile
support (torch_ops.py) at trace time, never by a call.

Under torch.compile a call that writes none of its arguments is the functional op
`deuteron::call`; one that does declares mutated exactly the tensors it may write, so that the
compiled graph copies back into (and runs without CUDA graphs for) only the graph inputs the
kernel really stores into. The rule over-approximates, so that no write is missed: a local name
bound to an expression that may be a view of a parameter (the name itself, an index, a method
call on it, a tuple holding it; not its shape, dtype or a fresh `empty_like` / `zeros` / `clone`)
stands for that parameter, and a parameter is written where such a name is assigned into
(`x[t] = ...`), has an in-place method called (`x.copy_(...)`) or is an `out=`, or where the
parameter itself is augmented (`x += y`; on a local, a loaded tile, that is a new value).
Where the source cannot be read, every tensor is taken as written.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

_META = {"shape", "dtype", "device", "ndim", "size", "stride", "numel", "dim", "element_size",
         "is_contiguous", "item", "data_ptr", "storage_offset"}
_FRESH = {"empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "tensor",
          "clone", "empty_strided", "linspace"}
_VALUES = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Constant, ast.JoinedStr,
           ast.Lambda)


def written_tensors(fn, layout: tuple, kwarg_names: tuple) -> tuple:
    """Indices of the call's tensors (layout entries ("t", index), positional values first,
    then those of `kwarg_names`) that `fn` may write."""
    names = written_params(fn)
    params = list(inspect.signature(fn).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    var_kw = next((p.name for p in params if p.kind == p.VAR_KEYWORD), None)
    n = len(layout) - len(kwarg_names)
    written = set()
    for pos, (kind, v) in enumerate(layout):
        if kind != "t":
            continue
        if pos < n:
            name = positional[pos] if pos < len(positional) else var
        else:
            name = kwarg_names[pos - n]
            name = name if any(p.name == name for p in params) else var_kw
        if names is None or name is None or name in names:
            written.add(v)
    return tuple(sorted(written))


def written_params(fn):
    """Names of the parameters `fn` may write (a frozenset), or None where its source cannot
    be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    bindings, writes, rebound = [], [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            bindings += [b for t in node.targets for b in _pairs(t, node.value)]
            writes += [s for t in node.targets for s in _stores(t) if not isinstance(s, ast.Name)]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            bindings.append((node.target, node.value))
            writes += [s for s in _stores(node.target) if not isinstance(s, ast.Name)]
        elif isinstance(node, ast.AugAssign):
            # `x += y` on a parameter is in place; on a local (a loaded tile, an int) it is
            # taken as a value, as deuteron's kernels treat it
            (rebound if isinstance(node.target, ast.Name) else writes).append(node.target)
        elif isinstance(node, (ast.For, ast.comprehension)):
            bindings.append((node.target, node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bindings.append((node.optional_vars, node.context_expr))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                    and not node.func.attr.startswith("_"):
                writes.append(node.func.value)
            writes += [k.value for k in node.keywords if k.arg == "out"]
    written = set()
    for p in inspect.signature(fn).parameters:
        views = {p}
        grown = True
        while grown:          # a view of a view: repeat until no name joins
            grown = False
            for target, value in bindings:
                if _roots(value) & views:
                    new = {n.id for n in _stores(target) if isinstance(n, ast.Name)} - views
                    if new:
                        views |= new
                        grown = True
        if any(_roots(_written_part(w)) & views for w in writes) \
                or any(n.id == p for n in rebound):
            written.add(p)
    return frozenset(written)


def _pairs(target, value) -> list:
    """(target, value) bindings of an assignment, a tuple to a tuple element by element."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts) \
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
        return [b for t, v in zip(target.elts, value.elts) for b in _pairs(t, v)]
    return [(target, value)]


def _stores(target) -> list:
    """The single targets of an assignment target (a tuple's elements, a starred's value)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [s for e in target.elts for s in _stores(e)]
    return _stores(target.value) if isinstance(target, ast.Starred) else [target]


def _written_part(target):
    # `x[t] = ...` and `x.attr = ...` write x; a call `x[t].copy_(...)` writes x[t]
    return target.value if isinstance(target, (ast.Subscript, ast.Attribute)) else target


def _roots(e) -> set:
    """Names whose tensor `e` may be a view of."""
    if isinstance(e, ast.Name):
        return {e.id}
    if isinstance(e, ast.Attribute):
        return set() if e.attr in _META else _roots(e.value)
    if isinstance(e, (ast.Subscript, ast.Starred)):
        return _roots(e.value)
    if isinstance(e, ast.Call):
        f = e.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in _META or name in _FRESH or name.endswith("_like") or name.startswith("new_"):
            return set()
        out = _roots(f.value) if isinstance(f, ast.Attribute) else set()
        for a in list(e.args) + [k.value for k in e.keywords]:
            out |= _roots(a)
        return out
    if isinstance(e, _VALUES):
        return set()
    out = set()
    for c in ast.iter_child_nodes(e):
        if isinstance(c, ast.expr):
            out |= _roots(c)
    return out
