"""NVRTC through ctypes: CUDA C++ source -> PTX + cubin + ptxas report.

Sits between codegen (which produces the CUDA C++ text) and the driver (which loads the cubin).
Needs no GPU: CI compiles every kernel here for sm_80 and sm_90a.

    compile_cuda(source, name, arch, options=()) -> NVRTCResult(.ptx, .cubin, .log)
    parse_ptxas_report(log) -> dict(n_regs, n_spills, local_bytes, shared_bytes)
    NVRTCResult.report: the same dict, from the cubin when the log has none (runtime/cubin.py)
    version() -> "13.0"

The library is found by itself (pip wheel folders, torch's lib folder, CUDA_HOME/CUDA_PATH, the
loader path); when nothing loads, the error lists every place tried. Every prototype is declared:
an undeclared ctypes prototype truncates pointers to int and crashes.
"""
from __future__ import annotations

import ctypes
import glob
import os
import re
import sys
import threading

from ..errors import NVRTCError

_SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
# Options every newt compile uses. No --use_fast_math: IEEE semantics by default; codegen picks
# fast intrinsics (__expf, ...) explicitly where the language allows it.
# 177 ("declared but never referenced"): the helper prelude is emitted whole, on purpose.
DEFAULT_OPTIONS = ("-std=c++17", "-default-device", "--ptxas-options=-v", "--diag-suppress=177")

_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    """Folders that may hold libnvrtc, most specific first, each once. A generator: the cache
    key's fingerprint() stops at the first folder that holds the library (on a warm-cache first
    call, before the torch lookup and the glob of _places)."""
    seen: set = set()
    for d in map(os.path.normpath, _places()):
        if d not in seen:
            seen.add(d)
            yield d


def _places():
    """Where libnvrtc may be, in _candidates' order, repeats included."""
    for p in sys.path:
        if p and os.path.isdir(os.path.join(p, "nvidia")):
            for sub in ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib"):
                yield os.path.join(p, "nvidia", sub)
    try:  # torch's own lib folder (some builds bundle nvrtc there); find it without importing
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec and spec.submodule_search_locations:
            yield os.path.join(list(spec.submodule_search_locations)[0], "lib")
    except (ImportError, ValueError):
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            yield from (os.path.join(root, "lib64"), os.path.join(root, "lib"),
                        os.path.join(root, "targets", "x86_64-linux", "lib"),
                        os.path.join(root, "targets", "sbsa-linux", "lib"))
    for root in sorted(glob.glob("/usr/local/cuda*"), reverse=True):
        yield from (os.path.join(root, "lib64"),
                    os.path.join(root, "targets", "x86_64-linux", "lib"))


def _candidate_dirs() -> list[str]:
    """Every folder that may hold libnvrtc, most specific first (load() tries them all)."""
    return list(_candidates())


def _load_from_dir(d: str, tried: list[str]):
    for soname in _SONAMES:
        path = os.path.join(d, soname)
        if not os.path.exists(path):
            continue
        # The builtins library sits beside libnvrtc; load it globally first so that libnvrtc's
        # dlopen of it succeeds even when its folder is not on the loader path.
        for b in sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so*"))):
            if ".alt." in b:
                continue
            try:
                ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError:
                pass
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    tried.append(f"{d} (no libnvrtc)")
    return None, None


def _declare(lib):
    c_int, c_char_p = ctypes.c_int, ctypes.c_char_p
    c_size_t, c_void_p = ctypes.c_size_t, ctypes.c_void_p
    P = ctypes.POINTER
    protos = {
        "nvrtcGetErrorString": (c_char_p, [c_int]),
        "nvrtcVersion": (c_int, [P(c_int), P(c_int)]),
        "nvrtcGetNumSupportedArchs": (c_int, [P(c_int)]),
        "nvrtcGetSupportedArchs": (c_int, [P(c_int)]),
        "nvrtcCreateProgram": (c_int, [P(c_void_p), c_char_p, c_char_p, c_int,
                                       P(c_char_p), P(c_char_p)]),
        "nvrtcDestroyProgram": (c_int, [P(c_void_p)]),
        "nvrtcCompileProgram": (c_int, [c_void_p, c_int, P(c_char_p)]),
        "nvrtcGetPTXSize": (c_int, [c_void_p, P(c_size_t)]),
        "nvrtcGetPTX": (c_int, [c_void_p, c_char_p]),
        "nvrtcGetCUBINSize": (c_int, [c_void_p, P(c_size_t)]),
        "nvrtcGetCUBIN": (c_int, [c_void_p, c_char_p]),
        "nvrtcGetProgramLogSize": (c_int, [c_void_p, P(c_size_t)]),
        "nvrtcGetProgramLog": (c_int, [c_void_p, c_char_p]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def load():
    """The NVRTC library (loaded once). Raises NVRTCError naming every place tried."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried: list[str] = []
        lib = path = None
        for d in _candidate_dirs():
            if os.path.isdir(d):
                lib, path = _load_from_dir(d, tried)
                if lib is not None:
                    break
            else:
                tried.append(f"{d} (missing)")
        if lib is None:  # the loader path (LD_LIBRARY_PATH, ldconfig)
            for soname in _SONAMES:
                try:
                    lib, path = ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL), soname
                    break
                except OSError as e:
                    tried.append(f"loader path: {soname} ({e})")
        if lib is None:
            raise NVRTCError(
                "could not load NVRTC. Install it with `pip install nvidia-cuda-nvrtc==13.0.88` or "
                "set CUDA_HOME to a CUDA toolkit. Places tried:\n  " + "\n  ".join(tried))
        _declare(lib)
        _lib, _lib_path = lib, path
        return lib


_include_dir = False


def cuda_include_dir():
    """A folder holding cuda_fp16.h / cuda_bf16.h, or None. NVRTC 13.0 has no builtin copy of
    these headers, and the pip wheel ships none: with only the wheel (CI), generated code must not
    include them. When a toolkit is present its include folder is passed with -I."""
    global _include_dir
    if _include_dir is not False:
        return _include_dir
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    roots += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    cands = []
    for p in sys.path:
        if p and os.path.isdir(os.path.join(p, "nvidia")):
            cands += [os.path.join(p, "nvidia", s)
                      for s in ("cu13/include", "cuda_runtime/include")]
    for r in filter(None, roots):
        cands += [os.path.join(r, "include"), os.path.join(r, "targets", "x86_64-linux", "include")]
    _include_dir = next((c for c in cands if os.path.exists(os.path.join(c, "cuda_fp16.h"))), None)
    return _include_dir


_fingerprint = None


def fingerprint() -> str:
    """Which NVRTC would be loaded, as path:size:mtime, found without loading it (dlopen of the
    100 MB library costs ~10 ms, too much for a warm-cache first call). Part of cache keys."""
    global _fingerprint
    if _fingerprint is None:
        if _lib_path is not None and os.path.isabs(_lib_path):
            paths = [_lib_path]
        else:
            paths = (os.path.join(d, s) for d in _candidates() for s in _SONAMES)
        _fingerprint = "loader-path"
        for p in paths:
            try:
                st = os.stat(p)
            except OSError:
                continue
            _fingerprint = f"{os.path.realpath(p)}:{st.st_size}:{st.st_mtime_ns}"
            break
    return _fingerprint


def library_path() -> str:
    load()
    return _lib_path


def _check(lib, res: int, what: str):
    if res != 0:
        msg = lib.nvrtcGetErrorString(res)
        raise NVRTCError(f"{what} failed: {msg.decode() if msg else res}")


_version = None


def version() -> str:
    """NVRTC version as "major.minor" (part of every cache key)."""
    global _version
    if _version is None:
        lib = load()
        major, minor = ctypes.c_int(), ctypes.c_int()
        _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        _version = f"{major.value}.{minor.value}"
    return _version


def supported_archs() -> list[int]:
    lib = load()
    n = ctypes.c_int()
    _check(lib, lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    arr = (ctypes.c_int * n.value)()
    _check(lib, lib.nvrtcGetSupportedArchs(arr), "nvrtcGetSupportedArchs")
    return list(arr)


class NVRTCResult:
    """What one compile produced. (A plain class: importing dataclasses costs the warm path.)"""
    __slots__ = ("name", "arch", "ptx", "cubin", "log")

    def __init__(self, name: str, arch: str, ptx: str, cubin: bytes, log: str):
        self.name, self.arch, self.ptx, self.cubin, self.log = name, arch, ptx, cubin, log

    @property
    def report(self) -> dict:
        """ptxas's figures for the kernel: from the log, else (an empty log) from the cubin."""
        rep = parse_ptxas_report(self.log, self.name)
        if rep["n_regs"] < 0 and self.cubin:
            from .cubin import resources
            rep = resources(self.cubin, self.name) or rep
        return rep


def numbered(source: str) -> str:
    lines = source.splitlines()
    w = len(str(len(lines)))
    return "\n".join(f"{i:>{w}} | {line}" for i, line in enumerate(lines, 1))


def _get(lib, prog, size_fn, get_fn) -> bytes:
    n = ctypes.c_size_t()
    _check(lib, getattr(lib, size_fn)(prog, ctypes.byref(n)), size_fn)
    buf = ctypes.create_string_buffer(n.value)
    _check(lib, getattr(lib, get_fn)(prog, buf), get_fn)
    return buf.raw[:n.value]


def compile_cuda(source: str, name: str, arch: str, options=()) -> NVRTCResult:
    """Compile one CUDA C++ translation unit for `arch` (e.g. "sm_90a", "sm_80").

    `name` is the kernel's entry symbol; it names the program in messages. Raises NVRTCError
    with the compile log and the numbered source when NVRTC rejects it.
    """
    lib = load()
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise NVRTCError(f"arch must look like 'sm_90a' or 'sm_80', got {arch!r}")
    opts = [f"-arch={arch}", *DEFAULT_OPTIONS, *options]
    inc = cuda_include_dir()
    if inc:
        opts.append(f"-I{inc}")
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(),
                                       f"{name}.cu".encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        c_opts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        res = lib.nvrtcCompileProgram(prog, len(opts), c_opts)
        log = _get(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog")
        log = log.rstrip(b"\0").decode(errors="replace")
        if res != 0:
            err = lib.nvrtcGetErrorString(res)
            if "libnvrtc-builtins" in log:    # an installation problem, not the kernel's
                raise NVRTCError(_builtins_missing(log))
            if "could not open source file \"cuda_" in log:
                log += ("\nhint: NVRTC 13 has no builtin copy of the CUDA headers; install "
                        "them with "
                        "`pip install nvidia-cuda-runtime==13.0.96` or set CUDA_HOME to a toolkit")
            raise NVRTCError(
                f"NVRTC failed to compile kernel '{name}' for {arch} "
                f"({err.decode() if err else res}); options: {' '.join(opts)}\n"
                f"--- log ---\n{log.strip()}\n--- generated source ---\n{numbered(source)}")
        ptx = _get(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX").rstrip(b"\0").decode()
        cubin = _get(lib, prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return NVRTCResult(name=name, arch=arch, ptx=ptx, cubin=cubin, log=log)


def _builtins_missing(log: str) -> str:
    m = re.search(r"libnvrtc-builtins[\w.]*\.so[\w.]*", log)
    lib = m.group(0).rstrip(".") if m else "libnvrtc-builtins"
    major = version().split(".")[0]
    wheel = "nvidia-cuda-nvrtc==13.0.88" if major == "13" else f"nvidia-cuda-nvrtc-cu{major}"
    return (f"NVRTC ({_lib_path}) could not load {lib}, the library it compiles with: install "
            f"it with `pip install {wheel}`, or put the folder that holds {lib} beside "
            f"libnvrtc on the loader path (LD_LIBRARY_PATH). NVRTC said:\n{log.strip()}")


_RE = None


def _regexes():
    """Compiled on first use: the warm launch path imports this module only for fingerprint()."""
    global _RE
    if _RE is None:
        _RE = dict(func=re.compile(r"Compiling entry function '([^']+)'"),
                   regs=re.compile(r"Used (\d+) registers"),
                   spill=re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads"),
                   stack=re.compile(r"(\d+) bytes stack frame"),
                   smem=re.compile(r"(\d+) bytes smem"),
                   lmem=re.compile(r"(\d+) bytes lmem"),
                   split=re.compile(r"(?=ptxas info\s*: Compiling entry function)"))
    return _RE


def parse_ptxas_report(log: str, name: str | None = None) -> dict:
    """Registers, spills (store + load bytes), local memory and static shared memory of one entry
    function from a `ptxas -v` log. With several entries, `name` picks one (else the first)."""
    rx = _regexes()
    sections = rx["split"].split(log)
    chosen = None
    for sec in sections:
        m = rx["func"].search(sec)
        if m and (name is None or m.group(1) == name or name in m.group(1)):
            chosen = sec
            break
    text = chosen if chosen is not None else log

    def first(rx, default=0):
        m = rx.search(text)
        return int(m.group(1)) if m else default

    m = rx["spill"].search(text)
    spills = int(m.group(1)) + int(m.group(2)) if m else 0
    return dict(n_regs=first(rx["regs"], -1), n_spills=spills,
                local_bytes=max(first(rx["stack"]), first(rx["lmem"])),
                shared_bytes=first(rx["smem"]))
