"""inline_asm ops -> one `asm` statement per element, each value moved into the register kind
its constraint names and back (r: 32-bit, l: 64-bit, h: 16-bit, f: fp32, d: fp64).

Triton's `$0, $1..` operand references become CUDA's `%0, %1..` and a literal `%` becomes `%%`.
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
    vol = "" if op.attrs.get("pure") else " volatile"
    text = c_string(op.attrs["asm"])
    block = bool(rs[0].type.shape)
    lay = rs[0].attrs.get("layout")
    names = [em.declare(r) for r in rs] if block else None

    def one(s):
        tmps = [em.fresh("ao") for _ in rs]
        em.emit(" ".join(f"{_REG[c]} {t};" for t, c in zip(tmps, outs)))
        o = ", ".join(f'"={c}"({t})' for t, c in zip(tmps, outs))
        i = ", ".join(f'"{c}"({to_reg(a.dtype, c, em.at(a, s, lay))})'
                      for a, c in zip(op.operands, ins))
        em.emit(f"asm{vol}({text} : {o} : {i});")
        return [from_reg(r.dtype, c, t) for r, c, t in zip(rs, outs, tmps)]

    if block:
        with em.slots(em.nslots(rs[0])) as s:
            for n, v in zip(names, one(s)):
                em.emit(f"{n}[{s}] = {v};")
    else:
        for r, v in zip(rs, one(None)):
            em.declare(r, v)
