"""Disk cache: round trip, corrupt and truncated entries rebuilt, read-only folders, processes
racing on one key, and a warm start in a fresh process that never imports the compiler."""
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

import newt
from newt.runtime import cache, specialize

from runtime_fakes import FAKE_CUBIN, FakeCompile
from test_runtime_launch import fake_lib_path, gpu  # noqa: F401  (fixtures: the stand-in GPU)


def binary(tag="a"):
    meta = dict(name=f"kern_{tag}", params=[{"name": "x", "dtype": "*fp32", "index": 0},
                                             {"name": "n", "dtype": "i32", "index": 1}],
                num_threads=128, shared_bytes=4096, n_regs=20, n_spills=0, local_bytes=0,
                arch="sm_90a", num_warps=4, num_stages=3)
    return cache.KernelBinary(meta, FAKE_CUBIN + tag.encode() * 100)


def test_round_trip(tmp_cache):
    d = cache.DiskCache(str(tmp_cache))
    assert d.load("ab" * 32) is None
    assert d.store("ab" * 32, binary())
    kb = d.load("ab" * 32)
    assert kb.meta == binary().meta and kb.cubin == binary().cubin
    assert d.stats == {"hit": 1, "miss": 1, "corrupt": 0, "store": 1}
    leftovers = [f for _, _, fs in os.walk(tmp_cache) for f in fs if f.startswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage", "bad_json"])
def test_damaged_entry_is_deleted_and_rebuilt(tmp_cache, damage):
    d = cache.DiskCache(str(tmp_cache))
    key = "cd" * 32
    d.store(key, binary())
    path = d._path(key)
    data = open(path, "rb").read()
    if damage == "flip":
        i = len(data) - 10
        data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
    elif damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "empty":
        data = b""
    elif damage == "garbage":
        data = os.urandom(300)
    else:  # a valid checksum over an invalid payload
        import hashlib
        import struct
        payload = struct.pack("<I", 5) + b"{oops" + FAKE_CUBIN
        data = cache.MAGIC + hashlib.sha256(payload).digest() + payload
    open(path, "wb").write(data)
    assert d.load(key) is None
    assert not os.path.exists(path) and d.stats["corrupt"] == 1
    d.store(key, binary())                      # rebuilt
    assert d.load(key).cubin == binary().cubin


def test_unwritable_cache_dir_warns_once(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("NEWT_CACHE_DIR", str(blocker / "cache"))
    d = cache.disk_cache()
    assert d.root == str(blocker / "cache")
    with pytest.warns(RuntimeWarning, match="NEWT_CACHE_DIR"):
        assert d.store("ef" * 32, binary()) is False
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert d.store("ef" * 32, binary()) is False   # no second warning
    assert d.load("ef" * 32) is None


def test_cache_dir_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "one"))
    assert cache.disk_cache().root == str(tmp_path / "one")
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "two"))
    assert cache.disk_cache().root == str(tmp_path / "two")


def _race(args):
    root, key, tag, rounds = args
    d = cache.DiskCache(root)
    seen = set()
    for _ in range(rounds):
        d.store(key, binary(tag))
        kb = d.load(key)
        if kb is not None:
            seen.add(kb.cubin == binary(tag).cubin)
    return seen, d.stats["corrupt"]


def test_concurrent_writers_same_key(tmp_cache):
    key = "12" * 32
    ctx = multiprocessing.get_context("spawn" if sys.platform == "darwin" else "fork")
    with ctx.Pool(4) as pool:
        results = pool.map(_race, [(str(tmp_cache), key, "z", 40)] * 4)
    for seen, corrupt in results:
        assert seen == {True} and corrupt == 0   # every read saw a whole, identical entry
    assert cache.DiskCache(str(tmp_cache)).load(key).cubin == binary("z").cubin
    files = [f for _, _, fs in os.walk(tmp_cache) for f in fs]
    assert files == [key + cache.DiskCache.SUFFIX]


KERNEL_MODULE = '''
import newt
import newt.language as nl


@newt.jit
def helper(x):
    return x * 2


@newt.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    nl.store(out_ptr + offs, helper(nl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)
'''

WARM = '''
import sys, json
sys.path[:0] = {paths!r}
import newt
from newt.runtime import cache, specialize
import kmod
cache._compiler_id = "pinned"   # other edits to compiler files must not make this test flaky

def must_not_compile(*a, **k):
    raise AssertionError("compile() called on a warm cache")

kb = specialize.get_binary(kmod.scale_kernel, {sig!r}, {{"BLOCK": 256}}, {spec!r}, arch="sm_90a",
                           num_warps=4, num_stages=3, compile_fn=must_not_compile)
heavy = sorted(m for m in sys.modules if m.split(".")[:2] in (["newt", "frontend"],
               ["newt", "codegen"], ["newt", "passes"], ["newt", "compiler"], ["newt", "interpreter"]))
print(json.dumps(dict(name=kb.name, n_params=len(kb.meta["params"]), heavy=heavy)))
'''

SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
SPEC = {n: dict(divisible_by_16=True, equal_to_1=False, large=False) for n in SIG}


def _warm_process(tmp_path, cache_dir):
    root = os.path.dirname(os.path.dirname(os.path.abspath(newt.__file__)))
    code = WARM.format(paths=[str(tmp_path), root], sig=SIG, spec=SPEC)
    env = dict(os.environ, NEWT_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    return r


def test_warm_start_skips_codegen(tmp_path, tmp_cache, monkeypatch):
    monkeypatch.setattr(cache, "_compiler_id", "pinned")
    (tmp_path / "kmod.py").write_text(KERNEL_MODULE)
    sys.path.insert(0, str(tmp_path))
    try:
        import kmod
        fc = FakeCompile()
        kb = specialize.get_binary(kmod.scale_kernel, SIG, {"BLOCK": 256}, SPEC, arch="sm_90a",
                                   num_warps=4, num_stages=3, compile_fn=fc)
        assert len(fc.calls) == 1 and kb.name == "scale_kernel"
        # same process, new lookup: the disk answers
        specialize.get_binary(kmod.scale_kernel, SIG, {"BLOCK": 256}, SPEC, arch="sm_90a",
                              num_warps=4, num_stages=3, compile_fn=fc)
        assert len(fc.calls) == 1
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kmod", None)
    r = _warm_process(tmp_path, tmp_cache)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == dict(name="scale_kernel", n_params=3, heavy=[])
    # editing a callee changes the key: the warm process must now compile
    (tmp_path / "kmod.py").write_text(KERNEL_MODULE.replace("x * 2", "x * 3"))
    r = _warm_process(tmp_path, tmp_cache)
    assert r.returncode != 0 and "compile() called on a warm cache" in r.stderr


def test_key_covers_options_and_specialization(tmp_cache):
    src = "s" * 64
    base = dict(signature=SIG, constexprs={"BLOCK": 256}, specialization=SPEC, arch="sm_90a",
                num_warps=4, num_stages=3, debug=False)
    k0 = cache.cache_key(src, **base)
    assert k0 == cache.cache_key(src, **base)
    variants = [dict(arch="sm_80"), dict(num_warps=8), dict(num_stages=2), dict(debug=True),
                dict(constexprs={"BLOCK": 128}), dict(signature={**SIG, "x_ptr": "*fp16"}),
                dict(specialization={**SPEC, "n": dict(SPEC["n"], divisible_by_16=False)})]
    keys = {cache.cache_key(src, **{**base, **v}) for v in variants}
    assert k0 not in keys and len(keys) == len(variants)
    assert cache.cache_key("t" * 64, **base) != k0


def test_source_key_follows_callees_and_constants():
    import newt.language as nl
    ns = {"newt": newt, "nl": nl}
    code = textwrap.dedent('''
        SCALE = {scale}
        @newt.jit
        def inner(x):
            return x * SCALE
        @newt.jit
        def outer(p):
            nl.store(p, inner(nl.load(p)))
    ''')
    keys = []
    for scale in (2, 2, 3):
        g = dict(ns)
        exec(compile(code.format(scale=scale), "<k>", "exec"), g)
        keys.append(g["outer"].source_key())
    assert keys[0] == keys[1] != keys[2]


# ---- end to end through specialize.get_binary: processes racing, damage, unwritable folders ----

RACE = '''
import json, os, sys, time
sys.path[:0] = {paths!r}
import newt
from newt.runtime import cache, specialize
import kmod
cache._compiler_id = "pinned"
open(os.path.join({barrier!r}, str(os.getpid())), "w").close()
t0 = time.time()
while len(os.listdir({barrier!r})) < {n} and time.time() < t0 + 60:   # start compiling together
    time.sleep(0.005)
names = []
for block in (128, 256):
    kb = specialize.get_binary(kmod.scale_kernel, {sig!r}, {{"BLOCK": block}}, {spec!r},
                               arch="sm_80", num_warps=4, num_stages=3)
    names.append(kb.name)
print(json.dumps(dict(names=names, stats=cache.disk_cache().stats)))
'''


def test_processes_compiling_the_same_kernels_at_once(tmp_path, tmp_cache, monkeypatch):
    """Three processes compile the same two kernels (real NVRTC) into one empty cache folder at
    the same moment: every process gets its binaries, the folder holds exactly one intact entry
    per kernel and no temporary files, and a later process loads both without compiling."""
    monkeypatch.setattr(cache, "_compiler_id", "pinned")
    (tmp_path / "kmod.py").write_text(KERNEL_MODULE)
    root = os.path.dirname(os.path.dirname(os.path.abspath(newt.__file__)))
    (tmp_path / "barrier").mkdir()
    code = RACE.format(paths=[str(tmp_path), root], barrier=str(tmp_path / "barrier"), n=3,
                       sig=SIG, spec=SPEC)
    env = dict(os.environ, NEWT_CACHE_DIR=str(tmp_cache))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["names"] == ["scale_kernel"] * 2
    files = sorted(f for _, _, fs in os.walk(tmp_cache) for f in fs)
    # per kernel: its binary, and the source and PTX a handle's `.asm` reads (handle.py)
    assert len(files) == 4 and all(f.endswith(cache.DiskCache.SUFFIX) for f in files), files
    d = cache.DiskCache(str(tmp_cache))
    kbs = [d.load(f[:-len(cache.DiskCache.SUFFIX)]) for f in files]
    assert all(kb is not None for kb in kbs)
    bins = [kb for kb in kbs if kb.cubin]
    assert len(bins) == 2 and all(kb.cubin[:4] == b"\x7fELF" for kb in bins)
    assert all(".entry" in d.load_json(kb.meta["asm_key"])["ptx"] for kb in bins)
    assert d.stats["corrupt"] == 0

    def must_not_compile(*a, **k):
        raise AssertionError("compiled although the cache is warm")
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("kmod", None)
        import kmod
        for block in (128, 256):
            specialize.get_binary(kmod.scale_kernel, SIG, {"BLOCK": block}, SPEC, arch="sm_80",
                                  num_warps=4, num_stages=3, compile_fn=must_not_compile)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kmod", None)


def _scale_kernel():
    import newt.language as nl

    @newt.jit
    def scale(x_ptr, n, BLOCK: nl.constexpr):
        pass
    return scale


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_entry_is_recompiled_by_the_jit_path(tmp_cache, damage):
    k = _scale_kernel()
    sig = {"x_ptr": "*fp32", "n": "i32"}
    spec = {n: dict(divisible_by_16=True, equal_to_1=False, large=False) for n in sig}
    fc = FakeCompile()
    get = lambda: specialize.get_binary(k, sig, {"BLOCK": 64}, spec, arch="sm_90a",  # noqa: E731
                                        num_warps=4, num_stages=3, compile_fn=fc)
    get()
    paths = [os.path.join(d, f) for d, _, fs in os.walk(tmp_cache) for f in fs]
    (path,) = [p for p in paths if b'"asm_key"' in open(p, "rb").read()]  # the binary's entry
    data = open(path, "rb").read()
    data = data[:len(data) - 7] if damage == "truncate" else data[:-3] + b"\x00\x01\x02"
    open(path, "wb").write(data)
    kb = get()                                   # detected, recompiled, rewritten
    assert len(fc.calls) == 2 and kb.cubin == FAKE_CUBIN
    assert cache.disk_cache().stats["corrupt"] == 1
    get()                                        # the rewritten entry is whole again
    assert len(fc.calls) == 2


def test_read_only_cache_dir_works_with_one_warning(tmp_path, monkeypatch):
    """A cache folder that cannot be written (read-only mount, another user's folder): compiles
    still succeed, entries already there still load, and the process warns once."""
    import warnings
    folder = tmp_path / "ro-cache"
    monkeypatch.setenv("NEWT_CACHE_DIR", str(folder))
    k = _scale_kernel()
    sig = {"x_ptr": "*fp32", "n": "i32"}
    spec = {n: dict(divisible_by_16=True, equal_to_1=False, large=False) for n in sig}
    fc = FakeCompile()

    def get(block):
        return specialize.get_binary(k, sig, {"BLOCK": block}, spec, arch="sm_90a",
                                     num_warps=4, num_stages=3, compile_fn=fc)
    get(16)                                      # written while the folder is writable
    if os.geteuid() == 0:    # root writes through permission bits: refuse writes another way
        import tempfile

        def refuse(*a, **k):
            raise PermissionError(13, "Permission denied", str(folder))
        monkeypatch.setattr(tempfile, "mkstemp", refuse)
    else:
        for d, _, _ in os.walk(folder):
            os.chmod(d, 0o555)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for block in (32, 64, 128):
                assert get(block).name == "scale"
            get(16)
        assert len(fc.calls) == 4                # 16 loaded from the read-only folder
        msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(msgs) == 1 and "NEWT_CACHE_DIR" in msgs[0], msgs
    finally:
        for d, _, _ in os.walk(folder):
            os.chmod(d, 0o755)


def test_missing_cache_dir_is_created_without_warning(tmp_path, monkeypatch):
    import warnings
    folder = tmp_path / "not" / "there" / "yet"
    monkeypatch.setenv("NEWT_CACHE_DIR", str(folder))
    k = _scale_kernel()
    sig = {"x_ptr": "*fp32", "n": "i32"}
    fc = FakeCompile()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        specialize.get_binary(k, sig, {"BLOCK": 16}, {}, arch="sm_90a", num_warps=4,
                              num_stages=3, compile_fn=fc)
    assert folder.is_dir() and any(fs for _, _, fs in os.walk(folder))


# ---- the generated launch function's code (cache.python_code) ------------------------------

def _compile_spy(monkeypatch):
    """builtins.compile, counting the calls it gets for each filename."""
    import builtins
    real, seen = builtins.compile, []

    def spy(src, filename, *a, **k):
        seen.append(str(filename))
        return real(src, filename, *a, **k)
    monkeypatch.setattr(builtins, "compile", spy)
    return seen


def test_python_code_is_compiled_once_and_damage_recompiles(tmp_cache, monkeypatch):
    import marshal
    src = "def f(a):\n    return a * 3 + 1\n"
    seen = _compile_spy(monkeypatch)

    def run(code):
        ns: dict = {}
        exec(code, ns)
        return ns["f"](2)
    assert run(cache.python_code(src, "<t>")) == 7 and seen == ["<t>"]
    assert run(cache.python_code(src, "<t>")) == 7 and seen == ["<t>"]     # from the disk
    key = cache.digest("python code", sys.version, "<t>", src)
    disk = cache.disk_cache()
    # bytes marshal cannot read, then a valid entry of another Python: both compiled again
    for meta, payload in (({"python": sys.version}, b"\xff\x00junk"),
                          ({"python": "2.7.18"}, marshal.dumps(compile("f = 0", "<o>", "exec")))):
        disk.store(key, cache.KernelBinary(meta, payload))
        n = len(seen)
        assert run(cache.python_code(src, "<t>")) == 7 and seen[n:] == ["<t>"]
        assert run(cache.python_code(src, "<t>")) == 7 and len(seen) == n + 1   # rewritten
    with pytest.raises(SyntaxError):
        cache.python_code("def (:\n", "<bad>")


def test_fresh_jit_function_reads_its_launch_function_from_disk(gpu, monkeypatch):
    """A new JITFunction of the same kernel (what a fresh process holds) generates the same
    launch function source and takes its code from the disk cache, compiling nothing."""
    import torch
    from runtime_fakes import fake_state
    from test_runtime_launch import make_add
    cu, fc = gpu
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    make_add()[(3,)](x, y, out, 300, BLOCK=128)
    seen = _compile_spy(monkeypatch)
    before = fake_state(cu).launches
    make_add()[(3,)](x, y, out, 300, BLOCK=128)
    st = fake_state(cu)
    assert [f for f in seen if f.startswith("<newt launcher")] == []
    assert st.launches == before + 1 and st.grid == (3, 1, 1)
    assert st.params[:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]
    assert st.params[3] & 0xFFFFFFFF == 300


# ---- damage of any kind is removed once; the compiler's identity is its sources' contents ----

@pytest.mark.parametrize("damage", ["folder", "folder_with_files", "dangling_link", "shard_file",
                                    "json_list"])
def test_damaged_entry_of_any_kind_is_replaced_once(tmp_cache, damage):
    """An entry path that is a folder (or a dangling link, or a file where its two-letter folder
    belongs, or a whole entry whose metadata is not a record) is a miss that the next store
    repairs, silently: later loads hit, and no warning says the cache is unwritable."""
    import warnings
    d = cache.DiskCache(str(tmp_cache))
    key = "cd" * 32
    path = d._path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if damage.startswith("folder"):
        os.makedirs(path)
        if damage == "folder_with_files":
            open(os.path.join(path, "x"), "w").write("junk")
    elif damage == "dangling_link":
        os.symlink(str(tmp_cache / "nowhere"), path)
    elif damage == "shard_file":
        os.rmdir(os.path.dirname(path))
        open(os.path.dirname(path), "w").write("junk")
    else:
        open(path, "wb").write(_json_list_entry())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert d.load(key) is None
        assert d.store(key, binary())
        assert d.load(key).cubin == binary().cubin
    assert os.path.isfile(path)


def _json_list_entry():
    import hashlib
    import struct
    js = b"[1, 2]"
    payload = struct.pack("<I", len(js)) + js + FAKE_CUBIN
    return cache.MAGIC + hashlib.sha256(payload).digest() + payload


def test_a_folder_at_the_entry_path_is_removed_by_store_too(tmp_cache):
    """store without a load first (a worker process compiling ahead): the folder goes."""
    d = cache.DiskCache(str(tmp_cache))
    key = "ce" * 32
    os.makedirs(d._path(key))
    assert d.store(key, binary()) and d.load(key).cubin == binary().cubin


_FINGERPRINT = '''
import sys
sys.path.insert(0, {root!r})
from newt.runtime import cache
print(cache.compiler_fingerprint())
'''


def _fingerprint_of(root, cache_dir):
    env = dict(os.environ, NEWT_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-c", _FINGERPRINT.format(root=str(root))], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_compiler_fingerprint_is_a_content_hash(tmp_path, tmp_cache):
    """Two copies of the package: the same contents give the same fingerprint; an edit that
    keeps the file's size and mtime (the copy's files restored to the original stamps) gives
    another, in a fresh process whose stat shortcut record is already in the cache."""
    import shutil
    src = os.path.dirname(os.path.abspath(newt.__file__))
    copies = []
    for name in ("a", "b"):
        root = tmp_path / name
        shutil.copytree(src, root / "newt", copy_function=shutil.copy2,
                        ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(root)
    fa = _fingerprint_of(copies[0], tmp_cache)
    assert fa == _fingerprint_of(copies[1], tmp_cache) == _fingerprint_of(copies[0], tmp_cache)
    f = copies[1] / "newt" / "codegen" / "reduce.py"
    st = os.stat(f)
    text = f.read_text()
    edited = text.replace("FULL_MASK = ", "FULL_MASK= ", 1) + " "   # same size
    assert len(edited) == len(text)
    f.write_text(edited)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(f).st_size == st.st_size and os.stat(f).st_mtime_ns == st.st_mtime_ns
    assert _fingerprint_of(copies[1], tmp_cache) != fa
