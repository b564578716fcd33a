"""Runs every benchmarks/bench_*.py suite in turn: `python -m benchmarks [name ...]`."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path


def _summary(path: Path) -> str:
    """The first line of a suite's docstring, read without importing it (imports are heavy)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0] if doc else ""


def main(names: list[str]) -> int:
    suites = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    if any(n in ("-h", "--help") for n in names):
        print("usage: python -m benchmarks [name ...]   (no name: every suite, in turn)\n")
        for name in suites:
            print(f"  {name.removeprefix('bench_'):14} {_summary(Path(__file__).parent / f'{name}.py')}")
        return 0
    chosen = [s for s in suites if not names or s in names or s.removeprefix("bench_") in names]
    if names and not chosen:
        print(f"no benchmark named {' '.join(names)}; choose from: {', '.join(suites)}", file=sys.stderr)
        return 2
    for name in chosen:
        print(f"== {name}")
        importlib.import_module(f"benchmarks.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
