"""NEWT_DEBUG and NEWT_DUMP: what the compiler shows of its stages.

compiler.py calls this module at its named stages; nothing here decides anything about code.

    NEWT_DEBUG=1    prints, per compiled kernel, the IR after the passes with each op's Python
                    line as a `#` comment above it, then the CUDA C++ with newt's common preamble
                    summarized in one line and `//` comments naming the Python line of the code
                    below them (codegen writes those when Options.debug is on)
    NEWT_DUMP=dir   writes every stage to dir/<kernel>-<hash>/: 00-frontend.ir, one NN-<pass>.ir
                    per pass, kernel.cu (whole), kernel.ptx and, when nvdisasm is on PATH,
                    kernel.sass

Both work with a warm disk cache: the stages are stored in the cache entry of a kernel compiled
while either is set (runtime/specialize.py), and shown again from there on a hit; an entry
written without them is compiled once more, and replaced by one that has them.
"""
from __future__ import annotations

import os
import sys

from . import options

# Only os and sys at import: the warm-cache path (runtime/specialize.py) imports this module on
# a kernel's first launch, where every extra module costs (benchmarks/first_call_parts.py).

META_KEY = "debug_stages"     # where a cache entry keeps the stages: [[name, ext, text], ...]


def dump_dir() -> str | None:
    return os.environ.get("NEWT_DUMP") or None


def wanted(debug: bool) -> bool:
    return bool(debug or dump_dir())


class Stages:
    """The stages of one compile, in order: (name, file extension, text)."""

    def __init__(self):
        self.items: list = []

    def add(self, name: str, ext: str, text: str):
        self.items.append([name, ext, text])


def start(opts) -> Stages | None:
    return Stages() if wanted(opts.debug) else None


def run_passes(ir_fn, opts, stages: Stages | None):
    """The passes, with the IR kept after each one when NEWT_DUMP is set."""
    from . import passes
    from .ir.printer import format_function
    table = getattr(passes, "PASSES", None)
    if stages is None or not dump_dir() or not table or \
            not all(isinstance(e, tuple) and len(e) == 2 for e in table):
        return passes.run_passes(ir_fn, opts)
    stages.add("00-frontend", "ir", format_function(ir_fn, source_lines=True))
    for i, (name, p) in enumerate(table, 1):
        ir_fn = p(ir_fn, opts) or ir_fn
        stages.add(f"{i:02d}-{name}", "ir", format_function(ir_fn, source_lines=True))
    return ir_fn


def finish(stages: Stages | None, opts, name: str, ir_fn, source: str, ptx: str, cubin: bytes):
    """The last stages of a compile; shows them (print and/or files). Returns the list a cache
    entry stores, or None when neither switch is on."""
    if stages is None:
        return None
    from .ir.printer import format_function
    stages.add("ir", "ir", format_function(ir_fn, source_lines=True))
    stages.add("kernel", "cu", source)
    stages.add("kernel", "ptx", ptx)
    sass = _sass(cubin) if dump_dir() else None
    if sass:
        stages.add("kernel", "sass", sass)
    show(stages.items, name, opts.debug)
    return stages.items


def show(items, name: str, debug: bool):
    """Print (NEWT_DEBUG) and write (NEWT_DUMP) the stages of one kernel."""
    by = {(n, e): t for n, e, t in items}
    if debug:
        print(f"// ===== newt IR after passes: {name} (# lines: the Python source of the ops "
              "below them)", file=sys.stderr)
        print(by.get(("ir", "ir"), "// (not recorded)"), file=sys.stderr)
        print(f"// ===== newt CUDA C++: {name}", file=sys.stderr)
        print(summarize(by.get(("kernel", "cu"), "")), file=sys.stderr)
    d = dump_dir()
    if d:
        import hashlib
        src = by.get(("kernel", "cu"), "")
        folder = os.path.join(d, f"{name}-{hashlib.sha256(src.encode()).hexdigest()[:8]}")
        os.makedirs(folder, exist_ok=True)
        for n, e, t in items:
            with open(os.path.join(folder, f"{n}.{e}"), "w") as f:
                f.write(t)
        if debug:
            print(f"// newt: stages of {name} written to {folder}", file=sys.stderr)


def replay(meta: dict, debug: bool) -> bool:
    """Show the stages a cache entry stored; False when it has none (compile again)."""
    items = meta.get(META_KEY)
    if not items:
        return False
    show(items, meta.get("name", "kernel"), debug)
    return True


def summarize(source: str) -> str:
    """The CUDA C++ with newt's common preamble (the same in every kernel) as one line."""
    import re

    from .codegen.header import HEADER
    if not source.startswith(HEADER):
        return source
    helpers = sorted(set(re.findall(r"\b(nt_\w+|newt_\w+)\s*\(", HEADER)))
    return (f"// [newt's common preamble: {HEADER.count(chr(10))} lines, the same in every "
            f"kernel: typedefs and {len(helpers)} helpers ({', '.join(helpers[:6])}, ...); "
            "NEWT_DUMP=dir writes the whole file]\n" + source[len(HEADER):])


def _sass(cubin: bytes) -> str | None:
    import shutil
    import subprocess
    import tempfile
    tool = shutil.which("nvdisasm")
    if tool is None or not cubin:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        r = subprocess.run([tool, "-c", "-g", f.name], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else f"// nvdisasm failed:\n{r.stderr}"


def debug_on(jf_debug) -> bool:
    return bool(options.flags.debug or jf_debug)
