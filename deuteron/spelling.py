"""Spelling Python/newt source text: dtypes, literals, operator precedence, fresh names.
Used by lower.py; nothing here knows about tiles."""
from __future__ import annotations

import keyword
import math

import torch

NL_DTYPE = {torch.float16: "nl.float16", torch.bfloat16: "nl.bfloat16", torch.float32: "nl.float32",
             torch.float64: "nl.float64", torch.int8: "nl.int8", torch.int16: "nl.int16",
             torch.int32: "nl.int32", torch.int64: "nl.int64", torch.uint8: "nl.uint8",
             torch.bool: "nl.int1", torch.float8_e4m3fn: "nl.float8e4nv",
             torch.float8_e5m2: "nl.float8e5"}
BINOP = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&",
          "or": "|", "xor": "^"}
# Python precedence of each operator (higher binds tighter); ATOM: names, calls, subscripts
PREC = {"+": 8, "-": 8, "*": 9, "/": 9, "//": 9, "%": 9, "&": 6, "^": 5, "|": 4,
         "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3}
ATOM, UNARY = 100, 10
LETTERS = "mnkdljipqrstuvwxyzabcefgho"


def nl_dtype(dt):
    try:
        return NL_DTYPE[dt]
    except KeyError:
        raise NotImplementedError(f"deuteron: dtype {dt} is not supported in kernels") from None


def literal(x) -> str:
    if isinstance(x, bool):
        return repr(x)
    if isinstance(x, float):
        if math.isnan(x):
            return 'float("nan")'
        if math.isinf(x):
            return 'float("inf")' if x > 0 else 'float("-inf")'
        return repr(x)
    return repr(int(x))


def bc(j, r):
    """Index suffix that places a 1-D vector on axis j of a rank-r block."""
    return "" if r <= 1 else "[" + ", ".join(":" if i == j else "None" for i in range(r)) + "]"


class Names:
    def __init__(self):
        self.used = set(keyword.kwlist) | {"nl", "newt", "pid", "range", "min", "max", "float",
                                            "sum", "abs", "int", "len", "print", "bool"}

    def fresh(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base.startswith("__deuteron_"):      # a name rewrite.py made (a while's break flag)
            base = base[len("__deuteron_"):].rstrip("_0123456789") or "v"
        if base[0].isdigit():
            base = "v" + base
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name
