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
from .lower_expr import ExprMixin
from .lower_branch import BranchMixin, blocks_in
from .lower_scan import ScanMixin
from .ir import is_zero
from .spelling import LETTERS, Names

MAX_LINE = 100      # generated lines longer than this get their pointers and masks named

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
    return Lowering(prog, static_shapes).run()


class Lowering(ExprMixin, ScanMixin, BranchMixin):
    def __init__(self, prog, static_shapes=False):
        self.p, self.names, self.static = prog, Names(), static_shapes
        self.lines, self.env, self.var = [], {}, {}
        self.uses = {}          # id(value) -> [(user, block)]
        self.fused = set()      # ids of dot nodes folded into an accumulator add
        self.ptr_blocks = {}    # id(load) -> (pointer block name, increment) in dot loops
        self.helpers = []       # lines of functions printed before the kernel (combine functions)

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
            if isinstance(d.hi, ir.Value):
                continue                   # an end computed in the kernel: no parameter
            # (a begin computed in the kernel, `hl.tile(loaded, n)`, still ends at host n)
            (constexprs if self.static else params).append((d.letter.upper(), ("extent", d)))
        for r in self.p.tensors:
            for axis in range(r.tensor.dim()):
                params.append((f"stride_{r.name}{axis}", ("stride", r, axis)))
                self.names.used.add(f"stride_{r.name}{axis}")
        self.unspecialized = []    # seeds: any value, one compile
        if self.p.rng:             # torch.rand_like & co: this call's seed (rng.py)
            self.seed = self.names.fresh("seed")
            params.append((self.seed, ("seed", self.p)))
            self.unspecialized.append(self.seed)
        self.host_seeds = [self.names.fresh("rand_seed") for _ in self.p.host_seeds]
        params += [(n, ("scalar", s)) for n, s in zip(self.host_seeds, self.p.host_seeds)]
        self.unspecialized += self.host_seeds
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
                for d in it.dims:
                    for b in (d.lo, d.hi):
                        self._use(b, ("bound", it), block)
                self._count(it.items, it.items)
                for c in it.carried:
                    self._use(c.init, ("carry", it), block)
                    self._use(c.final, ("carry", it), it.items)
                continue
            if isinstance(it, ir.If):
                self.count_branch(it, block)
                continue
            if it.op == "phi":            # its operands are used at the ends of the two sides
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
        if v.op in ("index", "begin", "mask"):
            return True
        if v.op == "dot" and self._dot_into_cast(v):
            return True
        if v.op not in ("binary", "unary", "where", "cast", "view", "trans") or v.name:
            return False
        u = self.uses.get(id(v), [])
        return len(u) == 1 and u[0][1] is v.block and not isinstance(u[0][0], tuple)

    # ------------------------------------------------------------------ statements
    def emit(self, line, depth):
        self.lines.append("    " * depth + line)

    def block(self, items, depth):
        for idx, it in enumerate(items):
            if isinstance(it, ir.Loop):
                self.loop(it, depth)
                continue
            if isinstance(it, ir.If):
                self.branch(it, depth)
                continue
            if it.op == "phi":            # a variable both sides of its `if` assigned
                continue
            if it.op in ("store", "atomic"):
                ref = it.attrs["ref"]
                ptr, mask = self._address(it)
                r = len(it.attrs["dims_of"])
                val = self.ref(it.args[0], r)[0]
                fn = "nl.store" if it.op == "store" else f"nl.atomic_{it.attrs['fn']}"
                store = lambda p, v, m: f"{fn}({p}, {v}" + (f", mask={m})" if m else ")")  # noqa: E731
                ptr, mask = self._short(store(ptr, val, mask), ref, ptr, mask, depth)
                if len("    " * depth + store(ptr, val, mask)) > MAX_LINE:
                    name = self.names.fresh(f"{ref.name}_tile")
                    self.emit(f"{name} = {val}", depth)
                    val = name
                self.emit(store(ptr, val, mask), depth)
                continue
            if self._inline(it) or (it.op == "dot" and self._dot_will_fuse(it)):
                continue
            target = self.var.get(id(it)) or self.names.fresh(it.name or self._base(it))
            if it.op == "load" and id(it) not in self.ptr_blocks:
                ref = it.attrs["ref"]
                ptr, mask = self._address(it, transpose=id(it) in self.transposed)
                line = f"{target} = nl.load({ptr}, mask={mask}, other=0.0)"
                self.ptr_blocks[id(it)] = self._short(line, ref, ptr, mask, depth)
            e, _ = self.expr(it)
            self.emit(f"{target} = {e}", depth)
            self.env[id(it)] = target

    def _short(self, line, ref, ptr, mask, depth):
        """A load or store line longer than MAX_LINE gets its pointer block, then its mask, as
        variables first (`out_ptrs = ...`, `out_mask = ...`), as the tutorial kernels write it."""
        width = len("    " * depth + line)
        if width <= MAX_LINE:
            return ptr, mask
        name = self.names.fresh(f"{ref.name}_ptrs")
        self.emit(f"{name} = {ptr}", depth)
        width -= len(ptr) - len(name)
        if mask and " & " in mask and width > MAX_LINE:
            m = self.names.fresh(f"{ref.name}_mask")
            self.emit(f"{m} = {mask}", depth)
            mask = m
        return name, mask

    def _dot_will_fuse(self, d):
        u = self.uses.get(id(d), [])
        if len(u) != 1 or isinstance(u[0][0], tuple):
            return False
        add = u[0][0]
        if add.op != "binary" or add.attrs["fn"] != "add":    # e.g. sigmoid(x @ w)
            return False
        other = add.args[1] if add.args[0] is d else add.args[0]
        return (isinstance(other, ir.Value)
                and other.dims == add.dims and add.dtype == torch.float32 == other.dtype
                and d.args[0].dtype in (torch.float16, torch.bfloat16, torch.float32))

    def _base(self, v):
        if v.op == "load":
            return f"{v.attrs['ref'].name}_tile"
        if v.op == "reduce":
            x = v.args[0]
            while x.op == "cast" and x.name is None:   # name r.sum() after r, not its cast
                x = x.args[0]
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
        if lp.cond is not None:     # a `while` on a kernel value: its test is a carried bool
            self.emit(f"while {self.env[id(lp.cond.init)]}:", inner)
            inner += 1
        for d in lp.dims:
            L = d.letter
            step = "1" if d.is_index else f"BLOCK_SIZE_{L.upper()}"
            self.emit(f"for start_{L} in range({self.loop_range(d)}, {step}):", inner)
            inner += 1
            if d.is_index:
                continue
            self.emit(f"offs_{L} = start_{L} + nl.arange(0, BLOCK_SIZE_{L.upper()})", inner)
            self.emit(f"mask_{L} = offs_{L} < {self.hi(d)}", inner)
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

    def loop_range(self, d):
        return f"{self.lo(d)}, {self.hi(d)}"     # split.py gives each program a part of it

    def _pointer_blocks(self, lp, depth):
        """Loads that feed only dots and move along this loop's dim on one axis get the
        tutorial's form: a pointer block built before the loop and advanced by
        BLOCK_SIZE * stride at the end of each iteration (newt's dot pipeline recognises it
        and keeps one scalar offset instead of a pointer per element)."""
        if len(lp.dims) != 1:
            return []
        # a loop of two dots (attention's Q K^T then P V) keeps the loads' addresses computed
        # from the loop index: newt then runs K and V through a ring of buffers ahead of the
        # dots (its dot-loads pass, which needs addresses it can compute for a later iteration)
        if sum(isinstance(it, ir.Value) and it.op == "dot" for it in lp.items) >= 2:
            return []
        d, bumps = lp.dims[0], []
        for it in lp.items:
            if not (isinstance(it, ir.Value) and it.op == "load") or not _plain(it) or d.is_index:
                continue
            axes = [a for a, (kind, dim) in enumerate(it.attrs["index"]) if dim is d]
            users = self.uses.get(id(it), [])
            transpose = id(it) in self.transposed      # read through `.T`: its users count
            if transpose:
                users = self.uses.get(id(users[0][0]), [])
            if len(axes) != 1 or not users or any(
                    isinstance(u, tuple) or u.op != "dot" for u, _ in users):
                continue
            ref = it.attrs["ref"]
            name = self.names.fresh(f"{ref.name}_ptrs")
            wrap = [g for kind, g in it.attrs["index"] if kind == "tile" and g.kind == "grid"
                    and is_zero(g.lo) and id(g) not in self._reduced_dims()]
            ptr, mask = self._address(it, at_start_of=d, wrap=wrap,
                                      transpose=transpose)
            self.emit(f"{name} = {ptr}", depth)
            self.ptr_blocks[id(it)] = (name, mask)
            bumps.append(f"{name} += BLOCK_SIZE_{d.letter.upper()} * stride_{ref.name}{axes[0]}")
        return bumps

    def _transposed_loads(self):
        """ids of 2-D loads read only through a transpose (`k[b, tile_n, :].T`): they load the
        transposed tile directly, so a dot gets a plain load as its operand (newt stages such
        loads through its shared-memory ring; a transpose in between would stop that)."""
        from .pads import all_values
        out = set()
        for v in all_values(self.p.items):
            if v.op != "load" or v.rank != 2 or id(v) in self.ptr_blocks or not _plain(v):
                continue
            u = self.uses.get(id(v), [])
            if (len(u) == 1 and not isinstance(u[0][0], tuple) and u[0][0].op == "trans"
                    and u[0][1] is v.block):
                out.add(id(v))
        return out

    def _reduced_dims(self):
        """Dims some reduction or dot sums over: their padded lanes must keep their pad."""
        if not hasattr(self, "_reduced"):
            from .pads import all_values
            self._reduced = {id(v.attrs["rdim"]) for v in all_values(self.p.items)
                             if v.op in ("reduce", "creduce")}
            self._reduced |= {id(v.attrs["kdim"]) for v in all_values(self.p.items) if v.op == "dot"}
        return self._reduced

    def _inside(self, block, lp):
        if block is lp.items:
            return True
        return any(block is b for b in blocks_in(lp.items))

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
                    f"num_pid_{m} = nl.cdiv({self._span(g[0])}, BLOCK_SIZE_{M})",
                    f"num_pid_{n} = nl.cdiv({self._span(g[1])}, BLOCK_SIZE_{N})",
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
                step = "1" if d.is_index else f"BLOCK_SIZE_{L.upper()}"
                self.emit(f"num_pid_{L} = nl.cdiv({self._span(d)}, {step})", 1)
                self.emit(f"pid_{L} = {rest} % num_pid_{L}", 1)
                self.emit(f"rest_{L} = {rest} // num_pid_{L}", 1)
                rest = f"rest_{L}"

    def _span(self, d):
        return d.letter.upper() if is_zero(d.lo) else f"({d.letter.upper()} - {d.lo})"

    def run(self) -> Lowered:
        self._letters()
        params, constexprs = self._params()
        self._count(self.p.items, self.p.items)
        self.transposed = self._transposed_loads()
        name = self.names.fresh(self.p.name + "_kernel")
        sig = [p for p, _ in params] + [f"{c}: nl.constexpr" for c, _ in constexprs]
        jit = (f"@newt.jit(do_not_specialize={self.unspecialized!r})" if self.unspecialized
               else "@newt.jit")
        self.lines = [jit, f"def {name}("]
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
                first = "" if is_zero(d.lo) else f"{d.lo} + "
                self.emit(f"offs_{L} = {first}pid_{L} * {B} + nl.arange(0, {B})", 1)
            elif d.kind == "full":
                self.emit(f"offs_{L} = nl.arange(0, {B})", 1)
            else:
                continue
            self.emit(f"mask_{L} = offs_{L} < {L.upper()}", 1)
        self.block(self.p.items, 1)
        return Lowered(name, "\n".join(self.helpers + self.lines) + "\n", params, constexprs,
                       list(self.p.grid))


def _flat(items):
    for it in items:
        if isinstance(it, ir.Loop):
            yield it
            yield from _flat(it.items)
        elif isinstance(it, ir.If):
            yield from _flat(it.then)
            yield from _flat(it.other)
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


def _plain(load) -> bool:
    """A load indexed with tiles, slices from 0 and ints only (no gather, None axis, partial
    slice or extra mask): its address may be rewritten (pointer blocks, transposed reads)."""
    return (not load.args and not load.attrs.get("starts")
            and all(kind in ("tile", "full", "int", "index") for kind, _ in load.attrs["index"]))
