"""Lowering: an `ir.Program` (one traced outer tile loop) -> newt kernel source text.

The output reads like the hand-written Triton tutorial kernel: the grid dims become program ids
(grouped ordering when a dot is present), each tile dim gets `offs_<d>`/`mask_<d>` and a
`BLOCK_SIZE_<D>: nl.constexpr`, tensors become `<name>_ptr` plus `stride_<name><axis>`
parameters, inner tile loops become `for start_k in range(0, K, BLOCK_SIZE_K)`, `acc + a @ b`
becomes `acc = nl.dot(a, b, acc)`, and reductions over padded lanes get `nl.where(mask, v, id)`.
The source does not depend on the config: every tuned value is a constexpr, so one source serves
every candidate of the autotuner. `Lowered.params`/`constexprs` tell kernel.py what to pass.
"""
from __future__ import annotations

import dataclasses

import torch

from . import ir
from .ir import ONE
from .spelling import ATOM, BINOP, LETTERS, PREC, UNARY, Names, bc, literal, nl_dtype

@dataclasses.dataclass
class Lowered:
    name: str
    source: str
    params: list        # (param name, ("ptr", ref) | ("extent", dim) | ("stride", ref, axis))
    constexprs: list    # (param name, ("block", dim) | ("group",))
    grid: list          # grid dims, outermost first


def lower(prog: ir.Program, static_shapes: bool = False) -> Lowered:
    """`static_shapes`: extents become constexprs too (one compile per exact shape; the compiler
    can then drop masks it proves always true, e.g. rows of exactly BLOCK_SIZE_N)."""
    return _Lowering(prog, static_shapes).run()


class _Lowering:
    def __init__(self, prog, static_shapes=False):
        self.p, self.names, self.static = prog, Names(), static_shapes
        self.lines, self.env, self.var = [], {}, {}
        self.uses = {}          # id(value) -> [(user, block)]
        self.fused = set()      # ids of dot nodes folded into an accumulator add
        self.ptr_blocks = {}    # id(load) -> (pointer block name, increment) in dot loops

    # ------------------------------------------------------------------ naming and parameters
    def _letters(self):
        taken = set()
        for d in self.p.dims:
            if d.kind == "full":
                continue
            want = (d.var or "")[5:] if (d.var or "").startswith("tile_") else (d.var or "")
            want = want.lower() if want.isidentifier() else ""
            if not want or want in taken:
                want = next(c for c in LETTERS if c not in taken)
            d.letter = want
            taken.add(want)
        for d in self.p.dims:
            if d.kind == "full":
                d.letter = next(c for c in LETTERS[1:] + "m" if c not in taken)
                taken.add(d.letter)
        for d in self.p.dims:
            for n in (d.letter.upper(), f"offs_{d.letter}", f"mask_{d.letter}",
                      f"BLOCK_SIZE_{d.letter.upper()}", f"pid_{d.letter}", f"start_{d.letter}",
                      f"num_pid_{d.letter}"):
                self.names.used.add(n)

    def _params(self):
        params, constexprs = [], []
        for r in self.p.tensors:
            r.name = self.names.fresh(r.name or "t")
            params.append((f"{r.name}_ptr", ("ptr", r)))
            self.names.used.add(f"{r.name}_ptr")
        for d in self.p.dims:
            (constexprs if self.static else params).append((d.letter.upper(), ("extent", d)))
        for r in self.p.tensors:
            for axis in range(r.tensor.dim()):
                params.append((f"stride_{r.name}{axis}", ("stride", r, axis)))
                self.names.used.add(f"stride_{r.name}{axis}")
        for d in self.p.dims:
            constexprs.append((f"BLOCK_SIZE_{d.letter.upper()}", ("block", d)))
        if self._grouped():
            constexprs.append(("GROUP_SIZE_M", ("group",)))
            self.names.used.update({"GROUP_SIZE_M", "num_pid_in_group", "group_id",
                                    "first_pid_m", "group_size_m"})
        return params, constexprs

    def _grouped(self):
        g = self.p.grid
        return self.p.has_dot and len(g) == 2 and g[0].in_dot and g[1].in_dot

    # ------------------------------------------------------------------ uses
    def _count(self, items, block):
        for it in items:
            if isinstance(it, ir.Loop):
                self._count(it.items, it.items)
                for c in it.carried:
                    self._use(c.init, ("carry", it), block)
                    self._use(c.final, ("carry", it), it.items)
                continue
            for a in it.args:
                self._use(a, it, block)
                if it.op == "unary" and it.attrs["fn"] in ("silu", "relu"):
                    self._use(a, it, block)       # operand appears twice in the expression

    def _use(self, v, user, block):
        if isinstance(v, ir.Value):
            self.uses.setdefault(id(v), []).append((user, block))

    def _dot_into_cast(self, d):
        """A dot whose only use is `.float()`: emit nl.dot's fp32 result directly."""
        if not isinstance(d, ir.Value) or d.op != "dot" or d.name:
            return False
        u = self.uses.get(id(d), [])
        return (len(u) == 1 and not isinstance(u[0][0], tuple) and u[0][0].op == "cast"
                and u[0][0].dtype == torch.float32 and u[0][1] is d.block)

    def _inline(self, v):
        if v.op in ("index", "begin"):
            return True
        if v.op == "dot" and self._dot_into_cast(v):
            return True
        if v.op not in ("binary", "unary", "where", "cast", "view", "trans") or v.name:
            return False
        u = self.uses.get(id(v), [])
        return len(u) == 1 and u[0][1] is v.block and not isinstance(u[0][0], tuple)

    # ------------------------------------------------------------------ expressions
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
            return f"nl.trans({self.ref(a[0])[0]})", ATOM
        if op == "index":
            return f"offs_{v.attrs['dim'].letter}", ATOM
        if op == "begin":
            d = v.attrs["dim"]
            if d.is_index:
                return f"{'pid' if d.kind == 'grid' else 'start'}_{d.letter}", ATOM
            return (f"pid_{d.letter} * BLOCK_SIZE_{d.letter.upper()}" if d.kind == "grid"
                    else f"start_{d.letter}"), (9 if d.kind == "grid" else ATOM)
        if op == "full":
            shape = ", ".join("1" if d is ONE else f"BLOCK_SIZE_{d.letter.upper()}" for d in v.dims)
            shape = f"({shape},)" if v.rank == 1 else f"({shape})"
            if v.attrs["value"] == 0:
                return f"nl.zeros({shape}, dtype={nl_dtype(v.dtype)})", ATOM
            return f"nl.full({shape}, {literal(v.attrs['value'])}, {nl_dtype(v.dtype)})", ATOM
        if op == "load":
            ptr, mask = self._address(v.attrs["ref"], v.attrs["index"])
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
        raise AssertionError(op)

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

    def _address(self, ref, index, at_start_of=None, wrap=()):
        """(pointer expression, mask expression). `at_start_of`: a loop dim whose offsets are
        taken at the loop's first iteration (the tutorial's pointer blocks, built before it).
        `wrap`: dims read at `offs % extent` instead of masked (the tutorial's trick: padded
        rows read real rows; only valid where nothing reduces over those lanes)."""
        r = sum(1 for kind, _ in index if kind in ("tile", "full"))
        terms, masks, j = [f"{ref.name}_ptr"], [], 0
        for axis, (kind, d) in enumerate(index):
            stride = f"stride_{ref.name}{axis}"
            if kind == "int":
                if d:
                    terms.append(f"{d} * {stride}")
                continue
            if kind == "index":      # a block_size=1 tile: a scalar offset, always in bounds
                terms.append(f"{'pid' if d.kind == 'grid' else 'start'}_{d.letter} * {stride}")
                continue
            offs = (f"nl.arange(0, BLOCK_SIZE_{d.letter.upper()})" if d is at_start_of
                    else f"offs_{d.letter}")
            if d in wrap:
                terms.append(f"(offs_{d.letter} % {d.letter.upper()}){bc(j, r)} * {stride}")
            else:
                terms.append(f"{offs}{bc(j, r)} * {stride}")
                masks.append(self.mask(d, j, r))
            j += 1
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

    # ------------------------------------------------------------------ statements
    def emit(self, line, depth):
        self.lines.append("    " * depth + line)

    def block(self, items, depth):
        for idx, it in enumerate(items):
            if isinstance(it, ir.Loop):
                self.loop(it, depth)
                continue
            if it.op == "store":
                ptr, mask = self._address(it.attrs["ref"], it.attrs["index"])
                r = sum(1 for kind, _ in it.attrs["index"] if kind in ("tile", "full"))
                val = self.ref(it.args[0], r)[0]
                self.emit(f"nl.store({ptr}, {val}" + (f", mask={mask})" if mask else ")"), depth)
                continue
            if self._inline(it) or (it.op == "dot" and self._dot_will_fuse(it)):
                continue
            target = self.var.get(id(it)) or self.names.fresh(it.name or self._base(it))
            e, _ = self.expr(it)
            self.emit(f"{target} = {e}", depth)
            self.env[id(it)] = target

    def _dot_will_fuse(self, d):
        u = self.uses.get(id(d), [])
        if len(u) != 1 or isinstance(u[0][0], tuple):
            return False
        add = u[0][0]
        other = add.args[1] if add.args[0] is d else add.args[0]
        return (add.op == "binary" and add.attrs["fn"] == "add" and isinstance(other, ir.Value)
                and other.dims == add.dims and add.dtype == torch.float32 == other.dtype
                and d.args[0].dtype in (torch.float16, torch.bfloat16, torch.float32))

    def _base(self, v):
        if v.op == "load":
            return f"{v.attrs['ref'].name}_tile"
        if v.op == "reduce":
            x = v.args[0]
            src = x.name or (x.attrs["ref"].name if x.op == "load" else None)
            return f"{src}_{v.attrs['kind']}" if src else f"{v.attrs['kind']}_v"
        return {"dot": "dot", "full": "acc"}.get(v.op, "v")

    def loop(self, lp, depth):
        saved = {}
        for c in lp.carried:
            init = c.init
            reuse = (id(init) in self.env and init.name == c.name
                     and all(isinstance(u, tuple) or self._inside(b, lp) for u, b in self.uses.get(id(init), [])))
            name = self.env[id(init)] if reuse else self.names.fresh(c.name)
            if not reuse:
                self.emit(f"{name} = {self.ref(init)[0]}", depth)
            saved[id(init)] = self.env.get(id(init))
            self.env[id(init)] = name
            # If the body reads the old value after the new one is computed, assigning the new
            # value to the variable in place would clobber it: go through a temporary.
            self.var[id(c.final)] = (self.names.fresh(f"{name}_next")
                                     if _read_after(lp.items, c.final, init) else name)
        bumps = self._pointer_blocks(lp, depth)
        inner = depth
        for d in lp.dims:
            L = d.letter
            self.emit(f"for start_{L} in range(0, {L.upper()}, BLOCK_SIZE_{L.upper()}):", inner)
            inner += 1
            self.emit(f"offs_{L} = start_{L} + nl.arange(0, BLOCK_SIZE_{L.upper()})", inner)
            self.emit(f"mask_{L} = offs_{L} < {L.upper()}", inner)
        self.block(lp.items, inner)
        for line in bumps:
            self.emit(line, inner)
        for c in lp.carried:
            name = self.env[id(c.init)]
            if id(c.final) not in self.env:        # the final value was inlined: assign it now
                self.emit(f"{name} = {self.expr(c.final)[0]}", inner)
            elif self.env[id(c.final)] != name:
                self.emit(f"{name} = {self.env[id(c.final)]}", inner)
        for c in lp.carried:
            name = self.env[id(c.init)]
            self.env[id(c.final)] = name
            self.env[id(c.init)] = saved[id(c.init)] or name
            if saved[id(c.init)] is None:
                del self.env[id(c.init)]

    def _pointer_blocks(self, lp, depth):
        """Loads that feed only dots and move along this loop's dim on one axis get the
        tutorial's form: a pointer block built before the loop and advanced by
        BLOCK_SIZE * stride at the end of each iteration (newt's dot pipeline recognises it
        and keeps one scalar offset instead of a pointer per element)."""
        if len(lp.dims) != 1:
            return []
        d, bumps = lp.dims[0], []
        for it in lp.items:
            if not (isinstance(it, ir.Value) and it.op == "load"):
                continue
            axes = [a for a, (kind, dim) in enumerate(it.attrs["index"]) if dim is d]
            users = self.uses.get(id(it), [])
            if len(axes) != 1 or not users or any(
                    isinstance(u, tuple) or u.op != "dot" for u, _ in users):
                continue
            ref = it.attrs["ref"]
            name = self.names.fresh(f"{ref.name}_ptrs")
            wrap = [g for kind, g in it.attrs["index"] if kind == "tile" and g.kind == "grid"
                    and id(g) not in self._reduced_dims()]
            ptr, mask = self._address(ref, it.attrs["index"], at_start_of=d, wrap=wrap)
            self.emit(f"{name} = {ptr}", depth)
            self.ptr_blocks[id(it)] = (name, mask)
            bumps.append(f"{name} += BLOCK_SIZE_{d.letter.upper()} * stride_{ref.name}{axes[0]}")
        return bumps

    def _reduced_dims(self):
        """Dims some reduction or dot sums over: their padded lanes must keep their pad."""
        if not hasattr(self, "_reduced"):
            from .pads import _values
            self._reduced = {id(v.attrs["rdim"]) for v in _values(self.p.items) if v.op == "reduce"}
            self._reduced |= {id(v.attrs["kdim"]) for v in _values(self.p.items) if v.op == "dot"}
        return self._reduced

    def _inside(self, block, lp):
        if block is lp.items:
            return True
        return any(isinstance(it, ir.Loop) and self._inside(block, it) for it in lp.items)

    # ------------------------------------------------------------------ the kernel
    def _grid(self):
        g = self.p.grid
        if len(g) == 1:
            self.emit(f"pid_{g[0].letter} = nl.program_id(0)", 1)
        elif self._grouped():
            m, n = g[0].letter, g[1].letter
            M, N = m.upper(), n.upper()
            for line in (
                    "pid = nl.program_id(0)",
                    f"num_pid_{m} = nl.cdiv({M}, BLOCK_SIZE_{M})",
                    f"num_pid_{n} = nl.cdiv({N}, BLOCK_SIZE_{N})",
                    f"num_pid_in_group = GROUP_SIZE_M * num_pid_{n}",
                    "group_id = pid // num_pid_in_group",
                    "first_pid_m = group_id * GROUP_SIZE_M",
                    f"group_size_m = min(num_pid_{m} - first_pid_m, GROUP_SIZE_M)",
                    f"pid_{m} = first_pid_m + ((pid % num_pid_in_group) % group_size_m)",
                    f"pid_{n} = (pid % num_pid_in_group) // group_size_m"):
                self.emit(line, 1)
        else:
            self.emit("pid = nl.program_id(0)", 1)
            rest = "pid"
            for i, d in enumerate(reversed(g)):
                L = d.letter
                if i == len(g) - 1:
                    self.emit(f"pid_{L} = {rest}", 1)
                    break
                self.emit(f"num_pid_{L} = nl.cdiv({L.upper()}, BLOCK_SIZE_{L.upper()})", 1)
                self.emit(f"pid_{L} = {rest} % num_pid_{L}", 1)
                self.emit(f"rest_{L} = {rest} // num_pid_{L}", 1)
                rest = f"rest_{L}"

    def run(self) -> Lowered:
        self._letters()
        params, constexprs = self._params()
        self._count(self.p.items, self.p.items)
        name = self.names.fresh(self.p.name + "_kernel")
        sig = [p for p, _ in params] + [f"{c}: nl.constexpr" for c, _ in constexprs]
        self.lines = ["@newt.jit", f"def {name}("]
        line = "        "
        for i, s in enumerate(sig):
            piece = s + (", " if i < len(sig) - 1 else "")
            if len(line) + len(piece) > 96:
                self.lines.append(line.rstrip())
                line = "        "
            line += piece
        self.lines.append(line.rstrip() + "):")
        self._grid()
        for d in self.p.dims:
            L, B = d.letter, f"BLOCK_SIZE_{d.letter.upper()}"
            if d.is_index:
                continue
            if d.kind == "grid":
                self.emit(f"offs_{L} = pid_{L} * {B} + nl.arange(0, {B})", 1)
            elif d.kind == "full":
                self.emit(f"offs_{L} = nl.arange(0, {B})", 1)
            else:
                continue
            self.emit(f"mask_{L} = offs_{L} < {L.upper()}", 1)
        self.block(self.p.items, 1)
        return Lowered(name, "\n".join(self.lines) + "\n", params, constexprs, list(self.p.grid))


def _flat(items):
    for it in items:
        if isinstance(it, ir.Loop):
            yield it
            yield from _flat(it.items)
        else:
            yield it


def _read_after(items, final, init) -> bool:
    """Does anything after `final` in this loop body read `init`?"""
    seen = False
    for it in _flat(items):
        if it is final:
            seen = True
        elif seen:
            if isinstance(it, ir.Loop):
                if any(c.init is init for c in it.carried):
                    return True
            elif any(a is init for a in it.args):
                return True
    return False
