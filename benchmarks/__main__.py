"""Runs every benchmarks/bench_*.py suite in turn: `python -m benchmarks [name ...]`."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main(names: list[str]) -> int:
    suites = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
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
