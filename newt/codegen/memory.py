"""Global memory: load and store of blocks and scalars.

Per group of `vec` slots (consecutive elements, layouts.py) the kernel checks at run time that
the group's pointers are consecutive, the first is aligned to the access width, and every mask
bit is set. When all groups of the op pass, each group is one or two vector accesses (128-bit
when the group holds 16 bytes); otherwise every slot takes the predicated scalar path, which
reads nothing for masked-off slots (they get `other`) and writes nothing. Invalid slots of a
partial layout are never accessed. When offsets come from arange the compiler folds the
consecutive-pointer test away; the alignment and mask tests are a few integer ops in front of
a memory access that costs hundreds of cycles.

fp16/bf16 are 16-bit in memory and fp32 in registers; bool is one byte.
"""
from __future__ import annotations

from ..ir.core import is_block
from .emitter import handles, reg_type, storage_type

_VEC_TYPE = {4: "u32", 2: "u16", 1: "u8"}


def from_bits(dt, bits: str) -> str:
    """Register value of `dt` from its storage bits (an unsigned integer expression)."""
    n = dt.name
    if n == "float32":
        return f"__uint_as_float((u32)({bits}))"
    if n == "float64":
        return f"__longlong_as_double((i64)({bits}))"
    if n == "float16":
        return f"nt_h2f((u16)({bits}))"
    if n == "bfloat16":
        return f"nt_b2f((u16)({bits}))"
    if n == "int1":
        return f"(({bits}) != 0)"
    return f"({reg_type(dt)})({storage_type(dt)})({bits})"


def to_bits(dt, x: str) -> str:
    """Storage bits (as an unsigned integer of the element's width) of a register value."""
    n = dt.name
    if n == "float32":
        return f"__float_as_uint({x})"
    if n == "float64":
        return f"(u64)__double_as_longlong({x})"
    if n == "float16":
        return f"(u32)nt_f2h({x})"
    if n == "bfloat16":
        return f"(u32)nt_f2b({x})"
    ut = {1: "u8", 8: "u8", 16: "u16", 32: "u32", 64: "u64"}[dt.bits]
    return f"({'u64' if dt.bits == 64 else 'u32'})({ut})({x})"


def _bits(dt) -> int:
    return max(8, dt.bits)


def _utype(bits) -> str:
    return {8: "u16", 16: "u16", 32: "u32", 64: "u64"}[bits]


def load_conv(dt, x: str) -> str:
    """Register value from an element read through a storage-typed pointer."""
    if dt.name == "float16":
        return f"nt_h2f({x})"
    if dt.name == "bfloat16":
        return f"nt_b2f({x})"
    if dt.is_bool():
        return f"({x} != 0)"
    return x


def store_conv(dt, x: str) -> str:
    if dt.name == "float16":
        return f"nt_f2h({x})"
    if dt.name == "bfloat16":
        return f"nt_f2b({x})"
    if dt.is_bool():
        return f"(u8)({x})"
    return x


def _plan(op, lay, dt):
    """(vec, access width in bytes, accesses per group), or None for scalar-only access."""
    size = max(1, dt.bits // 8)
    vec = lay.vec
    if vec < 2 or op.attrs.get("volatile"):
        return None
    width = min(16, vec * size)
    return vec, width, vec * size // width


def _element_bits(word_exprs, size, e):
    """Bits of element e (of `size` bytes) inside an access given as 32-bit words."""
    if size == 8:
        return f"(((u64){word_exprs[2 * e + 1]} << 32) | (u64){word_exprs[2 * e]})"
    if size == 4:
        return word_exprs[e]
    per = 4 // size
    w, k = word_exprs[e // per], e % per
    mask = (1 << (8 * size)) - 1
    return f"(({w} >> {8 * size * k}) & {mask}u)" if k else f"({w} & {mask}u)"


def _mask_all(em, mask, lay, first: str, vec: int) -> list[str]:
    """C conditions that together say every mask bit of a group is set. Run lengths from the
    layout pass shrink `offs < n` with contiguous offs to one test of the group's last slot."""
    at = lambda j: em.at(mask, f"{first} + {j}" if j else first, lay)  # noqa: E731
    if mask.attrs.get("const", 1) >= vec:
        return [at(0)]
    op = mask.owner
    if getattr(op, "opcode", None) == "binary" and mask.attrs.get("icomp"):
        k = op.attrs["op"]
        a, b = op.operands
        if k == "and":
            return _mask_all(em, a, lay, first, vec) + _mask_all(em, b, lay, first, vec)
        if k in ("lt", "le", "gt", "ge"):
            inc_a = a.attrs.get("contig", 1) >= vec and b.attrs.get("const", 1) >= vec
            inc_b = b.attrs.get("contig", 1) >= vec and a.attrs.get("const", 1) >= vec
            if inc_a or inc_b:
                last = (k in ("lt", "le")) == inc_a
                return [at(vec - 1 if last else 0)]
    return [at(j) for j in range(vec)]


def _group_check(em, op, lay, ptr, mask, vec, width):
    ok = em.fresh("vok")
    em.emit(f"bool {ok} = true;")
    with em.slots(lay.groups, "g"):
        first = f"g * {vec}"
        p0 = em.at(ptr, first, lay)
        conds = [f"((u64)({p0}) & {width - 1}) == 0"]
        v = lay.valid("tid", first)
        if ptr.attrs.get("contig", 1) < vec:    # not contiguous by construction: test it
            for j in range(1, vec):
                conds.append(f"{em.at(ptr, f'{first} + {j}', lay)} == {p0} + {j}")
        if mask is not None:
            conds += _mask_all(em, mask, lay, first, vec)
        test = " & ".join(f"({c})" for c in conds)     # & not &&: no branches
        em.emit(f"{ok} &= {f'!{v} | ' if v else ''}({test});")
    return ok


@handles("load")
def _load(em, op):
    ptr, r = op.operands[0], op.result
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    other = op.operands[-1] if op.attrs.get("has_other") else None
    dt = r.dtype
    st = storage_type(dt)
    vol = "volatile " if op.attrs.get("volatile") else ""
    if not is_block(r.type):
        read = load_conv(dt, f"*({vol}const {st}*)({em.name(ptr)})")
        if mask is not None:
            alt = em.name(other) if other is not None else f"({em.ctype(r)})0"
            read = f"{em.name(mask)} ? {read} : {alt}"
        em.declare(r, read)
        return
    lay = r.attrs["layout"]
    plan = _plan(op, lay, dt)
    if plan is None:                       # plain (volatile or single-element) accesses
        n = em.declare(r)
        with em.slots(lay.nslots) as s:
            conds = [c for c in (lay.valid("tid", s), mask and em.at(mask, s, lay)) if c]
            alt = em.at(other, s, lay) if other is not None else f"({em.ctype(r)})0"
            read = load_conv(dt, f"*({vol}const {st}*)({em.at(ptr, s, lay)})")
            em.emit(f"{n}[{s}] = {' && '.join(conds)} ? {read} : {alt};" if conds
                    else f"{n}[{s}] = {read};")
        return
    # both paths fill raw storage bits; one conversion to registers afterwards
    b = _bits(dt)
    ut = _utype(b)
    raw = em.fresh("raw")
    em.emit(f"{ut} {raw}[{lay.nslots}];")
    if other is not None and other.id in em.inline:
        ob = em.fresh("other")
        em.emit(f"const {ut} {ob} = ({ut})({to_bits(dt, em.at(other, 0, lay))});")
        other_bits = lambda s: ob  # noqa: E731
    elif other is not None:
        other_bits = lambda s: f"({ut})({to_bits(dt, em.at(other, s, lay))})"  # noqa: E731
    else:
        other_bits = lambda s: "0"  # noqa: E731
    vec, width, per = plan
    size = max(1, dt.bits // 8)
    ok = _group_check(em, op, lay, ptr, mask, vec, width)
    with em.scope(f"if ({ok})"):
        with em.slots(lay.groups, "g"):
            v = lay.valid("tid", f"g * {vec}")
            if v:
                em.emit(f"if (!{v}) continue;")
            p0 = em.at(ptr, f"g * {vec}", lay)
            for a in range(per):
                words = _asm_load(em, p0, a * width, width)
                for e in range(width // size):
                    bits = _element_bits(words, size, e)
                    em.emit(f"{raw}[g * {vec} + {a * (width // size) + e}] = ({ut})({bits});")
    with em.scope("else"):
        with em.slots(lay.nslots) as s:
            conds = [c for c in (lay.valid("tid", s), mask and em.at(mask, s, lay)) if c]
            em.emit(f"{raw}[{s}] = nt_ldp{b}({em.at(ptr, s, lay)}, "
                    f"{' && '.join(conds) or 'true'}, {other_bits(s)});")
    em.elementwise(op, lambda s: from_bits(dt, f"{raw}[{s}]"))


@handles("store")
def _store(em, op):
    ptr, val = op.operands[0], op.operands[1]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    dt = val.dtype
    st = storage_type(dt)
    if not is_block(ptr.type):
        cond = "tid == 0" + (f" && {em.name(mask)}" if mask is not None else "")
        em.emit(f"if ({cond}) *({st}*)({em.name(ptr)}) = {store_conv(dt, em.name(val))};")
        return
    lay = ptr.attrs["layout"]
    plan = _plan(op, lay, dt)
    b = _bits(dt)
    ut = _utype(b)
    raw = em.fresh("raw")                  # storage bits, converted once for both paths
    em.emit(f"{ut} {raw}[{lay.nslots}];")
    with em.slots(lay.nslots) as s:
        em.emit(f"{raw}[{s}] = ({ut})({to_bits(dt, em.at(val, s, lay))});")

    def scalar_path():
        with em.slots(lay.nslots) as s:
            conds = [c for c in (lay.valid("tid", s), mask and em.at(mask, s, lay)) if c]
            em.emit(f"nt_stp{b}({em.at(ptr, s, lay)}, {' && '.join(conds) or 'true'}, {raw}[{s}]);")

    if plan is None:
        scalar_path()
        return
    vec, width, per = plan
    size = max(1, dt.bits // 8)
    ok = _group_check(em, op, lay, ptr, mask, vec, width)
    with em.scope(f"if ({ok})"):
        with em.slots(lay.groups, "g"):
            v = lay.valid("tid", f"g * {vec}")
            if v:
                em.emit(f"if (!{v}) continue;")
            p0 = em.at(ptr, f"g * {vec}", lay)
            for a in range(per):
                elems = [f"{raw}[g * {vec} + {a * (width // size) + e}]"
                         for e in range(width // size)]
                em.emit(_pack_store(p0, a * width, width, size, elems))
    with em.scope("else"):
        scalar_path()


def _asm_load(em, p0, off, width) -> list[str]:
    """One vector load (header.py: inline PTX the compiler can neither split nor merge);
    returns the C names of the 32-bit words (or the 16/8-bit value)."""
    addr = f"(const char*)({p0}) + {off}"
    if width < 4:
        t = em.fresh("ld")
        em.emit(f"{_VEC_TYPE[width]} {t} = *(const {_VEC_TYPE[width]}*)({addr});")
        return [t]
    k = width // 4
    ws = [em.fresh("ld") for _ in range(k)]
    em.emit(f"u32 {', '.join(ws)};")
    em.emit(f"nt_ld{k}({addr}, {', '.join(ws)});")
    return ws


def _pack_store(p0, off, width, size, elems):
    addr = f"(char*)({p0}) + {off}"
    if size == 8:
        words = []
        for e in elems:
            words += [f"(u32)({e})", f"(u32)(({e}) >> 32)"]
    elif size == 4:
        words = elems
    else:
        per = 4 // size
        words = []
        for w in range(max(1, len(elems) // per)):
            parts = [f"(({e}) << {8 * size * k})" if k else f"({e})"
                     for k, e in enumerate(elems[w * per:(w + 1) * per])]
            words.append("(" + " | ".join(parts) + ")")
    if width < 4:
        vt = _VEC_TYPE[width]
        return f"*({vt}*)({addr}) = ({vt})({words[0]});"
    ins = ", ".join(f"(u32)({w})" for w in words)
    return f"nt_st{width // 4}({addr}, {ins});"
