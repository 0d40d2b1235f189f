"""Split reductions: a long device loop that only sums, spread over SPLIT programs per tile.

Where it sits: between lowering and launching. kernel.py's launcher asks `bind_split` for the
launch of each traced program; with the config's `reduction_split` at 1, or a program this file
does not recognise, it answers None and the program is lower.py's one kernel, unchanged.
Otherwise it is two kernels (the autotuner's compile workers and `k.compile` get both).

Why: `for tm in hl.tile(m): acc = 0; for tn in hl.tile(n): acc = acc + x[tm, tn].sum(-1)`
launches one program per row tile. With few rows (m=16, n=2**20) 16 programs stream 64 MB
while the other SMs idle. Splitting the `tn` range over SPLIT programs per row tile fills them.

The design, and why it is this one:
  - Each of the SPLIT programs (a second grid axis, `pid_split = nl.program_id(1)`) runs the
    loop over its own run of whole blocks, `[pid_split * span, min(... + span, N))`, and stores
    its accumulators into an fp32 workspace `[SPLIT, *accumulator shape]` (`acc_parts` for
    `acc`) that deuteron allocates (the "partial" kernel). Its body is the user's loop as
    lower.py prints it; only the range differs.
  - A second kernel (the "combine" kernel), over the original grid, sums the SPLIT partials in
    the fixed order 0, 1, ..., SPLIT-1 and then runs the user's code after the loop (the
    epilogue: casts, stores) exactly as the unsplit kernel would.
  Two launches instead of one last-arriving program or atomics: the result is the same on
    every run (a fixed summation order; atomics are not), nothing needs a counter that must be
    zeroed between calls, and the epilogue runs once per tile without a branch on arrival.
    The second launch costs a few microseconds, small next to the loop it splits.
  Both kernels take the same parameters (the combine kernel ignores the loop's tensors), so
    one argument list launches both and the launch plan (plan.py) replays them as one launch.
    The workspace is allocated once per traced launch and reused by its replays (launches on
    one stream run in order, so a replay never overlaps the previous one).

What is recognised (`split_loop`): a program whose top level holds exactly one device loop (no
`if` beside it), over one tile dim starting at 0 with a host end, with no dot, loop or `if`
inside it and no store or atomic before or in it; each loop-carried value starts as an fp32
`hl.zeros` over grid tiles from 0 and full slices, and is updated only by `acc = acc + e` (or
`acc += e`) where `e` does not read `acc`; the code after the loop reads of the loop's values
only those final accumulators. Anything else keeps one kernel whatever the config says.
"""
from __future__ import annotations

import dataclasses

import torch

from . import ir
from .ir import is_zero
from .kernel import Launch, bind
from .lower import MAX_LINE, Lowering, lower
from .pads import all_values

KNOB = "reduction_split"       # the config key (dt.Config(..., reduction_split=4))


def split_of(config) -> int:
    return int(config.tunable(KNOB, 1))


def split_loop(prog: ir.Program):
    """The device loop of `prog` that may be split (see the module docstring), or None."""
    tops = [it for it in prog.items if isinstance(it, (ir.Loop, ir.If))]
    if prog.has_dot or len(tops) != 1 or not isinstance(tops[0], ir.Loop):
        return None
    lp = tops[0]
    if lp.cond is not None or len(lp.dims) != 1 or not lp.carried:
        return None
    d = lp.dims[0]
    if d.is_index or d.jagged is not None or not is_zero(d.lo) or not isinstance(d.hi, int):
        return None
    if any(isinstance(it, (ir.Loop, ir.If)) for it in lp.items):
        return None
    k = next(i for i, it in enumerate(prog.items) if it is lp)
    before, after = prog.items[:k], prog.items[k + 1:]
    if any(v.op in ("store", "atomic") for v in list(all_values(before)) + lp.items):
        return None
    for c in lp.carried:
        if not _sum_update(c, lp):
            return None
    inside = {id(v) for v in lp.items} | {id(c.init) for c in lp.carried}
    finals = {id(c.final) for c in lp.carried}
    for v in all_values(after):
        if any(isinstance(a, ir.Value) and id(a) in inside and id(a) not in finals for a in v.args):
            return None
    return lp


def _sum_update(c, lp) -> bool:
    init, f = c.init, c.final
    if not (isinstance(init, ir.Value) and init.op == "full" and init.attrs.get("value") == 0
            and init.dtype == torch.float32 and isinstance(f, ir.Value)):
        return False
    if f.op != "binary" or f.attrs.get("fn") != "add" or f.dtype != torch.float32:
        return False
    if sum(a is init for a in f.args) != 1 or not ir.dims_match(f.dims, init.dims):
        return False
    if not all(d.kind in ("grid", "full") and not d.is_index and d.block_of is None
               and is_zero(d.lo) for d in init.dims):
        return False
    # the old value is read by the update only (`acc = acc * 0.5 + e` is not a sum)
    return all(v is f or not any(a is init for a in v.args) for v in lp.items)


# ---------------------------------------------------------------------- the two kernels
class _SplitLowering(Lowering):
    """lower.Lowering with a workspace per accumulator and a SPLIT constexpr."""

    def __init__(self, prog, static, lp, works, split):
        super().__init__(prog, static)
        self.lp, self.works, self.split = lp, works, split
        self.names.used.update({"SPLIT", "pid_split"})

    def _params(self):
        params, constexprs = super()._params()
        return params, constexprs + [("SPLIT", ("value", self.split))]

    def _top(self, items):
        return next(i for i, it in enumerate(items) if it is self.lp)

    def ws_address(self, c, ref, which, depth):
        """(pointer, mask) of accumulator `c`'s row `which` of its workspace (the pointer
        named first when the line would be long, as lower.py does for loads and stores)."""
        dims, r = c.init.dims, len(c.init.dims)
        ptr, masks = f"{ref.name}_ptr + {which} * stride_{ref.name}0", []
        for i, d in enumerate(dims):
            axes = "" if r == 1 else "[" + ", ".join(
                ":" if j == i else "None" for j in range(r)) + "]"
            ptr += f" + offs_{d.letter}{axes} * stride_{ref.name}{i + 1}"
            masks.append(f"mask_{d.letter}{axes}")
        if len(ptr) + 4 * depth > MAX_LINE - 40:
            name = self.names.fresh(f"{ref.name}_ptrs")
            self.emit(f"{name} = {ptr}", depth)
            ptr = name
        return ptr, " & ".join(masks)


class _PartialLowering(_SplitLowering):
    """The loop over this program's share of the range; the accumulators go to the workspace."""

    def _grid(self):
        super()._grid()
        self.emit("pid_split = nl.program_id(1)", 1)

    def loop(self, lp, depth):
        if lp is self.lp:
            d = lp.dims[0]
            L, B, N = d.letter, f"BLOCK_SIZE_{d.letter.upper()}", self.hi(d)
            self.emit(f"# the {L} loop cut into SPLIT shares of whole blocks: this program runs "
                      "share pid_split", depth)
            self.emit(f"span_{L} = nl.cdiv(nl.cdiv({N}, {B}), SPLIT) * {B}", depth)
            self.emit(f"begin_{L} = pid_split * span_{L}", depth)
            self.emit(f"end_{L} = min(begin_{L} + span_{L}, {N})", depth)
        super().loop(lp, depth)

    def loop_range(self, d):
        if d is self.lp.dims[0]:
            return f"begin_{d.letter}, end_{d.letter}"
        return super().loop_range(d)

    def block(self, items, depth):
        if items is not self.p.items:
            return super().block(items, depth)
        super().block(items[:self._top(items) + 1], depth)
        for c, ref in self.works:
            ptr, mask = self.ws_address(c, ref, "pid_split", depth)
            self.emit(f"nl.store({ptr}, {self.env[id(c.final)]}, mask={mask})", depth)


class _CombineLowering(_SplitLowering):
    """The SPLIT partials summed in a fixed order, then the code after the loop."""

    def block(self, items, depth):
        if items is not self.p.items:
            return super().block(items, depth)
        k = self._top(items)
        super().block(items[:k], depth)
        names = []
        for c, _ in self.works:
            name = self.env.get(id(c.init))
            if name is None:
                name = self.names.fresh(c.name)
                self.emit(f"{name} = {self.ref(c.init)[0]}", depth)
            names.append(name)
        s = self.names.fresh("split")
        L, name = self.lp.dims[0].letter, self.p.name.replace("_combine", "_partial")
        self.emit(f"# the {L} loop ran in SPLIT shares ({name}_kernel): add their partial "
                  "sums in order", depth)
        self.emit(f"for {s} in range(0, SPLIT):", depth)
        for (c, ref), name in zip(self.works, names):
            ptr, mask = self.ws_address(c, ref, s, depth + 1)
            self.emit(f"{name} = {name} + nl.load({ptr}, mask={mask}, other=0.0)", depth + 1)
            self.env[id(c.final)] = name
        super().block(items[k + 1:], depth)


@dataclasses.dataclass
class SplitLaunch(Launch):
    """The partial kernel on grid (programs, SPLIT), then the combine kernel on (programs,):
    `jitfn` and `source` hold both, `args` / `kwargs` serve both."""

    def __call__(self):
        for call in launches(self):
            call()



def launches(call) -> list:
    """The plain launches a launch makes: itself, or a SplitLaunch's two (to compile each)."""
    if not isinstance(call, SplitLaunch):
        return [call]
    grids = (call.grid, call.grid[:1])
    return [Launch(f, g, call.args, call.kwargs) for f, g in zip(call.jitfn, grids)]


def bind_program(kernel, prog, config):
    """(lowered, launch) of one traced program under `config`: one kernel, or the split pair."""
    got = bind_split(kernel, prog, config)
    if got is None:
        low = lower(prog, kernel.static_shapes)
        return low, bind(low, config, kernel.jit_function(low))
    return got


def bind_split(kernel, prog, config):
    """(lowered, SplitLaunch) of `prog` under `config`, or None where `config` does not split
    it (reduction_split 1, or a program split_loop does not recognise)."""
    split = split_of(config)
    lp = split_loop(prog) if split > 1 else None
    if lp is None:
        return None
    device = prog.tensors[0].tensor.device if prog.tensors else torch.device("cpu")
    works = []
    for c in lp.carried:
        shape = [split] + [d.extent for d in c.init.dims]
        ref = ir.TensorRef(torch.empty(shape, dtype=torch.float32, device=device),
                           name=f"{c.name}_parts", workspace=True)
        works.append((c, ref))
    lows = [cls(dataclasses.replace(prog, name=f"{prog.name}_{part}",
                                    tensors=prog.tensors + [r for _, r in works]),
                kernel.static_shapes, lp, works, split).run()
            for cls, part in ((_PartialLowering, "partial"), (_CombineLowering, "combine"))]
    calls = [bind(low, config, kernel.jit_function(low)) for low in lows]
    low = dataclasses.replace(lows[0], source=lows[0].source + "\n\n" + lows[1].source)
    return low, SplitLaunch((calls[0].jitfn, calls[1].jitfn), (calls[0].grid[0], split),
                            calls[0].args, calls[0].kwargs, f"{lows[0].name}+{lows[1].name}",
                            low.source)
