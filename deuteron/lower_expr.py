"""Expressions of the lowering: one traced value -> one newt expression string.

A mixin of lower.Lowering (it reads self.env, self.uses, self.ptr_blocks): operators with
Python precedence, math in fp32 for 16-bit inputs (as torch computes it), torch's floor `%` and
`//`, loads and their masks, masked reductions, dots (fused into an accumulator, or feeding
`.float()` directly).
"""
from __future__ import annotations

import torch

from . import ir
from .ir import ONE
from .ir import is_zero
from .spelling import ATOM, BINOP, PREC, UNARY, bc, literal, nl_dtype


class ExprMixin:
    def ref(self, x, rank=None):
        """(expression, precedence) for an operand, its rank raised to `rank` with None axes."""
        if not isinstance(x, ir.Value):
            return literal(x), (UNARY if isinstance(x, (int, float)) and x < 0 else ATOM)
        if id(x) in self.env:
            e, prec = self.env[id(x)], ATOM
        elif self._inline(x):
            e, prec = self.expr(x)
        else:
            raise AssertionError(f"value {x} used before it is defined")
        if rank is not None and 0 < x.rank < rank:
            e = e if prec == ATOM else f"({e})"
            e, prec = e + "[" + ", ".join(["None"] * (rank - x.rank) + [":"] * x.rank) + "]", ATOM
        return e, prec

    def atom(self, x, rank=None):
        e, prec = self.ref(x, rank)
        return e if prec == ATOM else f"({e})"

    def operand(self, x, rank, prec, right):
        e, p = self.ref(x, rank)
        tight = p <= prec if (right or prec == 3) else p < prec
        return f"({e})" if tight else e

    def mask(self, dim, j, r):
        return f"mask_{dim.letter}{bc(j, r)}"

    def expr(self, v):
        op, a = v.op, v.args
        if op == "binary":
            if v.attrs["fn"] in ("maximum", "minimum"):
                return f"nl.{v.attrs['fn']}({self.ref(a[0], v.rank)[0]}, {self.ref(a[1], v.rank)[0]})", ATOM
            if v.attrs["fn"] == "add":
                fused = self._fused_dot(v)
                if fused:
                    return fused, ATOM
            if v.attrs["fn"] in ("mod", "floordiv"):
                return self._floor_divmod(v), ATOM
            op = BINOP[v.attrs["fn"]]
            p = PREC[op]
            return (f"{self.operand(a[0], v.rank, p, False)} {op} "
                    f"{self.operand(a[1], v.rank, p, True)}"), p
        if op == "unary":
            fn, x = v.attrs["fn"], a[0]
            if fn == "neg":
                return f"-{self.operand(x, None, UNARY, True)}", UNARY
            if fn == "invert":
                return f"~{self.operand(x, None, UNARY, True)}", UNARY
            if fn == "abs":
                return f"nl.abs({self.ref(x)[0]})", ATOM
            if fn in ("floor", "ceil"):
                return f"nl.{fn}({self.ref(x)[0]})", ATOM
            zero = "0.0" if x.dtype.is_floating_point else "0"
            if fn == "relu":
                return f"nl.maximum({self.ref(x)[0]}, {zero})", ATOM
            if fn == "silu":
                return f"{self.operand(x, None, 9, False)} * {self._math('sigmoid', x)}", 9
            return self._math(fn, x), ATOM
        if op == "where":
            return "nl.where(" + ", ".join(self.ref(x, v.rank)[0] for x in a) + ")", ATOM
        if op == "cast":
            if self._dot_into_cast(a[0]) and v.dtype == torch.float32:
                return self._dot(a[0], None), ATOM
            return f"{self.atom(a[0])}.to({nl_dtype(v.dtype)})", ATOM
        if op == "view":
            idx = ", ".join("None" if i is None else ":" for i in v.attrs["index"])
            return f"{self.atom(a[0])}[{idx}]", ATOM
        if op == "trans":
            if id(a[0]) in self.transposed:       # the load already reads the transposed tile
                return self.ref(a[0])[0], ATOM
            return f"nl.trans({self.ref(a[0])[0]})", ATOM
        if op == "index":
            return f"offs_{v.attrs['dim'].letter}", ATOM
        if op in ("begin", "end", "block_size", "tile_id"):
            return self._tile_attr(op, v.attrs["dim"])
        if op == "mask":
            return f"mask_{v.attrs['dim'].letter}", ATOM
        if op == "cumsum":
            rev = ", reverse=True" if v.attrs["reverse"] else ""
            return f"nl.cumsum({self.ref(a[0])[0]}, axis={v.attrs['axis']}{rev})", ATOM
        if op == "permute":
            return f"nl.permute({self.ref(a[0])[0]}, {tuple(v.attrs['perm'])})", ATOM
        if op == "reshape":
            return f"nl.reshape({self.ref(a[0])[0]}, {self._shape(v)})", ATOM
        if op == "arange":
            d, b = v.attrs["dim"], v.attrs["begin"]
            e = f"offs_{d.letter}" if not b else f"({b} + offs_{d.letter})"
            return (e if v.dtype == torch.int32 else f"{e}.to({nl_dtype(v.dtype)})"), ATOM
        if op == "rand":
            terms, mult = [], 1
            for j in reversed(range(v.rank)):
                d = v.dims[j]
                if d is ONE:
                    continue
                term = f"offs_{d.letter}{bc(j, v.rank)}"
                terms.append(term if mult == 1 else f"{term} * {mult}")
                # torch.rand_like & co (dims from 0, rng.py): the extents are arguments, so
                # the source serves every shape
                size = d.letter.upper() if v.attrs["seed"] is None else d.lo + d.extent
                mult = mult * size if isinstance(size, int) else (
                    size if mult == 1 else f"{mult} * {size}")
            seed = v.attrs["seed"]
            if "seed_arg" in v.attrs:          # hl.rand: its host seed, an argument
                seed = self.host_seeds[v.attrs["seed_arg"]]
            elif seed is None:        # torch.rand_like & co: the launch's seed argument (rng.py)
                seed = f"{self.seed} + {v.attrs['stream']}" if v.attrs["stream"] else self.seed
            fn = "randn" if v.attrs.get("normal") else "rand"
            return f"nl.{fn}({seed}, {' + '.join(reversed(terms)) or '0'})", ATOM
        if op == "full":
            shape = ", ".join("1" if d is ONE else f"BLOCK_SIZE_{d.letter.upper()}" for d in v.dims)
            shape = f"({shape},)" if v.rank == 1 else f"({shape})"
            if v.attrs["value"] == 0:
                return f"nl.zeros({shape}, dtype={nl_dtype(v.dtype)})", ATOM
            return f"nl.full({shape}, {literal(v.attrs['value'])}, {nl_dtype(v.dtype)})", ATOM
        if op == "load":
            ptr, mask = self._address(v)
            if id(v) in self.ptr_blocks:
                ptr, mask = self.ptr_blocks[id(v)]
            other = "0.0" if v.dtype.is_floating_point else "0"
            if mask is None:
                return f"nl.load({ptr})", ATOM
            return f"nl.load({ptr}, mask={mask}, other={other})", ATOM
        if op == "reduce":
            return self._reduce(v)
        if op == "dot":
            e = self._dot(v, None)
            if v.dtype != torch.float32 and v.dtype.is_floating_point:
                e = f"{e}.to({nl_dtype(v.dtype)})"
            return e, ATOM
        if op in ("scan", "creduce", "item", "expand", "split", "join"):
            return self.scan_expr(v)
        raise AssertionError(op)

    def _shape(self, v):
        shape = ", ".join("1" if d is ONE else f"BLOCK_SIZE_{d.letter.upper()}" for d in v.dims)
        return f"({shape},)" if v.rank == 1 else f"({shape})"

    # ------------------------------------------------------------------ tile bounds
    def lo(self, d):
        """The first offset of dim `d`'s range, as source text."""
        if isinstance(d.lo, ir.Value):
            return self.atom(d.lo)
        return str(d.lo)

    def hi(self, d):
        """One past the last offset of dim `d`'s range (the extent parameter when static)."""
        if isinstance(d.hi, ir.Value):
            return self.atom(d.hi)
        return d.letter.upper()

    def pos(self, d):
        """The position of a block_size=1 tile (an index)."""
        if d.kind != "grid":
            return f"start_{d.letter}"
        return f"pid_{d.letter}" if is_zero(d.lo) else f"({d.lo} + pid_{d.letter})"

    def _tile_attr(self, op, d):
        L, B = d.letter, f"BLOCK_SIZE_{d.letter.upper()}"
        if d.is_index:
            first = self.pos(d)
            return {"begin": (first, ATOM), "end": (f"{first} + 1", 8), "block_size": ("1", ATOM),
                    "tile_id": (first if is_zero(d.lo) else f"({first} - {self.lo(d)})", ATOM)}[op]
        if d.kind == "grid":
            first = f"pid_{L} * {B}" if is_zero(d.lo) else f"{d.lo} + pid_{L} * {B}"
            fprec = 9 if is_zero(d.lo) else 8
            tid = (f"pid_{L}", ATOM)
        else:
            first, fprec = f"start_{L}", ATOM
            tid = (f"(start_{L} - {self.lo(d)}) // {B}", 9)
        if op == "begin":
            return first, fprec
        if op == "block_size":
            return B, ATOM
        if op == "tile_id":
            return tid
        return f"nl.minimum({first} + {B}, {self.hi(d)})", ATOM

    def _floor_divmod(self, v):
        """torch's `%` and `//` round toward -inf (Python's); newt's, like C's and Triton's,
        toward 0. Correct the remainder where it is non-zero and its sign differs from b's."""
        a, b = (self.atom(x, v.rank) for x in v.args)
        if v.dtype.is_floating_point:
            q = f"nl.floor({a} / {b})"
            return q if v.attrs["fn"] == "floordiv" else f"({a} - {q} * {b})"
        r = f"({a} % {b})"
        positive = not isinstance(v.args[1], ir.Value) and v.args[1] > 0
        fix = f"({r} < 0)" if positive else f"(({r} != 0) & (({r} < 0) != ({b} < 0)))"
        if v.attrs["fn"] == "mod":
            return f"nl.where({fix}, {r} + {b}, {r})"
        return f"({a} // {b} - nl.where({fix}, 1, 0))"

    def _math(self, fn, x):
        if x.dtype in (torch.float16, torch.bfloat16):   # compute in fp32, as torch does inside
            return f"nl.{fn}({self.atom(x)}.to(nl.float32)).to({nl_dtype(x.dtype)})"
        if not x.dtype.is_floating_point:
            return f"nl.{fn}({self.atom(x)}.to(nl.float32))"
        return f"nl.{fn}({self.ref(x)[0]})"

    def _address(self, v, at_start_of=None, wrap=(), transpose=False):
        """(pointer expression, mask expression) of load / store / atomic `v`. `at_start_of`: a
        loop dim whose offsets are taken at the loop's first iteration (the tutorial's pointer
        blocks, built before it). `wrap`: dims read at `offs % extent` instead of masked (the
        tutorial's trick: padded rows read real rows; only valid where nothing reduces over
        those lanes). `transpose`: a 2-D tile read transposed, its strides swapped
        (`k[b, tile_n, :].T` is loaded as the [K, N] tile, as the tutorial's attention loads
        K^T). Index entries: memory.py."""
        ref, index, starts = v.attrs["ref"], v.attrs["index"], v.attrs.get("starts", {})
        dims = v.attrs.get("dims_of", v.dims) if v.op != "load" else v.dims
        r = len(dims)
        bc_of = (lambda j, r: bc(r - 1 - j, r)) if transpose else bc   # noqa: E731
        mask_of = (lambda d, j, r: self.mask(d, r - 1 - j, r)) if transpose else self.mask  # noqa: E731
        terms, masks, j, axis = [f"{ref.name}_ptr"], [], 0, 0
        for kind, d in index:
            if kind == "new":
                j += 1
                continue
            stride = f"stride_{ref.name}{axis}"
            axis += 1
            if kind == "int":
                if d:
                    terms.append(f"{d} * {stride}")
                continue
            if kind == "index":      # a block_size=1 tile: a scalar offset, always in bounds
                terms.append(f"{self.pos(d)} * {stride}")
                continue
            if kind == "value":      # a gather / scatter: the value's dims take this axis' place
                e = self.atom(d)
                if d.rank and r > d.rank:
                    e += "[" + ", ".join(["None"] * j + [":"] * d.rank
                                         + ["None"] * (r - j - d.rank)) + "]"
                terms.append(f"{e} * {stride}")
                for k, vd in enumerate(d.dims):
                    if vd is not ONE:
                        masks.append(mask_of(vd, j + k, r))
                j += d.rank
                continue
            offs = (f"nl.arange(0, BLOCK_SIZE_{d.letter.upper()})" if d is at_start_of
                    else f"offs_{d.letter}")
            if d is at_start_of and not is_zero(d.lo):
                offs = f"({self.lo(d)} + {offs})"
            start = starts.get(axis - 1)
            if start:
                offs = f"({start} + {offs})"
            if d in wrap:
                terms.append(f"(offs_{d.letter} % {d.letter.upper()}){bc_of(j, r)} * {stride}")
            else:
                terms.append(f"{offs}{bc_of(j, r)} * {stride}")
                masks.append(mask_of(d, j, r))
            j += 1
        if v.attrs.get("extra_mask"):
            m = v.args[0] if v.op == "load" else v.args[1]
            masks.append(self.atom(m, r))
        return " + ".join(terms), (" & ".join(masks) if masks else None)

    def _reduce(self, v):
        x, kind, axis = v.args[0], v.attrs["kind"], v.attrs["axis"]
        e = self.ref(x)[0]
        if v.attrs["masked"]:
            ident = v.attrs["identity"]
            ident = float(ident) if x.dtype.is_floating_point else ident
            e = f"nl.where({self.mask(v.attrs['rdim'], axis, x.rank)}, {e}, {literal(ident)})"
        keep = ", keep_dims=True" if v.attrs["keepdim"] else ""
        fn = {"sum": "sum", "mean": "sum", "max": "max", "min": "min"}[kind]
        call = f"nl.{fn}({e}, axis={axis}{keep})"
        if kind == "mean" and v.attrs["rdim"] is not ONE:
            return f"{call} / {v.attrs['rdim'].letter.upper()}", 9
        return call, ATOM

    def _dot(self, v, acc):
        a, b = v.args
        ea, eb = self.ref(a)[0], self.ref(b)[0]
        k = v.attrs["kdim"]
        if v.attrs["mask_a"]:
            ea = f"nl.where({self.mask(k, 1, 2)}, {ea}, 0.0)"
        if v.attrs["mask_b"]:
            eb = f"nl.where({self.mask(k, 0, 2)}, {eb}, 0.0)"
        args = [ea, eb] + ([acc] if acc else [])
        if v.attrs["precision"] == "ieee":
            args.append('input_precision="ieee"')
        return f"nl.dot({', '.join(args)})"

    def _fused_dot(self, v):
        """`acc + a @ b` -> nl.dot(a, b, acc) when the dot feeds only this add."""
        for i in (0, 1):
            d, acc = v.args[i], v.args[1 - i]
            if (isinstance(d, ir.Value) and d.op == "dot" and id(d) not in self.env
                    and len(self.uses.get(id(d), [])) == 1 and isinstance(acc, ir.Value)
                    and acc.dims == v.dims and v.dtype == torch.float32 == acc.dtype
                    and d.args[0].dtype in (torch.float16, torch.bfloat16, torch.float32)):
                self.fused.add(id(d))
                return self._dot(d, self.ref(acc)[0])
        return None
