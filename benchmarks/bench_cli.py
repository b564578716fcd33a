"""How fast the command line answers: `deepresearch --help` and every `deepresearch COMMAND --help`.

Each command runs in a fresh process, several times in turn; the table gives the median wall time and its
ratio to starting the same interpreter with nothing to do (`python -c pass`, the reference) and to
`deepresearch --help`, all measured in the same rounds, so the machine's load weighs on every row alike.
Every help should answer within 0.5 s: building a command's parser imports no DSPy, LiteLLM, numpy or
torch (tests/test_cli_help.py checks that; this measures it). The commands are read from the dispatcher's
table, so a new command is measured without editing this file.

Run: `python -m benchmarks cli [--repeat N]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import machine_line

TARGET_S = 0.5  # `deepresearch --help` and every `deepresearch COMMAND --help`
BIN = Path(sys.executable).parent  # the environment's console scripts sit beside its python
REFERENCE, TOP = "python -c pass", "deepresearch --help"


def command_names(table: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the dispatcher's table, groups walked: ("run",), ("eval", "retrieval")..."""
    out: list[tuple[str, ...]] = []
    for name, entry in table.items():
        out += command_names(entry, (*prefix, name)) if isinstance(entry, dict) else [(*prefix, name)]
    return out


def commands() -> dict[str, list[str]]:
    from deepresearch.cli import COMMANDS  # the table only: the commands' modules are not imported

    script = str(BIN / "deepresearch")
    return {
        REFERENCE: [sys.executable, "-c", "pass"],  # the reference
        "python -c 'import deepresearch'": [sys.executable, "-c", "import deepresearch"],
        TOP: [script, "--help"],
        "deepresearch --version": [script, "--version"],
        **{f"deepresearch {' '.join(c)} --help": [script, *c, "--help"] for c in command_names(COMMANDS)},
    }


def wall_s(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def measure(repeat: int) -> dict[str, list[float]]:
    """Seconds of every command, `repeat` rounds; each round runs every command once, in turn."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    runs = commands()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for argv in runs.values():  # a first, unmeasured round: the page cache holds every file afterwards
        wall_s(argv, env)
    for _ in range(repeat):
        for name, argv in runs.items():
            times[name].append(wall_s(argv, env))
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    args, _ = parser.parse_known_args(argv)  # `python -m benchmarks cli` passes the suite name through
    print(machine_line())
    times = measure(args.repeat)
    reference, top = statistics.median(times[REFERENCE]), statistics.median(times[TOP])
    print(f"{'command':44} {'median s':>9} {'min s':>7} {'x python':>9} {'x --help':>9}  target {TARGET_S} s")
    for name, values in times.items():
        median = statistics.median(values)
        verdict = ("within" if median <= TARGET_S else "OVER") if name.endswith("--help") else ""
        print(f"{name:44} {median:9.3f} {min(values):7.3f} {median / reference:9.1f} {median / top:9.1f}  {verdict}")
    helps = {n: statistics.median(v) for n, v in times.items() if n.endswith("--help")}
    slowest = max(helps, key=helps.get)
    over = [n for n, m in helps.items() if m > TARGET_S]
    print(
        f"{len(helps) - len(over)} of {len(helps)} helps within the {TARGET_S} s target ({args.repeat} rounds); "
        f"slowest: {slowest} {helps[slowest]:.3f} s" + (f"; over: {', '.join(over)}" if over else "")
    )


if __name__ == "__main__":
    main()
