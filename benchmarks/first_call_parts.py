"""Where a warm-disk-cache first call's time goes, in a fresh process: the first launch of the
vector add timed whole, and the runtime steps inside it timed by wrapping them (the wrappers add
about a microsecond each, far below the steps).

    PYTHONPATH=. python benchmarks/first_call_parts.py      # runs itself in subprocesses

The subprocesses share one temporary NEWT_CACHE_DIR. The first fills the disk cache; the second
is timed by steps, with the runtime modules imported before the clock (the wrappers need them).
It prints one line per step, in ms: the disk entry's key (kernel source hash, NVRTC and compiler
identity), the entry's read, the Device's attributes, cuModuleLoadData, cuModuleGetFunction, the
dynamic-shared-memory attribute, the generated launch function (STEPS lists them), the first
cuLaunchKernelEx, the wait for the GPU, what is left (Python around the steps), and a second
launch's cuLaunchKernelEx for comparison. Then the first call unwrapped, its imports inside the
clock, as bench_launch.py times it: with Python's bytecode cache as the environment sets it, and
on (bench_launch.py's setting, an installed package's).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

STEPS = {  # step name: (module, qualified attribute) wrapped in the timed process
    "disk key": ("newt.runtime.cache", "cache_key"),
    "  kernel source hash": ("newt.jit", "JITFunction.source_key"),
    "  NVRTC identity": ("newt.runtime.nvrtc", "fingerprint"),
    "  compiler identity": ("newt.runtime.cache", "compiler_fingerprint"),
    "bind arguments": ("newt.runtime.specialize", "bind"),
    "specialize": ("newt.runtime.specialize", "specialize"),
    "Launcher": ("newt.runtime.launch", "Launcher.__init__"),
    "  libcuda and prototypes": ("newt.runtime.driver", "load_library"),
    "disk read": ("newt.runtime.cache", "DiskCache.load"),
    "device attributes": ("newt.runtime.driver", "Device.get"),
    "  module load": ("newt.runtime.driver", "Module.__init__"),
    "  function lookup": ("newt.runtime.driver", "Kernel.__init__"),
    "  shared-memory attribute": ("newt.runtime.driver", "Kernel.set_dynamic_shared"),
    "launch function compile": ("newt.jit", "JITFunction._generate"),
}


def _wrap(spent: dict, name: str, module: str, attr: str):
    import importlib
    owner = importlib.import_module(module)
    *path, last = attr.split(".")
    for p in path:
        owner = getattr(owner, p)
    raw = owner.__dict__[last]
    fn = raw.__func__ if isinstance(raw, classmethod) else raw

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + (time.perf_counter() - t0) * 1e3
    setattr(owner, last, classmethod(timed) if isinstance(raw, classmethod) else timed)


def child(plain=False):
    import torch
    torch.cuda.init()
    x = torch.randn(1 << 16, device="cuda")
    y = torch.randn(1 << 16, device="cuda")
    o = torch.empty_like(x)
    torch.cuda.synchronize()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    spent: dict = {}
    if plain:   # no wrappers: the first call as bench_launch.py times it, and what it imports
        k = common.kernels("newt")["add"]
        before = set(sys.modules)
        t0 = time.perf_counter()
        common.launch_add(k, x, y, o)
        torch.cuda.synchronize()
        spent["whole first call"] = (time.perf_counter() - t0) * 1e3
        spent["imports"] = sorted(set(sys.modules) - before)
        here = os.path.dirname(os.path.dirname(os.path.abspath(common.newt.__file__)))
        spent["bytecode cache"] = (not sys.dont_write_bytecode, os.path.isdir(
            os.path.join(here, "newt", "runtime", "__pycache__")))
        print(json.dumps(spent))
        return
    for name, (module, attr) in STEPS.items():
        _wrap(spent, name, module, attr)
    from newt.runtime import launch
    prepared, calls = launch._prepared_launch, []

    def timed_prepared(*a):   # every cuLaunchKernelEx of the Launcher, timed one by one
        go, go_args = prepared(*a)

        def timed_go(*b):
            t0 = time.perf_counter()
            r = go(*b)
            calls.append((time.perf_counter() - t0) * 1e3)
            return r
        return timed_go, go_args
    launch._prepared_launch = timed_prepared
    k = common.kernels("newt")["add"]
    t0 = time.perf_counter()
    common.launch_add(k, x, y, o)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    torch.testing.assert_close(o, x + y)
    spent["first cuLaunchKernelEx"] = calls[0]
    spent["wait for the GPU"] = (t2 - t1) * 1e3
    spent["whole first call"] = (t2 - t0) * 1e3
    common.launch_add(k, x, y, o)
    torch.cuda.synchronize()
    spent["second cuLaunchKernelEx"] = calls[1]
    print(json.dumps(spent))


def _run(mode: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), mode], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    with tempfile.TemporaryDirectory(prefix="newt-first-parts-") as d:
        env = dict(os.environ, NEWT_CACHE_DIR=d)
        cold, warm = _run("--child", env), _run("--child", env)
        as_is = _run("--plain", env)
        env.pop("PYTHONDONTWRITEBYTECODE", None)   # bench_launch.py's first-call setting
        _run("--plain", env)                       # writes the bytecode where it may
        bytecode = _run("--plain", env)
    known = sum(v for k, v in warm.items() if not k.startswith(" ") and k not in (
        "whole first call", "second cuLaunchKernelEx"))
    print("first call with a warm disk cache, by parts (ms; the cold run's in brackets)")
    for k, v in warm.items():
        print(f"  {k:28s} {v:8.3f}   [{cold.get(k, float('nan')):8.3f}]")
    print(f"  {'the rest':28s} {warm['whole first call'] - known:8.3f}")
    for what, r in (("as the environment sets it", as_is), ("on", bytecode)):
        print(f"unwrapped first call, bytecode cache {what}: {r['whole first call']:.3f} ms "
              f"(bytecode written, present: {r['bytecode cache']}); it imported: "
              f"{', '.join(r['imports'])}")


if __name__ == "__main__":
    if "--child" in sys.argv or "--plain" in sys.argv:
        child(plain="--plain" in sys.argv)
    else:
        main()
