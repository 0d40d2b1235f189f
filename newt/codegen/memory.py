"""Global memory: load and store of blocks and scalars.

Per group of `vec` slots (consecutive elements, layouts.py) the kernel checks at run time that
the group's pointers are consecutive, the first is aligned to the access width, and every mask
bit is set; a group that passes is one or more vector accesses (128-bit when the group holds
16 bytes), any other group takes the predicated scalar path, which reads nothing for masked-off
slots (they get `other`) and writes nothing. Invalid slots of a partial layout are never
accessed. Run facts from the layout pass (passes/runs.py) drop the tests that hold by
construction (pointers from arange are consecutive; `offs < n` over a run is one test of its
last element), so what remains is a few integer ops in front of an access that costs hundreds
of cycles. When the facts prove a group aligned and under one mask bit (pointers and sizes
specialized as divisible by 16, as Triton does), the group can be one predicated vector access
with no test and no scalar path. Which of the two forms an access takes, and whether its
groups address from one base plus immediate offsets, is passes/accesses.py's decision (the
op's `access` attribute); this file follows it.

Register pressure is the constraint here: pointer and mask blocks are evaluated per group from
their index math (operand_at) rather than read from per-element arrays, and loaded elements
narrower than 32 bits stay packed in 32-bit words until they are used.

fp16/bf16 are 16-bit in memory and fp32 in registers; bool is one byte.
"""
from __future__ import annotations

from ..ir.core import is_block
from .emitter import handles, reg_type, storage_type

_VEC_TYPE = {4: "u32", 2: "u16", 1: "u8"}
# Floats narrower than their fp32 register form: (fp32 -> storage bits, storage bits -> fp32,
# round an fp32 to the format), the helpers of codegen/header.py
NARROW = {"float16": ("nt_f2h", "nt_h2f", "nt_rh"), "bfloat16": ("nt_f2b", "nt_b2f", "nt_rb"),
          "float8e4nv": ("nt_f_e4m3", "nt_e4m3_f", "nt_r8e4"),
          "float8e5": ("nt_f_e5m2", "nt_e5m2_f", "nt_r8e5")}


def from_bits(dt, bits: str) -> str:
    """Register value of `dt` from its storage bits (an unsigned integer expression)."""
    n = dt.name
    if n == "float32":
        return f"__uint_as_float((u32)({bits}))"
    if n == "float64":
        return f"__longlong_as_double((i64)({bits}))"
    if n in NARROW:
        return f"{NARROW[n][1]}(({storage_type(dt)})({bits}))"
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
    if n in NARROW:
        return f"(u32){NARROW[n][0]}({x})"
    ut = {1: "u8", 8: "u8", 16: "u16", 32: "u32", 64: "u64"}[dt.bits]
    return f"({'u64' if dt.bits == 64 else 'u32'})({ut})({x})"


def bits_of(dt) -> int:
    return max(8, dt.bits)


def utype(bits) -> str:
    return {8: "u16", 16: "u16", 32: "u32", 64: "u64"}[bits]


def load_conv(dt, x: str) -> str:
    """Register value from an element read through a storage-typed pointer."""
    if dt.name in NARROW:
        return f"{NARROW[dt.name][1]}({x})"
    if dt.is_bool():
        return f"({x} != 0)"
    return x


def store_conv(dt, x: str) -> str:
    if dt.name in NARROW:
        return f"({storage_type(dt)}){NARROW[dt.name][0]}({x})"
    if dt.is_bool():
        return f"(u8)({x})"
    return x


def _plan(op):
    """The access form passes/accesses.py chose (an Access), or None for scalar-only access."""
    acc = op.attrs["access"]
    return None if acc == "scalar" else acc


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


# ----------------------------------------------------------------------------- operands
# Pointer and mask blocks are usually index-computable (pointer math over aranges): their ops
# materialize per-slot arrays (64-bit pointers, one bool per element) that would stay alive
# across the vectorization test and both access paths. Memory ops evaluate such operands from
# their index math where they are used instead (shapes.value_at), so nothing reads the arrays
# and NVRTC drops them; what NVRTC still shares between uses (a row offset, a column test) is
# one value per group, not one per element.

_RECOMPUTE_LIMIT = 48     # ops in the expanded expression: beyond it, read the array


def _cost(v, memo) -> int:
    """Ops in the expression value_at expands for v (shared operands count once per use)."""
    if not is_block(v.type):
        return 0
    got = memo.get(v.id)
    if got is None:
        op = v.owner
        if op.opcode in ("arange", "splat"):
            got = 1
        else:
            got = 1 + sum(_cost(o, memo) for o in op.operands)
            got = min(got, 1 << 20)
        memo[v.id] = got
    return got


def recomputable(em, v) -> bool:
    """Evaluate block operand v at each use from its index math (see above)."""
    if not (is_block(v.type) and v.attrs.get("icomp")) or v.id in em.inline:
        return False
    memo = em.__dict__.setdefault("_recompute_cost", {})
    return _cost(v, memo) <= _RECOMPUTE_LIMIT


def operand_at(em, v, s, lay) -> str:
    """C expression of operand v at slot s of layout lay, recomputed where that is cheap."""
    if recomputable(em, v):
        from ..ir.layouts import coords_of
        from .shapes import value_at
        return value_at(em, v, coords_of(lay.flat("tid", s), v.shape))
    return em.at(v, s, lay)


def _slot(first: str, j: int) -> str:
    return f"{first} + {j}" if j else first


def mask_all(em, mask, lay, first: str, vec: int) -> list[str]:
    """C conditions that together say every mask bit of a group is set. Run lengths from the
    layout pass (const / prefix / suffix) shrink `offs < n` with contiguous offs to one test of
    the group's last slot; `and` splits into the tests of its operands."""
    at = lambda j: operand_at(em, mask, _slot(first, j), lay)  # noqa: E731
    if mask.attrs.get("const", 1) >= vec:
        return [at(0)]
    if mask.attrs.get("prefix", 1) >= vec:
        return [at(vec - 1)]
    if mask.attrs.get("suffix", 1) >= vec:
        return [at(0)]
    op = mask.owner
    if getattr(op, "opcode", None) == "binary" and mask.attrs.get("icomp"):
        k = op.attrs["op"]
        a, b = op.operands
        if k == "and" and is_block(a.type) and is_block(b.type):
            return mask_all(em, a, lay, first, vec) + mask_all(em, b, lay, first, vec)
        if k in ("lt", "le", "gt", "ge"):
            inc_a = a.attrs.get("contig", 1) >= vec and b.attrs.get("const", 1) >= vec
            inc_b = b.attrs.get("contig", 1) >= vec and a.attrs.get("const", 1) >= vec
            if inc_a or inc_b:
                last = (k in ("lt", "le")) == inc_a
                return [at(vec - 1 if last else 0)]
    return [at(j) for j in range(vec)]


def _group_conds(em, lay, ptr, mask, vec, width, first, p0) -> list[str]:
    """C conditions under which the group starting at slot `first` is one vector access."""
    conds = [f"((u64)({p0}) & {width - 1}) == 0"]
    if ptr.attrs.get("contig", 1) < vec:    # not contiguous by construction: test it
        for j in range(1, vec):
            conds.append(f"{operand_at(em, ptr, _slot(first, j), lay)} == {p0} + {j}")
    if mask is not None:
        conds += mask_all(em, mask, lay, first, vec)
    return conds


def _access(em, lay, ptr, mask, plan, vector, scalar, masked_off=None, vector_if=None):
    """Emit a block access: per group of `vec` slots, `vector(first, p0)` when the group's
    test passes, else `scalar(first, j, pointer, condition)` for each of its slots (predicated).
    A group known statically to pass but for its (one) mask bit runs `vector` under that bit
    and `masked_off(first)` (a load's `other`) without it, or, given `vector_if`, makes it
    `vector_if(first, p0, bit)`: one access predicated on the bit (a store).

    Each group decides for itself, so a group's pointer and mask test are computed once, used
    by the path it takes and dead afterwards (one test over all groups kept every group's
    64-bit pointer alive across both paths). A group contiguous by construction addresses its
    slots from the first one's pointer."""
    vec, width = plan.vec, plan.width
    contig = ptr.attrs.get("contig", 1) >= vec
    static = plan.groups == "static"
    ct = em.ctype(ptr)
    group_ptr = lambda first: operand_at(em, ptr, first, lay)  # noqa: E731
    if plan.addr == "offsets":
        # contiguous over the whole block: every group's pointer is the first one's plus a
        # constant, which the memory instruction takes as an immediate offset
        base = em.fresh("pb")
        em.emit(f"{ct} const {base} = {operand_at(em, ptr, 0, lay)};")
        lv, T = lay.vec, lay.num_threads
        group_ptr = lambda first: (  # noqa: E731
            f"{base} + ((({first}) / {lv}) * {T * lv} + ({first}) % {lv})")

    with em.slots(lay.nslots // vec, "g"):
        first = f"g * {vec}"
        v = lay.valid("tid", first)
        if v:
            em.emit(f"if (!{v}) continue;")
        p0 = em.fresh("p")
        em.emit(f"{ct} {p0} = {group_ptr(first)};")
        if static:
            if mask is None:
                vector(first, p0)
                return
            if vector_if is not None:
                vector_if(first, p0, operand_at(em, mask, first, lay))
                return
            with em.scope(f"if ({operand_at(em, mask, first, lay)})"):
                vector(first, p0)
            if masked_off is not None:
                with em.scope("else"):
                    masked_off(first)
            return
        conds = _group_conds(em, lay, ptr, mask, vec, width, first, p0)
        with em.scope(f"if ({' & '.join(f'({c})' for c in conds)})"):   # &: one branch
            vector(first, p0)
        with em.scope("else"):
            for j in range(vec):
                sl = _slot(first, j)
                p = (f"{p0} + {j}" if j else p0) if contig else operand_at(em, ptr, sl, lay)
                cs = [c for c in (lay.valid("tid", sl),
                                  mask is not None and operand_at(em, mask, sl, lay)) if c]
                scalar(first, j, p, " && ".join(cs) or "true")


def _scalar_only(em, lay, ptr, mask, scalar):
    with em.slots(lay.nslots) as s:
        conds = [c for c in (lay.valid("tid", s),
                             mask is not None and operand_at(em, mask, s, lay)) if c]
        scalar(s, 0, operand_at(em, ptr, s, lay), " && ".join(conds) or "true")


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
    plan = _plan(op)
    if plan is None:                       # plain (volatile or single-element) accesses
        n = em.declare(r)
        with em.slots(lay.nslots) as s:
            conds = [c for c in (lay.valid("tid", s),
                                 mask is not None and operand_at(em, mask, s, lay)) if c]
            alt = operand_at(em, other, s, lay) if other is not None else f"({em.ctype(r)})0"
            read = load_conv(dt, f"*({vol}const {st}*)({operand_at(em, ptr, s, lay)})")
            em.emit(f"{n}[{s}] = {' && '.join(conds)} ? {read} : {alt};" if conds
                    else f"{n}[{s}] = {read};")
        return
    # Both paths fill raw storage bits. Elements narrower than 32 bits are packed into 32-bit
    # words (4 bools or 2 halves a register: that is what stays alive until the value is used),
    # and the conversion to the register type happens where the value is used (Emitter.lazy).
    vec, width, per = plan.vec, plan.width, plan.per
    size = max(1, dt.bits // 8)
    b = bits_of(dt)
    ut = utype(b)
    pw = 4 // size if size < 4 and vec * size >= 4 else 1     # elements per raw word
    wt = "u32" if pw > 1 else ut
    raw = em.fresh("raw")
    em.emit(f"{wt} {raw}[{-(-lay.nslots // pw)}];")
    if other is not None and other.id in em.inline:
        ob = em.fresh("other")
        em.emit(f"const {ut} {ob} = ({ut})({to_bits(dt, em.at(other, 0, lay))});")
        other_bits = lambda s: ob  # noqa: E731
    elif other is not None:
        other_bits = lambda s: f"({ut})({to_bits(dt, operand_at(em, other, s, lay))})"  # noqa: E731
    else:
        other_bits = lambda s: "0"  # noqa: E731

    def vector(first, p0):
        for a in range(per):
            words = _asm_load(em, p0, a * width, width)
            if pw > 1:      # the group is whole words: keep them as loaded
                for k, w in enumerate(words):
                    em.emit(f"{raw}[({first}) / {pw} + {a * (width // 4) + k}] = {w};")
                continue
            for e in range(width // size):
                bits = _element_bits(words, size, e)
                em.emit(f"{raw}[{_slot(first, a * (width // size) + e)}] = ({ut})({bits});")

    def scalar(first, j, p, c):
        sl = _slot(first, j)
        e = f"nt_ldp{b}({p}, {c}, {other_bits(sl)})"
        if pw == 1:
            em.emit(f"{raw}[{sl}] = {e};")
        else:
            w, k = f"({first}) / {pw} + {j // pw}", j % pw
            em.emit(f"{raw}[{w}] {'|' if k else ''}= (u32){e}{f' << {8 * size * k}' if k else ''};")

    def masked_off(first):
        for j in range(vec):
            sl = _slot(first, j)
            if pw == 1:
                em.emit(f"{raw}[{sl}] = {other_bits(sl)};")
            else:
                w, k = f"({first}) / {pw} + {j // pw}", j % pw
                e = f"(u32){other_bits(sl)}"
                em.emit(f"{raw}[{w}] {'|' if k else ''}= {e}{f' << {8 * size * k}' if k else ''};")

    _access(em, lay, ptr, mask, plan, vector, scalar, masked_off)
    if pw > 1:
        mask_bits = (1 << (8 * size)) - 1

        def bits_at(s):
            if isinstance(s, int):
                sh = 8 * size * (s % pw)
                return f"(({raw}[{s // pw}] >> {sh}) & {mask_bits}u)"
            return f"(({raw}[({s}) / {pw}] >> ({8 * size} * (({s}) % {pw}))) & {mask_bits}u)"
    else:
        bits_at = lambda s: f"{raw}[{s}]"  # noqa: E731
    if any(u.opcode.startswith("dot") for u in em.users(r)):
        em.elementwise(op, lambda s: from_bits(dt, bits_at(s)))
    else:
        em.lazy[r.id] = lambda s: from_bits(dt, bits_at(s))


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
    plan = _plan(op)
    b = bits_of(dt)
    ut = utype(b)
    raw = em.fresh("raw")                  # storage bits, converted once for both paths
    em.emit(f"{ut} {raw}[{lay.nslots}];")
    src = _narrowed_from(val, lay)
    with em.slots(lay.nslots) as s:
        bits = (to_bits(dt, operand_at(em, src, s, lay)) if src is not None
                else to_bits(dt, operand_at(em, val, s, lay)))
        em.emit(f"{raw}[{s}] = ({ut})({bits});")

    def scalar(first, j, p, c):
        em.emit(f"nt_stp{b}({p}, {c}, {raw}[{_slot(first, j)}]);")

    if plan is None:
        _scalar_only(em, lay, ptr, mask, scalar)
        return
    vec, width, per = plan.vec, plan.width, plan.per
    size = max(1, dt.bits // 8)

    def vector(first, p0, cond=None):
        for a in range(per):
            elems = [f"{raw}[{_slot(first, a * (width // size) + e)}]"
                     for e in range(width // size)]
            em.emit(pack_store(p0, a * width, width, size, elems, cond))

    _access(em, lay, ptr, mask, plan, vector, scalar,
            vector_if=vector if width >= 4 else None)


def _narrowed_from(val, lay):
    """The fp32 block that `val` is a round-to-nearest cast of, when `val` is an fp16 / bf16 /
    fp8 block in the same layout: the store converts that block to storage bits directly.
    Rounding is idempotent, so cvt(fp32 -> fp16) of the rounded value is the same bits, but
    going through the register form (round, widen, round again: inline PTX the compiler
    cannot fold) costs three conversions per element where one is enough."""
    op = val.owner
    if (getattr(op, "opcode", None) != "cast" or op.attrs.get("bitcast")
            or val.dtype.name not in NARROW):
        return None
    x = op.operands[0]
    if x.dtype.name != "float32" or not is_block(x.type) or x.attrs.get("layout") != lay:
        return None
    return x


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


def pack_store(p0, off, width, size, elems, cond=None):
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
    if cond is not None:                  # predicated on one mask bit (header.py: nt_st4p)
        return f"nt_st{width // 4}p({addr}, {cond}, {ins});"
    return f"nt_st{width // 4}({addr}, {ins});"
