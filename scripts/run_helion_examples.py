"""Run Helion's example programs on deuteron: each file with its imports pointed at deuteron.

    python scripts/run_helion_examples.py PATH [-k NAME]... [--timeout S] [--keep]
                                          [--cuda-literals-to-cpu]

PATH is a folder of Helion example files you have (a Helion checkout's examples folder). Each
`*.py` in it (not in subfolders) is copied to a temporary folder with only its import lines
rewritten, so that the names the code uses stay Helion's and mean deuteron's:

    import helion                          ->  import deuteron as helion
    import helion.language as hl           ->  import deuteron.language as hl
    import helion.x                        ->  import deuteron.x; import deuteron as helion
    from helion.x import y                 ->  from deuteron.x import y
    from helion._testing import run_example -> from deuteron._testing import run_example

Imports of triton are rewritten to newt as scripts/run_triton_tutorials.py does (some examples
time themselves with triton.testing.do_bench). Each copy runs in its own process (from the
temporary folder, with this checkout first on the path) under a timeout, with NEWT_INTERPRET=1
when torch sees no GPU. A table follows: each example, pass / fail / timeout, its time, and the
line that says why (the exception the traceback ends with). The exit status is the number of
examples that did not pass.

--cuda-literals-to-cpu also replaces the string literals "cuda" / 'cuda' with "cpu" (many
examples create their inputs with device="cuda"): without a GPU, it separates the examples
that fail only for that from those that fail in deuteron. `--keep` keeps the copies.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import run_triton_tutorials as triton_runner  # noqa: E402  (same folder)

_CUDA = re.compile(r"""(["'])cuda\1""")


def substitute(source: str, cuda_to_cpu: bool = False) -> str:
    """The source with every import of helion rewritten to import deuteron under the same
    names (and triton's to newt); every other line unchanged, unless `cuda_to_cpu`, which
    also turns the string literal "cuda" into "cpu"."""
    line_fn = (lambda body: _CUDA.sub('"cpu"', body)) if cuda_to_cpu else None
    return triton_runner.substitute(triton_runner.substitute(source), "helion", "deuteron",
                                    line_fn)


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="folder of Helion example files")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per example")
    ap.add_argument("-k", dest="only", action="append", default=[],
                    help="run only files whose name contains this (repeatable)")
    ap.add_argument("--cuda-literals-to-cpu", action="store_true",
                    help='also rewrite the string literal "cuda" to "cpu"')
    ap.add_argument("--keep", action="store_true", help="keep the rewritten copies")
    args = ap.parse_args(argv)
    files = sorted(os.path.join(args.path, n) for n in os.listdir(args.path)
                   if n.endswith(".py") and os.path.isfile(os.path.join(args.path, n))
                   and (not args.only or any(k in n for k in args.only)))
    if not files:
        print(f"no example files (*.py) in {args.path}")
        return 1
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    if not _has_gpu():
        env["NEWT_INTERPRET"] = "1"
    workdir = tempfile.mkdtemp(prefix="deuteron-examples-")
    rows = []
    try:
        for path in files:
            name = os.path.basename(path)
            with open(path, encoding="utf-8") as f:
                text = substitute(f.read(), args.cuda_literals_to_cpu)
            copy = os.path.join(workdir, "rewritten", name)
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            with open(copy, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"running {name} ...", flush=True)
            # run_one copies again with triton's rewrite only, which leaves this text as it is
            rows.append((name, *triton_runner.run_one(copy, workdir, args.timeout, env)))
            print(f"  {rows[-1][1]} after {rows[-1][2]:.1f} s  {rows[-1][3][:160]}", flush=True)
    finally:
        if args.keep:
            print(f"copies kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return triton_runner.print_table(rows, "example")


if __name__ == "__main__":
    sys.exit(main())
