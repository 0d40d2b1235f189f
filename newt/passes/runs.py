"""Run facts: what the layout pass (layout.py) records about index-computable blocks so that
the memory codegen (codegen/memory.py) can drop run-time tests that hold by construction.

Consumes IR with layouts and `icomp` marks; sets on block values (shown by the printer):
  contig   int / pointer blocks: the length of aligned runs of the flat index over which the
           value grows by exactly 1 (pointers: by one element)
  const    the length of aligned runs over which the value stays the same
  div      int / pointer blocks: a power of two dividing the value at the start of each
           contiguous run (pointers: the byte alignment), from params specialized as divisible
           by 16 (as Triton does), constants and products
  prefix   bool blocks: runs over which the value is true on a prefix (`offs < n` with offs
  suffix   contiguous) / a suffix, so one element tells whether the whole run is true
All lengths are powers of two. `x < n` with x contiguous from a multiple of L and n divisible
by L is constant over runs of L: with aligned pointers that makes a masked group one
predicated vector access.
"""
from __future__ import annotations

from ..ir.core import Op, is_block


def _run_lengths(op):
    """(contig, const) of a block result: the length of aligned runs of the flat index over
    which the value increases by exactly 1 per element / stays constant (powers of two). The
    memory codegen uses them to drop run-time tests that hold by construction."""
    c, r = op.opcode, op.results[0]
    info = [(o.attrs.get("contig", 1), o.attrs.get("const", 1)) if is_block(o.type)
            else (1, 1 << 30) for o in op.operands]
    if c == "arange":
        return r.type.numel, 1
    if c == "splat":
        return 1, r.type.numel
    if c in ("reshape", "convert_layout"):
        return info[0]
    if c == "broadcast":
        src, dst = op.operands[0].shape, r.shape
        if src[-1] == 1 and dst[-1] > 1:
            return 1, dst[-1]
        return min(info[0][0], dst[-1]), min(info[0][1], dst[-1])
    if c == "permute" or not info:
        return 1, 1
    const = min(k for _, k in info)
    if c == "binary" and op.attrs["op"] in ("add", "sub"):
        (ca, ka), (cb, kb) = info
        contig = min(ca, kb) if op.attrs["op"] == "sub" else max(min(ca, kb), min(cb, ka))
        return contig, const
    if c == "addptr":
        (cp, kp), (co, ko) = info
        return max(min(co, kp), min(cp, ko)), const
    if c == "cast" and r.dtype.is_int() and op.operands[0].dtype.is_int():
        return info[0]
    return 1, const


_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _bool_runs(op, const):
    """(const, prefix, suffix) of a bool block result: the length of aligned runs of the flat index
    over which the value is true on a prefix / a suffix of the run (so the whole run is true
    iff its last / first element is). `x < b` with x increasing and b constant over a run is
    a prefix; `and`, `or` keep the shorter run, `not` swaps the two; a constant is both."""
    c, r = op.opcode, op.results[0]
    info = [(o.attrs.get("prefix", 1), o.attrs.get("suffix", 1), o.attrs.get("const", 1))
            if is_block(o.type) else (1 << 30, 1 << 30, 1 << 30) for o in op.operands]
    pre, suf = 1, 1
    if c in ("reshape", "convert_layout") and info:
        pre, suf = info[0][:2]
    elif c == "broadcast":
        src, dst = op.operands[0].shape, r.shape
        if not (src[-1] == 1 and dst[-1] > 1):
            pre, suf = min(info[0][0], dst[-1]), min(info[0][1], dst[-1])
    elif c == "binary" and op.attrs["op"] in _FLIP:
        k = op.attrs["op"]
        a, b = op.operands
        ca = a.attrs.get("contig", 1) if is_block(a.type) else 1
        cb = b.attrs.get("contig", 1) if is_block(b.type) else 1
        ka, kb = info[0][2], info[1][2]
        up = min(ca, kb) if ca > 1 else 1      # a increases, b constant
        down = min(cb, ka) if cb > 1 else 1    # b increases, a constant: flip the compare
        # a run of L that starts at a multiple of L, against a multiple of L: `x < b` (and
        # `x >= b`) is the same for the whole run (Triton's constancy from divisibility)
        if up > 1 and k in ("lt", "ge"):
            const = max(const, _pow2_floor(min(up, _div_at(a, up), _div_at(b, 1))))
        if down > 1 and k in ("gt", "le"):
            const = max(const, _pow2_floor(min(down, _div_at(b, down), _div_at(a, 1))))
        if down > up:
            k, up = _FLIP[k], down
        if up > 1:
            if k in ("lt", "le"):
                pre = up
            else:
                suf = up
    elif c == "binary" and op.attrs["op"] in ("and", "or") and r.dtype.is_bool():
        (pa, sa, ka), (pb, sb, kb) = info
        pre = min(max(pa, ka), max(pb, kb))
        suf = min(max(sa, ka), max(sb, kb))
    elif c == "unary" and op.attrs["op"] in ("not", "invert") and r.dtype.is_bool():
        suf, pre = info[0][:2]
    return const, max(pre, const), max(suf, const)


_DIV_CAP = 1 << 12


def _pow2_div(n) -> int:
    n = abs(int(n))
    return _DIV_CAP if n == 0 else min(_DIV_CAP, n & -n)


def _scalar_div(v) -> int:
    """The largest power of two known to divide scalar v (a pointer: its byte alignment):
    16 for params specialized as divisible by 16 (as Triton does), constants, and products /
    sums / shifts of those."""
    if v.attrs.get("divisible_by_16"):
        return 16
    op = v.owner
    if not isinstance(op, Op) or not (v.dtype.is_int() or v.dtype.is_ptr()) or v.dtype.is_bool():
        return 1
    c = op.opcode
    if c == "constant":
        return _pow2_div(op.attrs["value"]) if isinstance(op.attrs.get("value"), int) else 1
    if c == "cast" and op.operands[0].dtype.is_int() and not op.attrs.get("bitcast"):
        return _scalar_div(op.operands[0])
    if c == "binary":
        k = op.attrs["op"]
        a, b = op.operands
        if k in ("add", "sub"):
            return min(_scalar_div(a), _scalar_div(b))
        if k == "mul":
            return min(_DIV_CAP, _scalar_div(a) * _scalar_div(b))
        if k == "shl" and b.owner is not None and getattr(b.owner, "opcode", "") == "constant":
            return min(_DIV_CAP, _scalar_div(a) << int(b.owner.attrs["value"]))
    if c == "addptr":
        p, off = op.operands
        return min(_scalar_div(p), _scalar_div(off) * max(1, p.dtype.element_ty.bits // 8))
    return 1


def _div_at(v, runs: int) -> int:
    """Divisibility of v's elements at flat indices that are multiples of `runs` (a power of
    two): a value's `div` holds at the starts of its own contiguous runs; inside a run it
    grows by 1 per element (a pointer: by its element size)."""
    if not is_block(v.type):
        return _scalar_div(v)
    d, c = v.attrs.get("div", 1), v.attrs.get("contig", 1)
    if c <= runs:
        return d
    step = max(1, v.dtype.element_ty.bits // 8) if v.dtype.is_ptr() else 1
    return min(d, runs * step)


def _divisibility(op, contig: int) -> int:
    """attrs div of an int / pointer block result with run length `contig`: the power of two
    dividing its elements at the start of each run (pointers: the byte alignment). With the
    run lengths it tells the memory codegen that a group is aligned, and a compare like
    `offs < n` with n divisible by 16 that a mask is constant over a group, without a test."""
    c, r = op.opcode, op.results[0]
    ops = op.operands
    if c == "arange":
        return _pow2_div(op.attrs["start"])
    if c == "splat":
        return _scalar_div(ops[0])
    if c in ("reshape", "convert_layout"):
        return _div_at(ops[0], contig)
    if c == "broadcast":
        src, dst = ops[0].shape, r.shape
        if src[-1] == 1 and dst[-1] > 1:
            return _div_at(ops[0], 1)
        return _div_at(ops[0], contig)
    if c == "permute":
        return _div_at(ops[0], 1)
    if c == "cast" and ops[0].dtype.is_int() and not op.attrs.get("bitcast"):
        return _div_at(ops[0], contig)
    if c == "binary":
        k = op.attrs["op"]
        if k in ("add", "sub"):
            return min(_div_at(ops[0], contig), _div_at(ops[1], contig))
        if k == "mul":
            return min(_DIV_CAP, _div_at(ops[0], 1) * _div_at(ops[1], 1))
    if c == "addptr":
        size = max(1, r.dtype.element_ty.bits // 8)
        return min(_div_at(ops[0], contig), _div_at(ops[1], contig) * size)
    return 1


def mark_runs(fn):
    """Attach the run facts (see the module docstring) to every index-computable block."""
    for op in fn.walk():
        for r in op.results[:1]:
            if is_block(r.type) and r.dtype.is_bool() and r.attrs.get("icomp"):
                const, pre, suf = _bool_runs(op, _run_lengths(op)[1])
                for k, n in (("const", const), ("prefix", pre), ("suffix", suf)):
                    n = min(n, r.type.numel)
                    if n > 1 and (k == "const" or n > min(const, r.type.numel)):
                        r.attrs[k] = n
            elif is_block(r.type) and (r.dtype.is_int() or r.dtype.is_ptr()):
                contig, const = _run_lengths(op) if r.attrs.get("icomp") else (1, 1)
                hint = r.attrs.get("max_contiguous")   # nl.max_contiguous: trusted, as in Triton
                if isinstance(hint, int) and hint & (hint - 1) == 0:
                    contig = max(contig, hint)
                contig, const = min(contig, r.type.numel), min(const, r.type.numel)
                if contig > 1:
                    r.attrs["contig"] = contig
                if const > 1:
                    r.attrs["const"] = const
                div = _divisibility(op, contig) if r.attrs.get("icomp") else 1
                if div > 1:
                    r.attrs["div"] = div
