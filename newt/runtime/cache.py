"""Compiled-kernel caches: what lets a second call, and a second process, skip codegen.

Sits between jit.py (which asks for a kernel by key) and compiler.compile (which it only runs on a
miss). Consumes a key and a KernelBinary (cubin + the metadata a launch needs); produces the same
KernelBinary in a later process without importing the frontend or codegen.

    disk key = sha256(kernel source of the function and every @newt.jit function it calls,
                      signature, constexprs, specialization, options, NVRTC and compiler identity
                      (a hash of the compiler's source files: compiler_fingerprint))

Entries are one file each: MAGIC | sha256(payload) | payload, payload = u32 len | json | cubin.
Writes go to a temporary file in the same folder, then os.replace: readers see the old entry or
the whole new one. A file whose checksum or length is wrong is deleted and rebuilt, never loaded.
Processes racing on one key write identical bytes, so whoever replaces last leaves the same entry.
A cache folder that cannot be created or written costs one warning; the memory cache still works.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import warnings

from .. import options

MAGIC = b"NEWTKB01"
_HDR = len(MAGIC) + 32


class KernelBinary:
    """A cubin and what launching it needs: entry name, parameters (name, dtype short spelling
    such as "*fp32"/"i32", index among the Python parameters), threads, dynamic shared memory."""

    __slots__ = ("meta", "cubin", "asm")

    def __init__(self, meta: dict, cubin: bytes, asm: dict | None = None):
        # asm: {"source", "ptx"} of a kernel compiled in this process; the disk keeps them in
        # an entry of their own (meta["asm_key"]), read only when a handle's `.asm` is asked
        self.meta, self.cubin, self.asm = meta, cubin, asm

    @classmethod
    def from_compiled(cls, ck) -> "KernelBinary":
        """From a compiler.CompiledKernel (duck-typed: no compiler import here)."""
        params = [{"name": p.name, "dtype": getattr(p.dtype, "short", str(p.dtype)),
                   "index": p.index} for p in ck.params]
        opts = ck.options
        meta = dict(name=ck.name, params=params, num_threads=ck.num_threads,
                    shared_bytes=ck.shared_bytes, n_regs=ck.n_regs, n_spills=ck.n_spills,
                    local_bytes=ck.local_bytes, arch=getattr(opts, "arch", ""),
                    num_warps=getattr(opts, "num_warps", ck.num_threads // 32),
                    num_stages=getattr(opts, "num_stages", 0),
                    tma_maps=list(getattr(ck, "tma_maps", ()) or ()),
                    persistent=bool(getattr(ck, "persistent", False)))
        return cls(meta, bytes(ck.cubin), dict(source=getattr(ck, "source", ""),
                                               ptx=getattr(ck, "ptx", "")))

    @property
    def name(self) -> str:
        return self.meta["name"]

    def to_bytes(self) -> bytes:
        js = json.dumps(self.meta, sort_keys=True).encode()
        payload = struct.pack("<I", len(js)) + js + self.cubin
        return MAGIC + hashlib.sha256(payload).digest() + payload

    @classmethod
    def from_bytes(cls, data: bytes) -> "KernelBinary | None":
        """None when the bytes are not a whole, intact entry."""
        if len(data) < _HDR + 4 or data[:len(MAGIC)] != MAGIC:
            return None
        payload = data[_HDR:]
        if hashlib.sha256(payload).digest() != data[len(MAGIC):_HDR]:
            return None
        (n,) = struct.unpack_from("<I", payload)
        try:
            meta = json.loads(payload[4:4 + n])
        except ValueError:
            return None
        if not isinstance(meta, dict):
            return None
        return cls(meta, payload[4 + n:])


def digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()


class DiskCache:
    """Kernel binaries under `root` (newt.options.cache_dir(): NEWT_CACHE_DIR or ~/.cache/newt)."""

    SUFFIX = ".nkb"

    def __init__(self, root: str | None = None):
        self.root = root or options.cache_dir()
        self._warned = False
        self.stats = {"hit": 0, "miss": 0, "corrupt": 0, "store": 0}

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + self.SUFFIX)

    def load(self, key: str) -> KernelBinary | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self.stats["miss"] += 1
            return None
        except OSError:   # a folder, a dangling link, an unreadable file: damaged
            data = b""
        kb = KernelBinary.from_bytes(data)
        if kb is None:
            # Truncated, corrupt or not a file at all (a crash mid-write on a filesystem without
            # atomic rename, a disk error, a hand edit): removed, so the rebuilt entry replaces
            # it and the next process finds it whole.
            self.stats["corrupt"] += 1
            _remove(path)
            return None
        self.stats["hit"] += 1
        return kb

    def store(self, key: str, kb: KernelBinary) -> bool:
        path = self._path(key)
        folder = os.path.dirname(path)
        import tempfile
        try:
            if os.path.lexists(folder) and not os.path.isdir(folder):
                _remove(folder)    # a damaged shard: a file where its folder belongs
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=self.SUFFIX)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(kb.to_bytes())
                if not _replace(tmp, path):
                    return False   # this entry alone: bypassed, the cache works, no warning
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            if not self._warned:
                self._warned = True
                warnings.warn(f"newt: cannot write the kernel cache at {self.root} ({e}); "
                              "kernels will be recompiled in every process. Set NEWT_CACHE_DIR "
                              "to a writable folder.", RuntimeWarning, stacklevel=3)
            return False
        self.stats["store"] += 1
        return True

    def load_json(self, key: str):
        """A small JSON record (autotune winners); None when missing or unreadable."""
        kb = self.load(key)
        return kb.meta if kb is not None and not kb.cubin else None

    def store_json(self, key: str, record: dict) -> bool:
        return self.store(key, KernelBinary(record, b""))

    def clear(self):
        import shutil
        shutil.rmtree(self.root, ignore_errors=True)


def _remove(path: str):
    """Remove whatever damaged thing sits at an entry's path (file, link or folder)."""
    import shutil
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _replace(tmp: str, path: str) -> bool:
    """os.replace, once more after removing damage at `path` (a folder, say); False (the
    temporary file removed) when the entry still cannot be written."""
    for attempt in (0, 1):
        try:
            os.replace(tmp, path)
            return True
        except OSError:
            if attempt:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                return False
            _remove(path)
    return False


_disk: DiskCache | None = None


def disk_cache() -> DiskCache:
    """The process's disk cache; follows NEWT_CACHE_DIR if it changes (tests set it)."""
    global _disk
    root = options.cache_dir()
    if _disk is None or _disk.root != root:
        _disk = DiskCache(root)
    return _disk


def python_code(src: str, filename: str):
    """The code object of generated Python source (jit.py's launch functions), from the disk cache
    when an earlier process compiled the same source under the same Python. Compiling it costs
    about 1 ms, a third of a fresh process's first launch from a warm cache; reading it back, a
    tenth of that. The entry is marshal's bytes, which only the same Python version reads: the
    version is in the key, and bytes it cannot read are compiled again (SyntaxError propagates)."""
    import marshal
    import sys
    key = digest("python code", sys.version, filename, src)
    disk = disk_cache()
    kb = disk.load(key)
    if kb is not None and kb.meta.get("python") == sys.version:
        try:
            return marshal.loads(kb.cubin)
        except (EOFError, ValueError, TypeError):
            pass
    code = compile(src, filename, "exec")
    disk.store(key, KernelBinary({"python": sys.version}, marshal.dumps(code)))
    return code


# ---- identity of the code that makes a kernel -------------------------------------------------

_compiler_id = None
_COMPILER_FOLDERS = ("frontend", "ir", "passes", "codegen", os.path.join("passes", "tc"),
                     os.path.join("codegen", "tc"), "language",
                     os.path.join("language", "extra"), os.path.join("language", "extra", "cuda"))
_COMPILER_FILES = ("compiler.py", "descriptors.py", "dtypes.py", "options.py",
                   os.path.join("runtime", "nvrtc.py"))


def _compiler_files() -> list:
    """(name inside the package, path, stat) of every compiler source file, sorted."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = []
    for sub in _COMPILER_FOLDERS:   # flat folders: no os.walk
        try:
            with os.scandir(os.path.join(pkg, sub)) as it:
                out += [(f"{sub}/{e.name}", e.path, e.stat()) for e in it
                        if e.name.endswith(".py")]
        except OSError:
            pass
    for fn in _COMPILER_FILES:
        p = os.path.join(pkg, fn)
        try:
            out.append((fn.replace(os.sep, "/"), p, os.stat(p)))
        except OSError:
            pass
    return sorted(out, key=lambda t: t[0])


def compiler_fingerprint() -> str:
    """A hash of the contents of every compiler source file: an edited frontend, pass or codegen
    file never reuses old cubins, whatever its size and mtime. Computed once per process. The
    shortcut: a record in the disk cache maps the files' stat stamp (size, mtime, ctime, inode,
    device and path of each) to their content hash, so a process whose files have not changed
    reads ~40 stat results instead of hashing ~600 KB. A copied or restored tree, even one with
    the same sizes and mtimes, has new inodes and ctimes, so it is hashed again. No import."""
    global _compiler_id
    if _compiler_id is None:
        files = _compiler_files()
        stamp = digest([(name, path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                         st.st_dev) for name, path, st in files])
        disk = disk_cache()
        key = digest("compiler sources", stamp)
        rec = disk.load_json(key)
        if isinstance(rec, dict) and rec.get("stamp") == stamp and isinstance(rec.get("hash"), str):
            _compiler_id = rec["hash"]
        else:
            h = hashlib.sha256()
            for name, path, _ in files:
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    data = b"<unreadable>"
                h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
            _compiler_id = h.hexdigest()
            disk.store_json(key, {"stamp": stamp, "hash": _compiler_id})
    return _compiler_id


def cache_key(source_key: str, signature: dict, constexprs: dict, specialization: dict,
              arch: str, num_warps: int, num_stages: int, debug: bool) -> str:
    from . import nvrtc
    from .. import __version__
    return digest("newt", __version__, source_key, sorted(signature.items()),
                  sorted((k, repr(v)) for k, v in constexprs.items()),
                  sorted((k, sorted(v.items())) for k, v in specialization.items()),
                  arch, num_warps, num_stages, debug, nvrtc.fingerprint(), compiler_fingerprint())
