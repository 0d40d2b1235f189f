"""Random kernels for the differential fuzzer: draws a `Case` (an expression tree of tree.Node,
its inputs, scalar arguments, loop trip counts, constexpr flags and block extents).

Consumes a `Rand` (either hypothesis draws, so failures shrink, or a seeded random.Random for
scripts/fuzz_gpu.py); produces a Case that harness.py turns into kernel source and a reference.

The generator works top-down: `gen(dt, shape, depth)` returns a node of exactly that dtype and
broadcast shape, inserting casts where an op's natural result type differs. It never builds
undefined behaviour: integer divisors are `(e & 63) + 1` (never 0 or -1), float divisors
`|e| + 1`, shift amounts are masked below twice the bit width (past the width a shift is
defined: 0, or the sign for >>), log/sqrt/rsqrt take `|e| + 1`,
exp/exp2 take `minimum(e, 3.0)`, float -> int casts only take exact values whose bound fits
(unsigned targets through abs()), and int -> fp16/bf16 casts only from types of <= 16 bits (no
overflow to inf, no double rounding). Float values carry a magnitude bound; an op whose bound
would pass its dtype's cap (fp16: 2000) is not built. Integer overflow wraps on every target,
bool + - * too (one bit, as Triton's i1).
"""
from __future__ import annotations

import dataclasses

from newt import dtypes as D

from .tree import Node, broadcast_shape

FLOATS = [D.float16, D.bfloat16, D.float32, D.float64]
SIGNED = [D.int8, D.int16, D.int32, D.int64]
UNSIGNED = [D.uint8, D.uint16, D.uint32, D.uint64]
INTS = SIGNED + UNSIGNED
ALL = FLOATS + INTS + [D.int1]
CAP = {D.float16: 2000.0, D.bfloat16: 1e20, D.float32: 1e20, D.float64: 1e100}
FP8 = [D.float8e4nv, D.float8e5]        # only as a cast target and back (g_cast)
FP8_MAX = {D.float8e4nv: 448.0, D.float8e5: 57344.0}
SIZES = [1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 64, 100]
SUBSHAPES = {"MN": ["MN", "MN", "MN", "M1", "1N", "S"], "M1": ["M1", "M1", "S"],
             "1N": ["1N", "1N", "S"], "S": ["S"]}
LEAF_BOUND = 4.0   # float inputs and scalars are drawn from +-[0.25, 4]


class Rand:
    """The source of choices: `int(lo, hi)` (inclusive) backed by hypothesis or random."""

    def __init__(self, draw_int):
        self.int = draw_int

    def choice(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, p: float) -> bool:
        return self.int(0, 99) < p * 100


@dataclasses.dataclass
class Case:
    root: Node
    out_dt: D.dtype
    M: int
    N: int
    inputs: list      # (name, dtype, shape, small: bool)
    scalars: list     # (name, dtype, value)
    counts: list      # (name, value): runtime loop trip counts
    flags: list       # (name, bool): constexpr branch selectors
    seed: int         # input data
    num_warps: int = 4
    const_sizes: bool = False   # M, N and the loop trip counts as constexprs (the mask pass
                                # then decides bounds checks: newt/passes/masks.py)

    @property
    def BM(self):
        return 1 << (self.M - 1).bit_length()

    @property
    def BN(self):
        return 1 << (self.N - 1).bit_length()


def fbound(n: Node) -> float:
    """|value| bound of n as a float."""
    if n.dt.is_floating():
        return n.bound
    if n.op == "lit":
        return abs(float(n.attr))
    return 1.0 if n.dt.is_bool() else 2.0 ** n.dt.bits


def lit(v) -> Node:
    return Node("lit", D.of_python_scalar(v) if not isinstance(v, float) else D.float32, "S",
                attr=v, weak=True, bound=abs(float(v)))


def converts(ct, *nodes) -> bool:
    """Every (non-literal) node converts to ct without overflow or double rounding."""
    return all(n.op == "lit" or mk_cast(n, ct) is not None for n in nodes)


def mk_bin(op, a: Node, b: Node):
    div = op in ("/", "//", "%")
    ct = D.computation_type(a.dt, a.weak, b.dt, b.weak, div)
    if not converts(ct, a, b):
        return None
    shape = broadcast_shape(a.shape, b.shape)
    if op in ("<", "<=", ">", ">=", "==", "!="):
        if ct.is_floating() and not (a.exact and b.exact):
            return None
        return Node("cmp", D.int1, shape, [a, b], op)
    rdt = D.float32 if op == "/" and not ct.is_floating() else ct
    if not rdt.is_floating():
        return Node("bin", rdt, shape, [a, b], op)
    ba, bb = fbound(a), fbound(b)
    bound = {"+": ba + bb, "-": ba + bb, "*": ba * bb, "/": ba}[op]
    if op == "/":   # divisors are |e| + 1 or (e & 63) + 1
        exact = False
    elif op == "*":
        exact = a.exact and b.exact
    else:           # a*b + c may be contracted into an fma on the GPU
        exact = a.exact and b.exact and not a.fusable and not b.fusable
    if bound > CAP[rdt]:
        return None
    return Node("bin", rdt, shape, [a, b], op, bound=bound, exact=exact, fusable=op == "*")


def mk_cast(c: Node, dst):
    if c is None:
        return None
    src, via_abs, bound, exact = c.dt, False, None, c.exact
    if src is dst:
        return c
    if dst.is_floating():
        if src.is_floating():
            bound = c.bound
            exact = c.exact and not (src is D.float64 and dst.bits == 16)  # double rounding
        elif dst.bits == 16 and (src.bits > 16 or (src is D.uint16 and dst is D.float16)):
            return None
        else:
            bound = fbound(c)
        if bound > CAP[dst]:
            return None
    elif src.is_floating():
        if not c.exact:
            return None
        if not dst.is_bool():
            via_abs = dst.kind == "uint"
            limit = 2.0 ** min(62, dst.bits - (1 if dst.kind == "int" else 0)) - 2
            if c.bound >= limit:
                return None
    return Node("cast", dst, c.shape, [c], (dst, via_abs), bound=bound, exact=exact)


class Gen:
    def __init__(self, r: Rand, max_depth=4, scalar_one=True):
        # scalar_one=False keeps runtime int arguments away from the value 1 (the JIT
        # specializes it; see the open bug in tests/test_fuzz_regressions.py)
        self.r, self.max_depth, self.scalar_one = r, max_depth, scalar_one
        self.inputs, self.scalars, self.counts, self.flags = [], [], [], []
        self.loopvars, self.n_loops = [], 0

    def case(self) -> Case:
        r = self.r
        M, N = self.M, self.N = r.choice(SIZES), r.choice(SIZES)
        out_dt = r.choice(ALL)
        root = self.gen(out_dt, r.choice(["MN", "MN", "M1", "1N", "S"]), self.max_depth)
        return Case(root, out_dt, M, N, self.inputs, self.scalars, self.counts, self.flags,
                    r.int(0, 2 ** 31 - 1), r.choice([4, 1, 2, 8]))

    # ------------------------------------------------------------------ helpers
    def narrower(self, dt, div=False):
        """dt, or a dtype that promotes to dt when combined with it."""
        if self.r.chance(0.6):
            return dt
        opts = [x for x in ALL if not (x.is_floating() != dt.is_floating() and div)
                and _ct(dt, x, div) is dt]
        return self.r.choice(opts) if opts else dt

    def split(self, shape, n=2):
        """n operand shapes whose broadcast is `shape`."""
        shapes = [self.r.choice(SUBSHAPES[shape]) for _ in range(n)]
        if broadcast_shape(*shapes) != shape:
            shapes[self.r.int(0, n - 1)] = shape
        return shapes

    def literal(self, dt):
        if dt.is_floating():
            return lit(self.r.choice([0.5, 1.5, 2.0, -0.75, 3.0, 1, 2, -3]))
        if dt.kind == "uint":
            return lit(self.r.choice([1, 2, 3, 5, 7, 100]))
        return lit(self.r.choice([1, 2, 3, -1, -3, 7, 100]))

    def operand(self, dt, shape, depth, div=False):
        """A second operand: often a narrower type, sometimes a weak Python literal."""
        if shape == "S" and not dt.is_bool() and self.r.chance(0.35):
            return self.literal(dt)
        return self.gen(self.narrower(dt, div), shape, depth)

    # ------------------------------------------------------------------ generation
    def gen(self, dt, shape, depth) -> Node:
        if depth <= 0 or self.r.chance(0.15):
            return self.leaf(dt, shape)
        ops = ["arith", "arith", "cast", "unary", "where", "branch"]
        if not dt.is_bool():
            ops += ["div", "minmax"]
        if dt.is_int():
            ops += ["bits"] + (["shift"] if not dt.is_bool() else [])
        if dt.is_floating():
            ops += ["math", "math"]
        if dt.is_bool():
            ops += ["cmp", "cmp", "cmp"]
        if shape != "MN":
            ops += ["reduce", "reduce"]
        elif depth >= 2 and self.n_loops < 2:
            ops += ["loop"]
        node = getattr(self, "g_" + self.r.choice(ops))(dt, shape, depth - 1)
        if node is None or node.dt is not dt or node.shape != shape:
            return self.leaf(dt, shape)
        return node

    def leaf(self, dt, shape) -> Node:
        r = self.r
        if shape != "S":
            same = [i for i in self.inputs if i[1] is dt and i[2] == shape]
            if same and r.chance(0.3):
                name = r.choice(same)[0]
            else:
                name = f"x{len(self.inputs)}"
                self.inputs.append((name, dt, shape, r.chance(0.4)))
            return Node("load", dt, shape, attr=name, bound=LEAF_BOUND if dt.is_floating() else None)
        if self.loopvars and r.chance(0.4):
            n = mk_cast(Node("loopvar", D.int32, "S", attr=self.loopvars[-1]), dt)
            if n is not None:
                return n
        base = D.float32 if dt.is_floating() else D.int32
        name = f"s{len(self.scalars)}"
        if base is D.float32:
            value = r.choice([1, -1]) * r.int(1, 16) / 4.0
        else:
            value = r.choice([1, -1]) * r.choice([r.int(1, 9), r.int(1, 2 ** 31 - 1)])
            if value == 1 and not self.scalar_one:
                value = 2
        self.scalars.append((name, base, value))
        n = Node("arg", base, "S", attr=name, bound=LEAF_BOUND if base is D.float32 else None)
        return mk_cast(n, dt) or Node("cast", dt, "S", [n], (dt, False), bound=LEAF_BOUND)

    def g_arith(self, dt, shape, d):
        sa, sb = self.split(shape)
        a, b = self.gen(dt, sa, d), self.operand(dt, sb, d)
        if self.r.chance(0.5):
            a, b = b, a
        return mk_bin(self.r.choice(["+", "-", "*"]), a, b)

    def g_div(self, dt, shape, d):
        sa, sb = self.split(shape)
        if dt.is_floating():
            if self.r.chance(0.25):   # integer true division: computed in fp32
                x = self.r.choice(INTS)
                q = mk_bin("/", self.gen(x, sa, d), self.int_divisor(x, sb, d))
            else:
                ddt = self.narrower(dt)
                den = self.gen(dt if ddt.is_bool() else ddt, sb, d)
                den = mk_bin("+", Node("unary", den.dt, den.shape, [den], "abs", bound=den.bound,
                                       exact=den.exact), lit(1.0))
                q = mk_bin("/", self.gen(dt, sa, d), den) if den is not None else None
            return mk_cast(q, dt)
        return mk_bin(self.r.choice(["//", "%"]), self.gen(dt, sa, d),
                      self.int_divisor(dt, sb, d))

    def int_divisor(self, dt, shape, d):
        return mk_bin("+", mk_bin("&", self.gen(dt, shape, d), lit(63)), lit(1))

    def g_bits(self, dt, shape, d):
        sa, sb = self.split(shape)
        return mk_bin(self.r.choice(["&", "|", "^"]), self.gen(dt, sa, d),
                      self.operand(dt, sb, d))

    def g_shift(self, dt, shape, d):
        sa, sb = self.split(shape)
        amt_dt = self.narrower(dt)
        if amt_dt.is_bool() or amt_dt.is_floating():
            amt_dt = dt
        width = dt.bits if self.r.chance(0.7) else 2 * dt.bits    # past the width: defined
        amt = mk_bin("&", self.gen(amt_dt, sb, d), lit(min(width, 2 ** (amt_dt.bits - 1)) - 1))
        return mk_bin(self.r.choice(["<<", ">>"]), self.gen(dt, sa, d), amt)

    def g_minmax(self, dt, shape, d):
        sa, sb = self.split(shape)
        a, b = self.gen(dt, sa, d), self.operand(dt, sb, d)
        ct = _ct(dt, b.dt, False, b.weak)
        if ct is None or not converts(ct, a, b):
            return None
        return Node("minmax", ct, broadcast_shape(a.shape, b.shape), [a, b],
                    self.r.choice(["minimum", "maximum"]),
                    bound=max(fbound(a), fbound(b)) if ct.is_floating() else None,
                    exact=a.exact and b.exact)

    def g_unary(self, dt, shape, d):
        c = self.gen(dt, shape, d)
        op = "~" if dt.is_bool() else self.r.choice(["-", "abs"] + (["~"] if dt.is_int() else []))
        return Node("unary", dt, shape, [c], op, bound=c.bound, exact=c.exact,
                    fusable=c.fusable and op == "-")

    def g_math(self, dt, shape, d):
        fn = self.r.choice(["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                            "erf", "sigmoid", "floor", "ceil"])
        c = self.gen(dt, shape, d)
        if fn in ("log", "log2", "sqrt", "rsqrt"):
            c = mk_bin("+", Node("unary", dt, shape, [c], "abs", bound=c.bound, exact=c.exact),
                       lit(1.0))
        elif fn in ("exp", "exp2"):
            c = Node("minmax", dt, shape, [c, lit(3.0)], "minimum", bound=c.bound, exact=c.exact)
        elif fn in ("sin", "cos") and c.bound > 100:
            return None
        elif fn in ("floor", "ceil") and not c.exact:
            return None
        if c is None:
            return None
        bound = {"exp": 20.1, "exp2": 8.0, "log": c.bound, "log2": c.bound * 1.5,
                 "sqrt": c.bound, "rsqrt": 1.0, "floor": c.bound + 1, "ceil": c.bound + 1}
        return Node("math", dt, shape, [c], fn, bound=bound.get(fn, 1.0),
                    exact=fn in ("floor", "ceil"))

    def g_cast(self, dt, shape, d):
        if dt.is_int() and not dt.is_bool() and dt.bits >= 16 and self.r.chance(0.25):
            return self.bitcast(dt, shape, d)
        if dt.is_floating() and self.r.chance(0.3):
            return self.fp8_round_trip(dt, shape, d)
        return mk_cast(self.gen(self.r.choice([x for x in ALL if x is not dt]), shape, d), dt)

    def fp8_round_trip(self, dt, shape, d):
        """An exact float rounded to fp8 and widened back (fp8 blocks take no arithmetic): the
        encoding's rounding and saturation and the decoding, in any layout, bit for bit on
        every target. Values past the format's largest finite one saturate (an e4m3 round trip
        caps the bound at 448)."""
        f8 = self.r.choice(FP8)
        c = self.gen(self.r.choice([D.float16, D.bfloat16, D.float32]), shape, d)
        if c is None or not c.exact:   # an inexact input may round to the neighbouring code
            return None
        inner = Node("cast", f8, shape, [c], (f8, False), bound=min(c.bound, FP8_MAX[f8]),
                     exact=True)
        return mk_cast(inner, dt)

    def bitcast(self, dt, shape, d):
        """Float bits reinterpreted as an integer of the same width. Only for exact values
        without a float minimum/maximum inside (the sign of a zero result is unspecified)."""
        src = self.r.choice([x for x in FLOATS if x.bits == dt.bits])
        c = self.gen(src, shape, d)
        if not c.exact or _has_float_minmax(c):
            return None
        return Node("cast", dt, shape, [c], (dt, "bitcast"))

    def g_cmp(self, dt, shape, d):
        x = self.r.choice(ALL)
        sa, sb = self.split(shape)
        op = self.r.choice(["==", "!="] if x.is_bool() else ["<", "<=", ">", ">=", "==", "!="])
        return mk_bin(op, self.gen(x, sa, d), self.operand(x, sb, d))

    def g_where(self, dt, shape, d):
        sc, sa, sb = self.split(shape, 3)
        c, a, b = self.gen(D.int1, sc, d), self.gen(dt, sa, d), self.operand(dt, sb, d)
        if self.r.chance(0.5):
            a, b = b, a
        ct = D.computation_type(a.dt, a.weak, b.dt, b.weak)
        if not converts(ct, a, b):
            return None
        return Node("where", ct, broadcast_shape(sc, sa, sb), [c, a, b],
                    bound=max(fbound(a), fbound(b)) if ct.is_floating() else None,
                    exact=a.exact and b.exact)

    def g_reduce(self, dt, shape, d):
        fn = self.r.choice(["sum", "max", "min", "argmax", "argmin"])
        x = self.r.choice(ALL[:-1]) if fn.startswith("arg") else (dt if not dt.is_bool() else None)
        if x is None:
            return None
        c = self.gen(x, "MN", d)
        axis = {"M1": 1, "1N": 0, "S": None}[shape]
        attr = (fn, axis, self.r.chance(0.5), self.r.choice(["index", "expand_dims"]))
        if fn.startswith("arg"):
            if x.is_floating() and not c.exact:
                return None
            return mk_cast(Node("reduce", D.int32, shape, [c], attr), dt)
        if fn == "sum":
            rdt = (D.int32 if x.kind == "int" else D.uint32) if x.is_int() and x.bits < 32 else x
            bound = c.bound * self.M * self.N if x.is_floating() else None
            if bound is not None and bound > CAP[x]:
                return None
            return mk_cast(Node("reduce", rdt, shape, [c], attr, bound=bound,
                                exact=not x.is_floating()), dt)
        return Node("reduce", x, shape, [c], attr, bound=c.bound, exact=c.exact)

    def g_loop(self, dt, shape, d):
        i = self.n_loops
        self.n_loops += 1
        init = self.gen(dt, self.r.choice(SUBSHAPES[shape]), d)
        var = f"k{i}"
        if self.r.chance(0.5):
            count = f"L{i}"
            self.counts.append((count, self.r.int(0, 3)))
        else:
            count = self.r.int(0, 3)
        self.loopvars.append(var)
        body = self.gen(dt, self.r.choice(SUBSHAPES[shape]), d)
        self.loopvars.pop()
        carry = self.r.choice((["^", "|", "&"] if dt.is_int() else []) +
                              ([] if dt.is_bool() else ["+", "-", "minimum", "maximum"]))
        bound = None
        if dt.is_floating():
            bound = init.bound + 3 * body.bound if carry in "+-" else max(init.bound, body.bound)
            if bound > CAP[dt]:
                return None
        exact = init.exact and body.exact and not (carry in "+-" and (body.fusable or
                                                                     init.fusable))
        return Node("loop", dt, "MN", [init, body], (count, carry, var), bound=bound, exact=exact)

    def g_branch(self, dt, shape, d):
        name = f"C{len(self.flags)}"
        value = self.r.chance(0.5)
        self.flags.append((name, value))
        a, b = self.gen(dt, shape, d), self.gen(dt, shape, d)
        t = a if value else b
        return Node("branch", dt, shape, [a, b], (name, value), bound=t.bound, exact=t.exact,
                    fusable=t.fusable)


def _has_float_minmax(n: Node) -> bool:
    return (n.op == "minmax" and n.dt.is_floating()) or any(_has_float_minmax(k) for k in n.kids)


def _ct(a, b, div=False, b_weak=False):
    try:
        return D.computation_type(a, False, b, b_weak, div)
    except TypeError:
        return None
