"""Offline presets: CPU seconds per research node of `deepresearch run --lm offline` for every preset.

    python -m benchmarks presets     or     python benchmarks/bench_presets.py [--corpus scifact]

Each preset (programs/config.py PRESETS) runs at its default shape as one `deepresearch run QUESTION --lm
offline --preset P --corpus scifact` command in a child process, so its wall time and CPU time (user +
system, from wait4) are its own. Nodes are counted in the run's trace.json. Every figure is also given as
a ratio to the `eco` preset measured in the same run; CPU time, unlike wall time, is barely changed by
other load on the machine. Target (issue 18): no preset takes more than a few CPU seconds per node.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine_line, table
from deepresearch.programs.config import PRESETS

QUESTION = "Does vitamin D supplementation reduce fracture risk?"
TARGET_CPU_PER_NODE = 3.0  # "a few seconds"
REFERENCE = "eco"


def count_nodes(tree: list[dict]) -> int:
    return sum(1 + count_nodes(node.get("children") or []) for node in tree)


def measure(name: str, corpus: str, out: Path, extra: tuple[str, ...] = ()) -> dict:
    """Wall and CPU seconds (user + system, this child's alone) of one offline run, and its trace's nodes."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("DEEPRESEARCH_LM", None)
    argv = [
        sys.executable,
        "-m",
        "deepresearch.cli",
        "run",
        QUESTION,
        "--lm",
        "offline",
        "--preset",
        name,
        "--corpus",
        corpus,
        "--out",
        str(out),
        "-q",
        *extra,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child is reaped: its times are in here
    if proc.returncode != 0:
        raise RuntimeError(f"preset {name}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-3:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    nodes = count_nodes(json.loads((out / "trace.json").read_text())["tree"])
    return {"preset": name, "nodes": nodes, "wall_s": wall, "cpu_s": cpu, "cpu_per_node": cpu / max(1, nodes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="scifact", help="corpus spec for `deepresearch run --corpus`")
    parser.add_argument("--presets", nargs="*", default=list(PRESETS), help="presets to time (default: all)")
    args, _ = parser.parse_known_args()  # `python -m benchmarks presets` passes the suite name through
    print(machine_line())
    names = [REFERENCE] + [p for p in args.presets if p != REFERENCE]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # one node: what every run pays before its tree (interpreter, DSPy, reading SciFact, its BM25 build)
        start = measure("quick", args.corpus, Path(tmp) / "one-node", ("--depth", "1", "--breadth", "1"))
        for name in names:
            rows.append(measure(name, args.corpus, Path(tmp) / name))
    ref = rows[0]
    for r in rows:
        r["marginal"] = (r["cpu_s"] - start["cpu_s"]) / max(1, r["nodes"] - start["nodes"])
        r["cpu_x"] = r["cpu_s"] / ref["cpu_s"]
        r["per_node_x"] = r["cpu_per_node"] / ref["cpu_per_node"]
        r["wall_x"] = r["wall_s"] / ref["wall_s"]
    print(f"== deepresearch run {QUESTION!r} --lm offline --preset P --corpus {args.corpus} (default shapes)")
    print(
        table(
            rows,
            [
                ("preset", "preset", ""),
                ("nodes", "nodes", "d"),
                ("wall_s", "wall s", ".2f"),
                ("cpu_s", "CPU s", ".2f"),
                ("cpu_per_node", "CPU s / node", ".3f"),
                ("marginal", "beyond start", ".3f"),
                ("cpu_x", "CPU / eco", ".2f"),
                ("per_node_x", "per node / eco", ".2f"),
                ("wall_x", "wall / eco", ".2f"),
            ],
        )
    )
    worst = max(rows, key=lambda r: r["cpu_per_node"])
    print(
        f"verdict: most CPU per node {worst['cpu_per_node']:.3f} s ({worst['preset']}; target <= "
        f"{TARGET_CPU_PER_NODE:g} s): {'MET' if worst['cpu_per_node'] <= TARGET_CPU_PER_NODE else 'MISSED'}"
    )
    print(
        f"CPU s / node includes each run's start; a one-node run (quick, depth 1 x breadth 1) took "
        f"{start['cpu_s']:.2f} CPU s and {start['wall_s']:.2f} s wall; beyond start = (CPU s - that) / "
        f"(nodes - {start['nodes']}), the cost of one more node"
    )


if __name__ == "__main__":
    main()
