"""Python 3.10 is the floor (pyproject.toml's requires-python): the packages and examples use
no syntax and no standard-library API newer than 3.10. The syntax is checked with the parser's
3.10 grammar, the APIs against a list of 3.11+ names; a python3.10 on PATH, when there is one,
also compiles every file."""
import ast
import glob
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(f for d in ("newt", "deuteron", "examples")
               for f in glob.glob(os.path.join(ROOT, d, "**", "*.py"), recursive=True))

# module attribute / from-import names added in 3.11 or later
NEWER = {
    "math": {"exp2", "cbrt"}, "tomllib": None, "datetime": {"UTC"},
    "typing": {"Self", "LiteralString", "Never", "assert_never", "reveal_type", "Required",
               "NotRequired", "TypeVarTuple", "Unpack", "dataclass_transform", "override",
               "assert_type", "get_overloads", "clear_overloads"},
    "enum": {"StrEnum", "verify", "ReprEnum", "EnumCheck", "global_enum"},
    "asyncio": {"TaskGroup", "timeout", "Runner"}, "hashlib": {"file_digest"},
    "inspect": {"getmembers_static", "markcoroutinefunction"}, "contextlib": {"chdir"},
    "operator": {"call"}, "sys": {"exception", "activate_stack_trampoline"},
    "itertools": {"batched"}, "re": {"NOFLAG"}, "logging": {"getLevelNamesMapping"},
}
NEWER_BUILTINS = {"ExceptionGroup", "BaseExceptionGroup", "EncodingWarning"}


def _newer_uses(tree):
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            names = NEWER.get(node.value.id, set())
            if names and node.attr in names:
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in NEWER:
            names = NEWER[node.module]
            for a in node.names:
                if names is None or a.name in names:
                    found.append(f"from {node.module} import {a.name} (line {node.lineno})")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if NEWER.get(a.name, 0) is None]
        elif isinstance(node, ast.Name) and node.id in NEWER_BUILTINS:
            found.append(f"{node.id} (line {node.lineno})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "add_note":
            found.append(f".add_note() (line {node.lineno}): guard it with hasattr")
    return found


def _guarded(tree):
    """Lines inside `if hasattr(x, "add_note"):`, the 3.10-safe spelling."""
    ok = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "hasattr" in ast.unparse(node.test) \
                and "add_note" in ast.unparse(node.test):
            ok |= {n.lineno for b in node.body for n in ast.walk(b) if hasattr(n, "lineno")}
    return ok


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_file_runs_on_python_3_10(path):
    with open(path) as f:
        src = f.read()
    tree = ast.parse(src, path, feature_version=(3, 10))
    guarded = _guarded(tree)
    bad = [u for u in _newer_uses(tree)
           if not (".add_note()" in u and int(u.split("line ")[1].split(")")[0]) in guarded)]
    assert not bad, f"{os.path.relpath(path, ROOT)} uses Python 3.11+: {bad}"


def test_the_checker_finds_newer_apis():
    tree = ast.parse("import tomllib\nfrom typing import Self\nimport math\nmath.exp2(1)\n"
                     "try:\n    pass\nexcept ExceptionGroup:\n    pass\ne.add_note('x')\n")
    assert len(_newer_uses(tree)) == 5
    with pytest.raises(SyntaxError):
        ast.parse("try:\n    pass\nexcept* ValueError:\n    pass\n", feature_version=(3, 10))


def test_byte_compiles_under_python_3_10():
    py = shutil.which("python3.10")
    if py is None or subprocess.run([py, "-c", "1"], capture_output=True).returncode:
        pytest.skip("no python3.10 on PATH")
    code = ("import sys\n"
            "for f in sys.argv[1:]:\n"
            "    compile(open(f).read(), f, 'exec')\n")
    r = subprocess.run([py, "-c", code, *FILES], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
