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
