"""Codegen of a dot loop's epilogue: `dot_acc_out` (the accumulator leaves the fragment layout)
and `dot_store` (the masked store of a value computed from it).

dot_acc_out goes through shared memory with rows padded by 8 words: the fragment layout's
writes (8 rows x 4 column pairs per warp) then hit each bank at most twice instead of 8 times,
and the reads back in the group-cyclic layout take 16 bytes at a time where a group holds whole
4-word runs (scalar reads of 8 consecutive words per thread conflict 8 ways).

Where it sits: codegen. The stores that consume a staged accumulator were marked `dot_store`
by newt/passes/tc/dot_stores.py, after the layout pass had planned them as ordinary stores:
same operands (ptr, value[, mask]) and layouts, so the layout pass's vector widths and
run-length facts hold.

Why not the generic store: it materializes one 64-bit pointer (and one mask bit) per element
slot before the first store and tests every group before any is written, so all of them are
alive at once: 128 pointers per thread (256 registers) at a 256x128 tile, which spills. Here
each 16-byte group recomputes its address and mask from the index math at the moment it is
stored (the pointer block is index-computable), decides vector-or-scalar on its own, and
nothing per-slot but the values outlives its group.
"""
from __future__ import annotations

from ...ir.layouts import CyclicLayout
from ...ir.pointers import static_groups
from ...ir.schedule import acc_layout
from ...ir.shared_memory import OWN
from . import store_tma
from .dot import own_base, planned_base
from .dot_ptx import add_helpers
from .mma import FRAG_PACK, FRAG_PACK8
from ..emitter import handles
from ..memory import NARROW, bits_of, mask_all, pack_store, utype, to_bits

class _Recompute(CyclicLayout):
    """The same geometry under another key: em.at() then evaluates index-computable values from
    their index math where they are used instead of reading their materialized arrays."""

    def __init__(self, lay):
        super().__init__(lay.numel, lay.num_threads, lay.vec)

    def key(self):
        return ("recompute",) + super().key()


@handles("dot_store")
def _dot_store(em, op):
    ptr, val = op.operands[0], op.operands[1]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    dt = val.dtype
    lay = ptr.attrs["layout"]
    rl = _Recompute(lay)
    size = max(1, dt.bits // 8)
    b = bits_of(dt)
    ut = utype(b)
    vec = lay.vec
    width = min(16, vec * size)
    per = vec * size // width
    contig = ptr.attrs.get("contig", 1) >= vec
    # the run facts prove every group consecutive, aligned and under one mask bit (pointers
    # and strides specialized as divisible by 16): one predicated vector store per group, as
    # Triton emits it, with neither a run-time test nor a scalar path to fall back on
    static = vec > 1 and static_groups(ptr, mask, vec, width, size)
    bits = em.staged_bits.get(val.id)      # the staged value's own storage bits (_acc_out_narrow)
    em.emit("#pragma unroll")
    with em.scope(f"for (int g = 0; g < {lay.groups}; ++g)"):
        first = "g * %d" % vec
        v = lay.valid("tid", first)
        if v:
            em.emit(f"if (!{v}) continue;")
        raw = em.fresh("raw")
        em.emit(f"{ut} {raw}[{vec}];")
        for j in range(vec):
            x = f"{bits}[{first} + {j}]" if bits else to_bits(dt, em.at(val, f"{first} + {j}"))
            em.emit(f"{raw}[{j}] = ({ut})({x});")
        p0 = em.fresh("p0")
        em.emit(f"{em.ctype(ptr)} {p0} = {em.at(ptr, first, rl)};")
        if static:
            bit = em.at(mask, first, rl) if mask is not None else None
            k = width // size
            for a in range(per):
                em.emit(pack_store(p0, a * width, width, size,
                                    [f"{raw}[{a * k + e}]" for e in range(k)], bit))
        else:
            _tested_group(em, ptr, mask, rl, first, p0, raw, vec, width, size, contig)


def _tested_group(em, ptr, mask, rl, first, p0, raw, vec, width, size, contig):
    """One group of a store nothing proved aligned: a vector store when the run-time test
    (alignment, consecutive pointers, every mask bit) passes, predicated scalars otherwise."""
    conds = [f"((u64)({p0}) & {width - 1}) == 0"] if vec > 1 else []
    if not contig and vec > 1:
        conds += [f"{em.at(ptr, f'{first} + {j}', rl)} == {p0} + {j}" for j in range(1, vec)]
    if mask is not None:
        conds += mask_all(em, mask, rl, first, vec)
    if vec > 1:
        with em.scope(f"if ({' && '.join(f'({c})' for c in conds)})"):
            k = width // size
            for a in range(vec * size // width):
                em.emit(pack_store(p0, a * width, width, size,
                                    [f"{raw}[{a * k + e}]" for e in range(k)]))
        em.emit("else")
    with em.scope(""):
        for j in range(vec):
            pj = f"{p0} + {j}" if contig else em.at(ptr, f"{first} + {j}", rl)
            mj = em.at(mask, f"{first} + {j}", rl) if mask is not None else "true"
            em.emit(f"nt_stp{size * 8}({pj}, {mj}, {raw}[{j}]);")


_VEC4 = {"float": "float4", "i32": "int4", "int": "int4"}
# narrow floats held in fp32 registers: (to bits, from bits, bytes)
_NARROW = {n: NARROW[n][:2] + ((2 if n in ("float16", "bfloat16") else 1),) for n in NARROW}
_PACK_KIND = {"nt_f2h": "f16", "nt_f2b": "bf16", "nt_f_e4m3": "e4m3", "nt_f_e5m2": "e5m2"}


def _read_back(em, dst, N, pitch, buf, rn, vtype, per, unpack, conv, zero):
    """The staged rows -> the result's layout: one 16-byte read (`vtype`, `per` elements) per
    piece of a group where the group holds whole runs of them, element by element otherwise.
    unpack(t, e) gives element e of read t; conv converts one element read alone."""
    vec = getattr(dst, "vec", 1)
    if (vtype and isinstance(dst, CyclicLayout) and vec % per == 0 and N % vec == 0
            and not dst.valid("tid", "0") and dst.nslots % vec == 0):
        with em.slots(dst.nslots // vec, "g"):
            em.emit(f"const int fl = {dst.flat('tid', f'g * {vec}')}, "
                    f"rr = fl / {N}, cc = fl % {N};")
            for q in range(vec // per):
                t = em.fresh("q")
                em.emit(f"const {vtype} {t} = *(const {vtype}*)&{buf}[rr * {pitch} + cc + "
                        f"{per * q}];")
                for e in range(per):
                    em.emit(f"{rn}[g * {vec} + {per * q + e}] = {unpack(t, e)};")
    else:
        with em.slots(dst.nslots) as s:
            v = dst.valid("tid", s)
            fl = dst.flat("tid", s)
            rd = conv(f"{buf}[(({fl}) / {N}) * {pitch} + ({fl}) % {N}]")
            em.emit(f"{rn}[{s}] = {f'{v} ? {rd} : {zero}' if v else rd};")


def _acc_out_narrow(em, op, src, dst, base, buf, n, narrow):
    """dot_acc_out of a 16- or 8-bit float value: each thread's column pairs go to shared
    memory as one 32- or 16-bit word (the fragment holds columns 2j, 2j+1 in slots 2j, 2j+1:
    checked on the layout's Python model), and come back 16 bytes per read. Rows padded by 16
    bytes: the fragment's 8 rows x 4 column pairs per warp hit 32 banks (16-bit), or 16 banks
    with two pairs to a word (8-bit)."""
    to, frm, es = narrow
    kind = _PACK_KIND[to]
    pack = f"newt_frag_pack_{kind}"               # two fp32 -> one word: one cvt on the device
    add_helpers(em, (pack, (FRAG_PACK if es == 2 else FRAG_PACK8).format(kind=kind, cvt=to)))
    N = src.N
    pitch = N + 16 // es
    T = em.T
    assert all(src.py_flat(t, 2 * p + 1) == src.py_flat(t, 2 * p) + 1
               and src.py_flat(t, 2 * p) % 2 == 0
               for t in range(T) for p in range(src.nslots // 2)), "fragment pairs"
    if op.attrs.get("tma_store"):     # passes/tc/store_tma.py: the tile leaves by TMA boxes
        return store_tma.stage(em, op, src, base, n, pack)
    ut, wt = ("u16", "u32") if es == 2 else ("u8", "u16")
    em.emit(f"{ut}* {buf} = ({ut}*)(nt_dot_smem + ({base} - newt_smem_addr(nt_dot_smem)));")
    em.barrier()
    with em.slots(src.nslots // 2, "p") as p:
        row, col = src.row_col("tid", f"2 * {p}")
        em.emit(f"*({wt}*)&{buf}[({row}) * {pitch} + ({col})] = "
                f"({wt}){pack}({n(f'2 * {p}')}, {n(f'2 * {p} + 1')});")
    em.barrier()
    # Read back as storage bits; the fp32 register form is computed from them. A store of the
    # value itself (dot_store) takes the bits: widening to fp32 and rounding back (inline
    # PTX NVRTC cannot fold) would cost two conversions per element. Unused, either array
    # is dead code to NVRTC.
    bits = em.fresh("accb")
    em.emit(f"{ut} {bits}[{dst.nslots}];")
    per = 16 // es                       # elements per 16-byte read, 32 // (8 es) per word
    _read_back(em, dst, N, pitch, buf, bits, "uint4", per,
               lambda t, e: f"({ut})({t}.{'xyzw'[e * es // 4]} >> {8 * es * (e % (4 // es))})",
               lambda rd: rd, f"({ut})0")
    rn = em.declare(op.result)
    with em.slots(dst.nslots) as s_:
        em.emit(f"{rn}[{s_}] = {frm}({bits}[{s_}]);")
    em.staged_bits[op.result.id] = bits
    em.barrier()
    claim_stores(em, op)


@handles("dot_acc_out")
def _acc_out(em, op):
    """Fragment layout (of the dot that produced the loop-carried value) -> the result's layout,
    through shared memory (the loop's ring, idle after the loop, or the dot area)."""
    x, r = op.operands[0], op.result
    plan = op.attrs["dot_plan"]
    if plan.engine != "mma":
        em.alias(r, x)
        return
    # the accumulator's fragment, or a column slice of it (passes/tc/fragment_split.py)
    src = acc_layout(plan, em.T) if "cols" not in op.attrs else x.attrs["layout"]
    dst = r.attrs["layout"]
    if dst == src:
        em.alias(r, x)
        return
    N = src.N
    pitch = N + 8                      # words per staged row (see the module docstring)
    em.emit("extern __shared__ __align__(16) unsigned char nt_dot_smem[];")
    region = op.attrs["smem"]          # the loop's ring or the dot area (passes/tc/regions.py)
    base = own_base(region) if region.where == OWN else planned_base(em, region)
    ct = em.ctype(x)
    buf = em.fresh("accx")
    n = lambda s: em.at(x, s)          # noqa: E731 (an array, or a lazy slice of one)
    narrow = _NARROW.get(x.dtype.name) if ct == "float" else None
    if narrow is not None:  # cast in the fragment (passes/tc/fragment_epilogue.py): its bits
        return _acc_out_narrow(em, op, src, dst, base, buf, n, narrow)
    em.emit(f"{ct}* {buf} = ({ct}*)(nt_dot_smem + ({base} - newt_smem_addr(nt_dot_smem)));")
    em.barrier()
    with em.slots(src.nslots) as s:
        row, col = src.row_col("tid", s)
        em.emit(f"{buf}[({row}) * {pitch} + ({col})] = {n(s)};")
    em.barrier()
    rn = em.declare(r)
    _read_back(em, dst, N, pitch, buf, rn, _VEC4.get(ct), 4, lambda t, e: f"{t}.{'xyzw'[e]}",
               lambda rd: rd, f"({ct})0")
    em.barrier()
    claim_stores(em, op)   # the epilogue's stores: addresses per group


@handles("dot_acc_cols")
def _acc_cols(em, op):
    """A column slice of a fragment (passes/tc/fragment_split.py): no code, its slots are the
    whole fragment's registers (AccColumns.slot)."""
    x, cols = op.operands[0], op.attrs["cols"]
    em.lazy[op.result.id] = lambda s: em.at(x, cols.slot(s))


def claim_stores(em, out_op):
    """From here on, the stores after `out_op` that passes/tc/dot_stores.py marked are
    `dot_store`s (Emitter.claims)."""
    ops = out_op.parent.ops
    em.claims.update(id(o) for o in ops[ops.index(out_op) + 1:] if o.attrs.get("dot_store"))
