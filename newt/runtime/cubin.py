"""A kernel's resources read from its cubin (an ELF file), for when the ptxas log has none.

NVRTC puts ptxas's `-v` report into the program log, but not always: in a process where torch
has loaded its CUDA libraries, the same NVRTC has been seen to return an empty log. The cubin
carries the same facts in every case, so compile() never works blind:

- registers per thread: the EIATTR_REGCOUNT attribute of the module's `.nv.info` section;
- the per-thread stack frame (local memory, spills included): EIATTR_FRAME_SIZE;
- static shared memory: the size of the `.nv.shared.<kernel>` section, less the 1 KB that sm_90
  and later reserve at its start when the module has a `.nv.shared.reserved.*` section.

What the cubin does not say is how many of the frame's bytes are spills: a frame is reported as
local memory and the spill count stays 0 (callers treat local memory as the same warning).

    resources(cubin, name) -> dict(n_regs, n_spills, local_bytes, shared_bytes) or None
"""
from __future__ import annotations

import struct

_EIATTR_FRAME_SIZE = 0x11
_EIATTR_REGCOUNT = 0x2F
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_SHT_SYMTAB = 2
_STT_FUNC = 2
_RESERVED_SMEM = 1024          # sm_90+: the system's share at the start of a block's shared memory


def _sections(b: bytes):
    """name -> (type, offset, size, link) of every section of an ELF64 little-endian file, and
    the raw section headers (by index: symbol tables name their string table by index)."""
    if b[:4] != b"\x7fELF" or b[4] != 2:
        raise ValueError("not an ELF64 file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    raw = [struct.unpack_from("<IIQQQQI", b, shoff + i * shentsize) for i in range(shnum)]
    names = raw[shstrndx][4]

    def name(off):
        return b[names + off:b.index(b"\0", names + off)].decode()
    return {name(r[0]): (r[1], r[4], r[5], r[6]) for r in raw}, raw


def _symbol_index(b: bytes, secs, raw, name: str) -> int | None:
    for typ, off, size, link in secs.values():
        if typ != _SHT_SYMTAB:
            continue
        strtab = raw[link][4]
        for i in range(size // 24):
            st_name, st_info = struct.unpack_from("<IB", b, off + i * 24)
            sym = b[strtab + st_name:b.index(b"\0", strtab + st_name)].decode()
            if sym == name and st_info & 0xF == _STT_FUNC:
                return i
    return None


def _attributes(data: bytes):
    """(attribute, value bytes) of an `.nv.info` section: a run of (format, attribute, value)."""
    i = 0
    while i + 2 <= len(data):
        fmt, attr = data[i], data[i + 1]
        i += 2
        if fmt == _EIFMT_SVAL:
            n, = struct.unpack_from("<H", data, i)
            yield attr, data[i + 2:i + 2 + n]
            i += 2 + n
        elif fmt == _EIFMT_HVAL:
            yield attr, data[i:i + 2]
            i += 2
        elif fmt == _EIFMT_BVAL:
            yield attr, data[i:i + 1]
            i += 1
        elif fmt == _EIFMT_NVAL:
            yield attr, b""
        else:
            return                    # a format this reader does not know: stop, don't guess


def resources(cubin: bytes, name: str) -> dict | None:
    """Registers, local (stack frame) bytes and static shared bytes of entry function `name`;
    None when the cubin does not say (not an ELF file, no such function, no register count)."""
    try:
        secs, raw = _sections(cubin)
    except (ValueError, struct.error, IndexError):
        return None
    sym = _symbol_index(cubin, secs, raw, name)
    if sym is None or ".nv.info" not in secs:
        return None
    _, off, size, _ = secs[".nv.info"]
    regs = frame = None
    for attr, val in _attributes(cubin[off:off + size]):
        if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and len(val) == 8:
            who, n = struct.unpack("<II", val)
            if who != sym:
                continue
            if attr == _EIATTR_REGCOUNT:
                regs = n
            else:
                frame = n
    if regs is None:
        return None
    shared = secs.get(f".nv.shared.{name}", (0, 0, 0, 0))[2]
    if shared and any(s.startswith(".nv.shared.reserved.") for s in secs):
        shared = max(shared - _RESERVED_SMEM, 0)
    return dict(n_regs=regs, n_spills=0, local_bytes=frame or 0, shared_bytes=shared)
