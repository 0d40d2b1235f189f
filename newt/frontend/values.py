"""The frontend's value wrapper: a runtime block or scalar while a kernel is being built.

A `Tensor` pairs an IR Value with the Builder that made it, so that Python operators and
methods on it (`x + 1`, `x.to(nl.float16)`, `x[:, None]`) build IR through the semantic layer
(semantic.py, shapes.py, reductions.py). Everything that is *not* a Tensor inside a kernel is a
compile-time (constexpr) Python value: numbers, dtypes, tuples, strings, None, functions.
"""
from __future__ import annotations

from ..ir.core import is_block


class Tensor:
    __slots__ = ("v", "b")

    def __init__(self, v, b):
        self.v = v   # newt.ir.Value
        self.b = b   # newt.ir.Builder (its insertion point is the current one)

    # ------------------------------------------------------------------ type facts (constexpr)
    @property
    def dtype(self):
        return self.v.type.dtype

    @property
    def shape(self) -> tuple:
        return self.v.type.shape

    @property
    def type(self):
        return self.v.type

    @property
    def numel(self) -> int:
        return self.v.type.numel

    def is_block(self) -> bool:
        return is_block(self.v.type)

    @property
    def T(self):
        from . import shapes
        return shapes.trans(self.b, self)

    def __repr__(self):
        return f"<tensor {self.v.type}>"

    def __bool__(self):
        from ..errors import CompilationError
        raise CompilationError("a runtime value cannot be used where a compile-time bool is "
                               "needed (is a constexpr expected here?)")

    def __index__(self):
        from ..errors import CompilationError
        raise CompilationError("a runtime value cannot be used as a compile-time int")

    def __iter__(self):
        from ..errors import CompilationError
        raise CompilationError("cannot iterate over a block (use nl.static_range / nl.range)")

    # ------------------------------------------------------------------ methods (x.to(...), x.sum())
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False):
        from . import downcast
        return downcast.cast(self.b, self, dtype, bitcast, fp_downcast_rounding)

    def __getattr__(self, name):
        from .builtins import TENSOR_METHODS
        fn = TENSOR_METHODS.get(name)
        if fn is None:
            raise AttributeError(f"a block has no attribute or method {name!r}")
        b = object.__getattribute__(self, "b")

        def method(*args, **kwargs):
            return fn(b, self, *args, **kwargs)
        return method

    def __getitem__(self, idx):
        from . import shapes
        return shapes.subscript(self.b, self, idx)


def _binop(name, reflected=False):
    def f(self, other):
        from . import semantic
        if reflected:
            return semantic.binary(self.b, name, other, self)
        return semantic.binary(self.b, name, self, other)
    f.__name__ = name
    return f


for _op, _dunders in {
    "add": ("__add__", "__radd__"), "sub": ("__sub__", "__rsub__"), "mul": ("__mul__", "__rmul__"),
    "truediv": ("__truediv__", "__rtruediv__"), "floordiv": ("__floordiv__", "__rfloordiv__"),
    "mod": ("__mod__", "__rmod__"), "and": ("__and__", "__rand__"), "or": ("__or__", "__ror__"),
    "xor": ("__xor__", "__rxor__"), "shl": ("__lshift__", "__rlshift__"),
    "shr": ("__rshift__", "__rrshift__"), "pow": ("__pow__", "__rpow__"),
}.items():
    setattr(Tensor, _dunders[0], _binop(_op))
    setattr(Tensor, _dunders[1], _binop(_op, reflected=True))

for _op, _d in {"lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__",
                "eq": "__eq__", "ne": "__ne__"}.items():
    setattr(Tensor, _d, _binop(_op))
Tensor.__hash__ = object.__hash__


def _unop(name):
    def f(self):
        from . import semantic
        return semantic.unary_operator(self.b, name, self)
    return f


Tensor.__neg__ = _unop("neg")
Tensor.__invert__ = _unop("invert")
Tensor.__pos__ = _unop("pos")


# ----------------------------------------------------------------------------- tuples of values

def leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        r = []
        for e in x:
            r.extend(leaves(e))
        return r
    return [x]


def rebuild(like, it):
    """Rebuild the structure of `like` taking leaves from iterator `it`."""
    if isinstance(like, (tuple, list)):
        return type(like)(rebuild(e, it) for e in like)
    return next(it)
