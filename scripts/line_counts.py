"""Line counts of the project, one row per pipeline stage, as a markdown table.

    python scripts/line_counts.py                  # print the table
    python scripts/line_counts.py --update-readme  # rewrite the table in README.md

"code" counts lines holding code: no blank lines, comments or docstrings; "total" counts every
line of the .py (and .sh) files.
"""
from __future__ import annotations

import ast
import glob
import io
import os
import subprocess
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPS = [  # (row, glob patterns relative to the repository root); a file counts in its first row
    ("wing: newt/ir/schedule.py (tensor-core decisions)", ["newt/ir/schedule.py"]),
    ("wing: newt/passes/tc (tensor-core passes)", ["newt/passes/tc/**/*.py"]),
    ("wing: newt/codegen/tc (tensor-core codegen)", ["newt/codegen/tc/**/*.py"]),
    ("newt: language, dtypes, options, errors", ["newt/__init__.py", "newt/language/**/*.py",
                                                  "newt/descriptors.py",
                                                  "newt/dtypes.py", "newt/options.py",
                                                  "newt/errors.py"]),
    ("newt/frontend (Python AST -> IR)", ["newt/frontend/**/*.py"]),
    ("newt/ir (typed block IR)", ["newt/ir/**/*.py"]),
    ("newt/passes (layouts, vector widths, shared memory)", ["newt/passes/**/*.py"]),
    ("newt/codegen (IR -> CUDA C++)", ["newt/codegen/**/*.py"]),
    ("newt/compiler.py (the pipeline)", ["newt/compiler.py"]),
    ("newt/runtime (NVRTC, driver, cache, launch)", ["newt/runtime/**/*.py"]),
    ("newt/tools, newt/profiler (Triton's host API)", ["newt/tools/**/*.py",
                                                       "newt/profiler/**/*.py"]),
    ("newt/jit.py and the launch path, newt/autotune.py",
     ["newt/jit.py", "newt/jit_host.py", "newt/launch_*.py", "newt/arg_kinds.py",
      "newt/kernel_identity.py", "newt/autotune.py"]),
    ("newt/interpreter (CPU spec)", ["newt/interpreter/**/*.py"]),
    ("newt/testing.py", ["newt/testing.py"]),
    ("newt: torch.compile, tensor-like inputs, debug output",
     ["newt/torch_ops.py", "newt/compile_hooks.py", "newt/tensor_like.py",
      "newt/debug_dump.py"]),
    ("deuteron (tile layer)", ["deuteron/**/*.py"]),
    ("examples", ["examples/**/*.py"]),
    ("benchmarks/lab (experiments, pinned to a commit, untested)", ["benchmarks/lab/**/*.py"]),
    ("benchmarks", ["benchmarks/**/*.py"]),
    ("scripts", ["scripts/**/*.py", "scripts/**/*.sh"]),
    ("tests", ["tests/**/*.py"]),
]
START, END = "<!-- line-counts:start -->", "<!-- line-counts:end -->"


def _docstring_lines(tree) -> set:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant) and isinstance(
                    body[0].value.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def count_file(path: str) -> tuple[int, int]:
    """(code lines, total lines) of one file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if not path.endswith(".py"):
        code = sum(1 for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#"))
        return code, total
    try:
        skip = _docstring_lines(ast.parse(text))
        code_lines = set()
        skip_types = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                      tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in skip_types:
                code_lines.update(range(tok.start[0], tok.end[0] + 1))
        return len(code_lines - skip), total
    except (SyntaxError, tokenize.TokenError):
        return sum(1 for ln in text.splitlines() if ln.strip()), total


def _tracked() -> set | None:
    """Files git tracks (the committed project, not work in progress); None outside git."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {os.path.join(ROOT, p) for p in out.splitlines()}


def table() -> str:
    tracked = _tracked()
    rows, seen = [], set()
    for name, patterns in GROUPS:
        files = sorted({p for pat in patterns for p in glob.glob(os.path.join(ROOT, pat),
                                                                   recursive=True)} - seen)
        if tracked is not None:
            files = [p for p in files if p in tracked]
        seen.update(files)
        if not files:
            continue
        code = total = 0
        for p in files:
            c, t = count_file(p)
            code, total = code + c, total + t
        rows.append((name, len(files), code, total))
    out = ["| part | files | code | total |", "|---|---:|---:|---:|"]
    out += [f"| {n} | {f} | {c:,} | {t:,} |" for n, f, c, t in rows]
    core = [r for r in rows if r[0].startswith(("newt", "deuteron"))]
    wing = [r for r in rows if r[0].startswith("wing")]
    for label, part in (("library core (newt + deuteron)", core),
                        ("library: the Hopper / tensor-core wing", wing),
                        ("library (all)", core + wing)):
        out.append(f"| **{label}** | {sum(r[1] for r in part)} | "
                   f"{sum(r[2] for r in part):,} | {sum(r[3] for r in part):,} |")
    return "\n".join(out)


def update_readme(text_table: str) -> None:
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    if START not in readme or END not in readme:
        sys.exit(f"README.md has no {START} ... {END} block")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(f"{head}{START}\n{text_table}\n{END}{tail}")


if __name__ == "__main__":
    t = table()
    if "--update-readme" in sys.argv:
        update_readme(t)
    print(t)
