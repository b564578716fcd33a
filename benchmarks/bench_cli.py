"""How fast the command line answers: `deepresearch --help` and `import deepresearch` against `python -c pass`.

Each command runs in a fresh process, several times in turn; the table gives the median wall time and its
ratio to starting the same interpreter with nothing to do (the reference, measured in the same rounds, so
the machine's load weighs on both alike). `deepresearch --help` should answer within 0.5 s: nothing on
its path imports DSPy, LiteLLM or numpy. `run --help` builds the run command's parser, which imports the
research program, so it is listed for comparison.

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

TARGET_S = 0.5  # `deepresearch --help`
BIN = Path(sys.executable).parent  # the environment's console scripts sit beside its python
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],  # the reference
    "python -c 'import deepresearch'": [sys.executable, "-c", "import deepresearch"],
    "deepresearch --help": [str(BIN / "deepresearch"), "--help"],
    "deepresearch --version": [str(BIN / "deepresearch"), "--version"],
    "deepresearch run --help": [str(BIN / "deepresearch"), "run", "--help"],
}


def wall_s(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def measure(repeat: int) -> dict[str, list[float]]:
    """Seconds of every command, `repeat` rounds; each round runs every command once, in turn."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():  # a first, unmeasured round: the page cache holds every file afterwards
        wall_s(argv, env)
    for _ in range(repeat):
        for name, argv in COMMANDS.items():
            times[name].append(wall_s(argv, env))
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    args, _ = parser.parse_known_args(argv)  # `python -m benchmarks cli` passes the suite name through
    print(machine_line())
    times = measure(args.repeat)
    reference = statistics.median(times["python -c pass"])
    print(f"{'command':34} {'median s':>9} {'min s':>7} {'x python -c pass':>17}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:34} {median:9.3f} {min(values):7.3f} {median / reference:17.1f}")
    helped = statistics.median(times["deepresearch --help"])
    verdict = "within" if helped <= TARGET_S else "OVER"
    print(f"deepresearch --help: {helped:.3f} s median, {verdict} the {TARGET_S} s target ({args.repeat} rounds)")


if __name__ == "__main__":
    main()
