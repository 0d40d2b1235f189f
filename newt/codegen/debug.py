"""Device print (printf) and device assert (__assertfail, which traps with file/line/message).

print: scalars are printed once per program (by thread 0); blocks print one line per element,
from the thread that holds it, with the program id and the element's flat index, as Triton's
device_print does. assert: every thread checks the elements it holds (or the scalar); a false
element calls __assertfail with the user's message, file, line and function.
"""
from __future__ import annotations

from ..ir.core import is_block
from .emitter import handles


def c_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("?")
    return '"' + "".join(out) + '"'


def _fmt(dt, hex_):
    if dt.is_floating():
        return "%f", "(double)({})"
    if dt.bits == 64:
        return ("0x%016llx" if hex_ else ("%llu" if dt.kind == "uint" else "%lld")), "({})"
    if hex_:
        return "0x%08x", "(u32)({})"
    return ("%u" if dt.kind == "uint" else "%d"), "(int)({})"


@handles("print")
def _print(em, op):
    prefix, hex_ = op.attrs.get("prefix", ""), op.attrs.get("hex", False)
    vals = op.operands
    pid = "(int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z"
    blocks = [v for v in vals if is_block(v.type)]
    fmts = [_fmt(v.dtype, hex_) for v in vals]
    text = prefix.replace("%", "%%")
    if not blocks:
        fmt = c_string(f"pid (%d, %d, %d) {text}" + ", ".join(f for f, _ in fmts))[:-1] + '\\n"'
        args = ", ".join(conv.format(em.name(v)) for v, (_, conv) in zip(vals, fmts))
        em.emit(f"if (tid == 0) printf({fmt}, {pid}{', ' + args if args else ''});")
        return
    lay = blocks[0].attrs["layout"]
    fmt = c_string(f"pid (%d, %d, %d) idx (%d) {text}" + ", ".join(f for f, _ in fmts))[:-1] + '\\n"'
    with em.slots(lay.nslots) as s:
        args = ", ".join(conv.format(em.at(v, s, lay)) for v, (_, conv) in zip(vals, fmts))
        call = f"printf({fmt}, {pid}, (int){lay.flat('tid', s)}, {args});"
        v = lay.valid("tid", s)
        em.emit(f"if ({v}) {call}" if v else call)


@handles("assert")
def _assert(em, op):
    cond = op.operands[0]
    msg = c_string(op.attrs.get("msg", "assertion failed"))
    file = c_string(op.attrs.get("file", "") or "<kernel>")
    func = c_string(op.attrs.get("func", "") or em.fn.name)
    line = int(op.attrs.get("line", 0))
    fail = f"__assertfail({msg}, {file}, {line}, {func}, 1);"
    if not is_block(cond.type):
        em.emit(f"if (!({em.name(cond)})) {fail}")
        return
    lay = cond.attrs["layout"]
    with em.slots(lay.nslots) as s:
        v = lay.valid("tid", s)
        test = f"!{em.at(cond, s)}" + (f" && {v}" if v else "")
        em.emit(f"if ({test}) {fail}")
