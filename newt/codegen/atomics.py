"""Atomics: add, max, min, xchg, and, or, xor, cas on global memory, with masks, memory
semantics (relaxed, acquire, release, acq_rel) and scope (cta, gpu, sys).

Each (kind, dtype, sem, scope) becomes one small device function (emitted once per kernel)
around a PTX `atom` instruction. Where PTX has no instruction (float max/min, bf16 add before
sm_90) the function is a compare-and-swap loop with the same semantics. Every valid, unmasked
element performs exactly one atomic (layouts are never replicated). An atomic on a scalar
pointer is performed once per program, by thread 0, and its old value is broadcast through
the scratch arena. A block add whose old values are unused and whose groups the accesses pass
proved consecutive and aligned (op.attrs["red"]) is one vector `red` per group run instead,
bracketed by the fences its semantics need (newt/passes/accesses.py says why).
"""
from __future__ import annotations

from ..ir.core import is_block
from .emitter import handles, reg_type, storage_type

_SEM = {"relaxed": ".relaxed", "acquire": ".acquire", "release": ".release",
        "acq_rel": ".acq_rel", "": ".acq_rel"}
_SCOPE = {"gpu": ".gpu", "cta": ".cta", "sys": ".sys", "": ".gpu"}


def _ptx_type(kind, dt):
    """(PTX type, register constraint, C register type of the operand) or None."""
    b = dt.bits
    if kind in ("xchg", "and", "or", "xor", "cas"):
        if b in (32, 64):
            return f".b{b}", "r" if b == 32 else "l", "u32" if b == 32 else "u64"
        if b == 16 and kind == "cas":
            return ".b16", "h", "u16"
        return None
    if dt.is_floating():
        if kind != "add":
            return None
        return {"float32": (".f32", "f", "float"), "float64": (".f64", "d", "double"),
                "float16": (".noftz.f16", "h", "u16"),
                "bfloat16": (".noftz.bf16", "h", "u16")}[dt.name]
    if b not in (32, 64):
        return None
    if kind == "add":
        return f".u{b}", "r" if b == 32 else "l", "u32" if b == 32 else "u64"
    sign = "s" if dt.is_signed() else "u"
    return f".{sign}{b}", "r" if b == 32 else "l", ("i" if sign == "s" else "u") + str(b)


def _to_op(dt, ct, x):
    """Register value -> the atom operand's C type."""
    if dt.name == "float16":
        return f"nt_f2h({x})"
    if dt.name == "bfloat16":
        return f"nt_f2b({x})"
    if dt.name == "float32" and ct == "u32":
        return f"__float_as_uint({x})"
    if dt.name == "float64" and ct == "u64":
        return f"(u64)__double_as_longlong({x})"
    return f"({ct})({x})"


def _from_op(dt, ct, x):
    if dt.name == "float16":
        return f"nt_h2f({x})"
    if dt.name == "bfloat16":
        return f"nt_b2f({x})"
    if dt.name == "float32" and ct == "u32":
        return f"__uint_as_float({x})"
    if dt.name == "float64" and ct == "u64":
        return f"__longlong_as_double((i64){x})"
    return f"({reg_type(dt)})({x})"


def atomic_function(em, kind, dt, sem, scope) -> str:
    """Name of the device function doing one atomic; emits its definition on first use."""
    name = f"nt_atom_{kind}_{dt.short}_{(sem or 'acq_rel')}_{(scope or 'gpu')}"
    if name in em.helpers:
        return name
    rt, st = reg_type(dt), storage_type(dt)
    q = f"{_SEM[sem]}{_SCOPE[scope]}.global"
    native = _ptx_type(kind, dt)
    if dt.name == "bfloat16" and kind == "add" and em.options.sm < 90:
        native = None
    if kind == "cas":
        t, c, ct = native
        body = (f"  {ct} o; asm volatile(\"atom{q}.cas{t} %0, [%1], %2, %3;\" : \"={c}\"(o) : "
                f"\"l\"(p), \"{c}\"({_to_op(dt, ct, 'cmp')}), \"{c}\"({_to_op(dt, ct, 'v')}) : \"memory\");\n"
                f"  return {_from_op(dt, ct, 'o')};")
        em.helpers[name] = f"NT_INLINE {rt} {name}({st}* p, {rt} cmp, {rt} v) {{\n{body}\n}}"
        return name
    if native is not None:
        t, c, ct = native
        op = {"xchg": "exch"}.get(kind, kind)
        body = (f"  {ct} o; asm volatile(\"atom{q}.{op}{t} %0, [%1], %2;\" : \"={c}\"(o) : "
                f"\"l\"(p), \"{c}\"({_to_op(dt, ct, 'v')}) : \"memory\");\n"
                f"  return {_from_op(dt, ct, 'o')};")
    else:
        if dt.bits not in (16, 32, 64) or not (dt.is_floating() or kind in ("add", "max", "min")):
            raise em.error(None, f"atomic_{kind} is not supported for {dt.name}")
        cas = atomic_function(em, "cas", _bits_type(dt), sem, scope)
        bt = reg_type(_bits_type(dt))
        new = {"add": "x + v", "max": "(v > x ? v : x)", "min": "(v < x ? v : x)"}[kind]
        if dt.name in ("float16", "bfloat16") and kind == "add":
            new = f"{'nt_rh' if dt.name == 'float16' else 'nt_rb'}(x + v)"
        body = (f"  {bt}* q = ({bt}*)p; {bt} old = *(volatile {bt}*)q, seen;\n"
                f"  do {{ seen = old; {rt} x = {_from_bits(dt, 'seen')};\n"
                f"       old = {cas}(q, seen, {_to_bits(dt, new)}); }} while (old != seen);\n"
                f"  return {_from_bits(dt, 'old')};")
    em.helpers[name] = f"NT_INLINE {rt} {name}({st}* p, {rt} v) {{\n{body}\n}}"
    return name


def _bits_type(dt):
    from .. import dtypes as D
    return {16: D.uint16, 32: D.uint32, 64: D.uint64}[dt.bits]


def _from_bits(dt, x):
    from .memory import from_bits
    return from_bits(dt, x)


def _to_bits(dt, x):
    from .memory import to_bits
    return f"({reg_type(_bits_type(dt))})({to_bits(dt, x)})"


def red_function(em, red, dt, scope) -> str:
    """Name of the device function doing one vector reduction (Red `red`: red.n elements);
    emits its definition on first use."""
    name = f"nt_red_add_v{red.n}_{red.ptx}_{scope or 'gpu'}"
    if name in em.helpers:
        return name
    st = storage_type(dt)
    wide = red.ptx == "f32"
    c, ct = ("f", "float") if wide else ("h", "u16")
    ty = f".v{red.n}.f32" if wide else f".noftz.v{red.n}.{red.ptx}"
    regs = ", ".join(f"%{i + 1}" for i in range(red.n))
    args = ", ".join(f"{reg_type(dt)} v{i}" for i in range(red.n))
    ins = ", ".join(f'"{c}"({_to_op(dt, ct, f"v{i}")})' for i in range(red.n))
    em.helpers[name] = (
        f"NT_INLINE void {name}({st}* p, {args}) {{\n"
        f'  asm volatile("red.relaxed{_SCOPE[scope]}.global.add{ty} [%0], {{{regs}}};" '
        f':: "l"(p), {ins} : "memory");\n}}')
    return name


def fence_function(em, scope) -> str:
    """Name of the device function of one `fence.acq_rel` at `scope`."""
    name = f"nt_fence_acq_rel_{scope or 'gpu'}"
    if name not in em.helpers:
        em.helpers[name] = (f'NT_INLINE void {name}() {{ asm volatile("fence.acq_rel'
                            f'{_SCOPE[scope]};" ::: "memory"); }}')
    return name


def _vector_red(em, op, red, sem, scope):
    """op.attrs["red"]: per group of red.vec slots, red.vec / red.n vector reductions under the
    group's one mask bit, between the fences of the atomic's semantics."""
    from .memory import operand_at
    ptr, val, r = op.operands[0], op.operands[1], op.result
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    lay = r.attrs["layout"]
    f = red_function(em, red, r.dtype, scope)
    if sem in ("release", "acq_rel", ""):
        em.emit(f"{fence_function(em, scope)}();")
    with em.slots(lay.nslots // red.vec, "g"):
        first = f"g * {red.vec}"
        conds = [c for c in (lay.valid("tid", first),
                             mask is not None and operand_at(em, mask, first, lay)) if c]
        if conds:
            em.emit(f"if (!({' && '.join(conds)})) continue;")
        p0 = em.fresh("p")
        em.emit(f"{em.ctype(ptr)} {p0} = {operand_at(em, ptr, first, lay)};")
        for a in range(0, red.vec, red.n):
            vals = ", ".join(em.at(val, f"{first} + {a + e}", lay) for e in range(red.n))
            em.emit(f"{f}({p0} + {a}, {vals});" if a else f"{f}({p0}, {vals});")
    if sem in ("acquire", "acq_rel", ""):
        em.emit(f"{fence_function(em, scope)}();")


@handles("atomic")
def _atomic(em, op):
    kind, sem, scope = op.attrs["kind"], op.attrs.get("sem", "acq_rel"), op.attrs.get("scope", "gpu")
    ptr, r = op.operands[0], op.result
    red = op.attrs.get("red")
    if red is not None:
        _vector_red(em, op, red, sem, scope)
        return
    dt = r.dtype
    f = atomic_function(em, kind, dt, sem, scope)
    if kind == "cas":
        args = [op.operands[1], op.operands[2]]
        mask = None
    else:
        args = [op.operands[1]]
        mask = op.operands[2] if op.attrs.get("has_mask") else None
    if not is_block(ptr.type):
        n = em.declare(r, f"({em.ctype(r)})0")
        if op.attrs.get("sync_first"):
            em.barrier()
        buf = em.smem(op, em.ctype(r))
        call = f"{f}({em.name(ptr)}, {', '.join(em.name(a) for a in args)})"
        if mask is not None:
            call = f"{em.name(mask)} ? {call} : ({em.ctype(r)})0"
        em.emit(f"if (tid == 0) {buf}[0] = {call};")
        em.barrier()
        em.emit(f"{n} = {buf}[0];")
        return
    lay = r.attrs["layout"]
    n = em.declare(r)
    with em.slots(lay.nslots) as s:
        conds = [c for c in (lay.valid("tid", s), mask is not None and em.at(mask, s, lay)) if c]
        call = f"{f}({em.at(ptr, s, lay)}, {', '.join(em.at(a, s, lay) for a in args)})"
        if conds:
            em.emit(f"{n}[{s}] = {' && '.join(conds)} ? {call} : ({em.ctype(r)})0;")
        else:
            em.emit(f"{n}[{s}] = {call};")
