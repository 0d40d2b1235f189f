"""inline_asm ops -> one `asm` statement per element, each value moved into the register kind
its constraint names and back (r: 32-bit, l: 64-bit, h: 16-bit, f: fp32, d: fp64).

Triton's `$0, $1..` operand references become CUDA's `%0, %1..` and a literal `%` becomes `%%`.
With `pack` > 1 one statement handles `pack` consecutive slots of a thread, each operand's
elements packed into one register (element j in bits j*b..), as Triton packs them.
fp16 / bf16 values (held in fp32 registers) travel as their 16-bit patterns in `r` and `h`
registers.
"""
from __future__ import annotations

import re

from .emitter import handles, reg_type

_REG = {"r": "u32", "l": "u64", "h": "u16", "f": "float", "d": "double"}


def to_reg(dt, letter: str, x: str) -> str:
    if letter in ("f", "d"):
        return f"({_REG[letter]})({x})"
    if dt.name == "float16":
        return f"({_REG[letter]})nt_f2h({x})"
    if dt.name == "bfloat16":
        return f"({_REG[letter]})nt_f2b({x})"
    if dt.name == "float32":
        return f"({_REG[letter]})__float_as_uint({x})"
    if dt.name == "float64":
        return f"({_REG[letter]})__double_as_longlong({x})"
    return f"({_REG[letter]})({x})"


def from_reg(dt, letter: str, r: str) -> str:
    if dt.is_bool():
        return f"({r} != 0)"
    if letter in ("f", "d") or not dt.is_floating():
        from .elementwise import round_to
        return round_to(dt, f"({reg_type(dt)})({r})") if dt.is_floating() else f"({reg_type(dt)})({r})"
    if dt.name == "float16":
        return f"nt_h2f((u16)({r}))"
    if dt.name == "bfloat16":
        return f"nt_b2f((u16)({r}))"
    if dt.name == "float32":
        return f"__uint_as_float((u32)({r}))"
    return f"__longlong_as_double((long long)({r}))"


def c_string(asm: str) -> str:
    s = re.sub(r"\$(\d+)", r"%\1", asm.replace("%", "%%"))
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@handles("inline_asm")
def _inline_asm(em, op):
    cons = op.attrs["constraints"]
    outs = [c.lstrip("=") for c in cons if c.startswith("=")]
    ins = [c for c in cons if not c.startswith("=")]
    rs = op.results
    P = op.attrs.get("pack", 1)
    vol = "" if op.attrs.get("pure") else " volatile"
    text = c_string(op.attrs["asm"])
    block = bool(rs[0].type.shape)
    lay = rs[0].attrs.get("layout")
    nslots = em.nslots(rs[0]) if block else 1

    def elem(a, s):
        return em.at(a, s, lay) if block else em.name(a)

    def packed(a, c, g):
        """The register of input `a` for the group of slots starting at `g`."""
        if P == 1:
            return to_reg(a.dtype, c, elem(a, g))
        b, mask = a.dtype.bits, f"0x{(1 << a.dtype.bits) - 1:x}u"
        parts = []
        for j in range(P):
            s = f"{g} + {j}"
            v = f"(({to_reg(a.dtype, 'r', elem(a, s))} & {mask}) << {j * b})"
            parts.append(f"({s} < {nslots} ? {v} : 0u)" if nslots % P else v)
        return f"({_REG[c]})({' | '.join(parts)})"

    def one(g):
        """Emit one asm statement for the slots g..g+P-1; returns [(slot, result, value)]."""
        tmps = [em.fresh("ao") for _ in rs]
        em.emit(" ".join(f"{_REG[c]} {t};" for t, c in zip(tmps, outs)))
        o = ", ".join(f'"={c}"({t})' for t, c in zip(tmps, outs))
        i = ", ".join(f'"{c}"({packed(a, c, g)})' for a, c in zip(op.operands, ins))
        em.emit(f"asm{vol}({text} : {o} : {i});")
        if P == 1:
            return [(g, k, from_reg(r.dtype, c, t)) for k, (r, c, t) in enumerate(zip(rs, outs, tmps))]
        got = []
        for k, (r, c, t) in enumerate(zip(rs, outs, tmps)):
            b = r.dtype.bits
            for j in range(P):
                bits = f"((u32)({t}) >> {j * b}) & 0x{(1 << b) - 1:x}u"
                got.append((f"{g} + {j}", k, from_reg(r.dtype, "r", bits)))
        return got

    if not block:
        vals = {}
        for s, k, v in one("0"):
            vals.setdefault(k, v)          # a scalar is element 0 of the pack
        for k, r in enumerate(rs):
            em.declare(r, vals[k])
        return
    names = [em.declare(r) for r in rs]
    groups = -(-nslots // P)
    with em.slots(groups, "g") as g:
        for s, k, v in one(f"{g} * {P}" if P > 1 else g):
            st = f"{names[k]}[{s}] = {v};"
            em.emit(f"if ({s} < {nslots}) {st}" if P > 1 and nslots % P else st)
