"""Copy the measured table of docs/benchmarks.md into README.md, so that the README's numbers
are never typed by hand.

    python scripts/sync_readme_numbers.py           # rewrite README.md
    python scripts/sync_readme_numbers.py --check   # exit 1 if README.md is stale
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def block(text, name):
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    if not m:
        raise SystemExit(f"no <!-- {name}:start/end --> markers")
    return m


def main(argv):
    docs = open(os.path.join(ROOT, "docs", "benchmarks.md")).read()
    readme_path = os.path.join(ROOT, "README.md")
    readme = open(readme_path).read()
    table = block(docs, "measured").group(1)
    m = block(readme, "numbers")
    new = readme[:m.start(1)] + table + readme[m.end(1):]
    if "--check" in argv:
        if new != readme:
            print("README.md is stale: run python scripts/sync_readme_numbers.py")
            return 1
        return 0
    open(readme_path, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
