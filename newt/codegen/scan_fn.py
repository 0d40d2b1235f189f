"""scan_fn: scans and reductions with a user combine function (nl.associative_scan, nl.reduce,
nl.cumprod), and map_fn (nl.map_elementwise: the user's scalar function per element), through the scratch arena (op.attrs["smem"], one part per operand at
op.attrs["parts"], planned by passes/scratch.py).

The combine function (frontend/combine.py: an IR function over scalars) is printed once as a
device function `void nt_combine_<name>N(a0.., b0.., r0*..)` by a second Emitter, and called
per element. The scan is Hillis-Steele along the axis: log2(n) steps, each staging every
operand's current values at their flat index, a barrier, and each element combining with the
one d elements before it (after it, with `reverse`: the element further right is then the left
argument, as in Triton). The order of combination only regroups, so an associative function
gives the sequential result. A reduction is a tree instead (at step d, each element at a
multiple of 2d takes in the one d after it: n - 1 combines in all), staged once more at the end
so that each result reads the first element of its row; a 1-D reduction gives a scalar every
thread holds.
"""
from __future__ import annotations

from ..ir.core import is_block
from ..ir.layouts import coords_of, flat_of
from .emitter import Emitter, handles


def combine_helper(em, cf) -> str:
    """The name of the device function computing combine function `cf` (printed once)."""
    key = f"combine:{id(cf)}"
    if key in em.helpers:
        return em.helpers[key].split("(", 1)[0].split()[-1]
    name = f"nt_combine_{cf.name}{len(em.helpers)}"
    sub = Emitter(cf.fn, em.options)
    params = [f"{sub.ctype(a)} {sub.name(a)}" for a in cf.fn.body.args]
    params += [f"{sub.ctype(r)}* r{k}" for k, r in enumerate(cf.results)]
    sub.block(cf.fn.body)
    for k, r in enumerate(cf.results):
        sub.emit(f"*r{k} = {sub.name(r)};")
    em.helpers.update(sub.helpers)
    em.helpers[key] = "\n".join([f"NT_INLINE void {name}({', '.join(params)}) {{"] + sub.lines
                                + ["}"])
    return name


@handles("scan_fn")
def _scan_fn(em, op):
    xs, rs = op.operands, op.results
    axis, rev, red = op.attrs["axis"], op.attrs["reverse"], op.attrs["reduce"]
    fn = combine_helper(em, op.attrs["combine"])
    x0 = xs[0]
    lay = x0.attrs["layout"]
    n = x0.shape[axis]
    stride = 1
    for d in x0.shape[axis + 1:]:
        stride *= d
    cts = [em.ctype(x) for x in xs]
    if red:
        accs = [em.fresh("acc") for _ in xs]
        for a, ct in zip(accs, cts):
            em.emit(f"{ct} {a}[{lay.nslots}];")
    else:
        accs = [em.declare(r) for r in rs]
    with em.slots(lay.nslots) as s:
        for a, x in zip(accs, xs):
            em.emit(f"{a}[{s}] = {em.at(x, s, lay)};")
    bufs = []
    for part, ct in zip(op.attrs["parts"], cts):
        bufs.append(em.fresh("cbuf"))
        em.emit(f"{ct}* {bufs[-1]} = {em.smem(op, ct, part)};")

    def stage(first):
        if not first or op.attrs.get("sync_first"):
            em.barrier()
        with em.slots(lay.nslots) as s:
            v = lay.valid("tid", s)
            st = " ".join(f"{bf}[{lay.flat('tid', s)}] = {a}[{s}];" for bf, a in zip(bufs, accs))
            em.emit(f"if ({v}) {{ {st} }}" if v else st)
        em.barrier()

    d, first = 1, True
    while d < n:
        stage(first)
        first = False
        with em.slots(lay.nslots) as s:
            f = em.fresh("f")
            em.emit(f"int {f} = {lay.flat('tid', s)};")
            c = f"(({f} / {stride}) % {n})"
            if red:      # a tree: element c (a multiple of 2d) takes in [c + d, c + 2d)
                cond, other, left = f"{c} % {2 * d} == 0 && {c} + {d} < {n}", \
                    f"{f} + {d * stride}", False
            elif rev:
                cond, other, left = f"{c} + {d} < {n}", f"{f} + {d * stride}", True
            else:
                cond, other, left = f"{c} >= {d}", f"{f} - {d * stride}", True
            v = lay.valid("tid", s)
            theirs = [f"{bf}[{other}]" for bf in bufs]
            mine = [f"{a}[{s}]" for a in accs]
            args = (theirs + mine if left else mine + theirs) + [f"&{a}[{s}]" for a in accs]
            em.emit(f"if ({f'{v} && ' if v else ''}{cond}) {fn}({', '.join(args)});")
        d *= 2
    if not red:
        return
    stage(first)
    last = 0           # the tree's root
    for r, bf in zip(rs, bufs):
        if not is_block(r.type):
            em.declare(r, f"{bf}[{last}]")
            continue
        rl = r.attrs["layout"]
        out = em.declare(r)
        with em.slots(rl.nslots) as s:
            coords = coords_of(rl.flat("tid", s), r.shape)
            src = flat_of(coords[:axis] + [str(last)] + coords[axis:], x0.shape)
            v = rl.valid("tid", s)
            rd = f"{bf}[{src}]"
            em.emit(f"{out}[{s}] = {f'{v} ? {rd} : 0' if v else rd};")


@handles("map_fn")
def _map_fn(em, op):
    """map_elementwise: the user's scalar function (printed once) called per element."""
    fn = combine_helper(em, op.attrs["fn"])
    rs = op.results
    if not is_block(rs[0].type):
        for r in rs:
            em.declare(r)
        args = [em.name(o) for o in op.operands] + [f"&{em.name(r)}" for r in rs]
        em.emit(f"{fn}({', '.join(args)});")
        return
    lay = rs[0].attrs["layout"]
    names = [em.declare(r) for r in rs]
    with em.slots(lay.nslots) as s:
        args = [em.at(o, s, lay) for o in op.operands] + [f"&{n}[{s}]" for n in names]
        em.emit(f"{fn}({', '.join(args)});")
