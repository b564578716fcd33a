"""What a research run costs: per stage, its LM calls and its prompt, cached and completion tokens, as measured
against a real server, and what the same tokens would cost at hosted models' list prices.

Reads the rows `benchmarks.bench_tokens --real --json` saved (one row per preset and setting; the server's
own token counts, with the prompt tokens it read from its prompt cache) and prices each stage with
`model_cost`, the function the run's own cost line uses: LiteLLM's local price map, cached prompt tokens at
the provider's cache-read price. A hosted provider caches by its own rules (most only prefixes of 1,024
tokens or more), so each model is priced twice: nothing cached, and the server's measured cache hits cached.

    python -m benchmarks.cost benchmarks/tokens_real_d2b3_p2000_cached.json --preset eco --cuts on \\
        --models gpt-4.1-mini,claude-haiku-4-5
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the price map shipped with LiteLLM, no download

from deepresearch.programs.runtime.scheduler import model_cost  # noqa: E402

CALLS, PROMPT, COMPLETION, CACHED = 0, 1, 2, 7  # positions in a saved row's per-stage list


def priced(row: dict, models: list[str]) -> list[dict]:
    """One line per stage and one for the run: calls, tokens, and dollars per model (nothing cached / the
    measured cache hits cached)."""
    lines = []
    stages = {name: v for name, v in sorted(row["stages"].items()) if v[CALLS]}
    total = [sum(v[i] for v in stages.values()) for i in range(8)]
    for name, v in [*stages.items(), ("run", total)]:
        line = {"stage": name, "calls": v[CALLS], "prompt": v[PROMPT], "cached": v[CACHED], "completion": v[COMPLETION]}
        for m in models:
            line[m] = (model_cost(m, v[PROMPT], v[COMPLETION]), model_cost(m, v[PROMPT], v[COMPLETION], v[CACHED]))
        lines.append(line)
    return lines


def table(lines: list[dict], models: list[str]) -> str:
    head = "| stage | calls | prompt | cached | completion | " + " | ".join(f"{m} ($)" for m in models) + " |"
    rows = [head, "|" + "---|" * (5 + len(models))]
    for x in lines:
        dollars = [
            "unpriced" if x[m][0] is None else f"{x[m][0]:.4f} / {x[m][1]:.4f}" for m in models
        ]  # nothing cached / measured hits cached
        rows.append(
            f"| {x['stage']} | {x['calls']} | {x['prompt']:,} | {x['cached']:,} | {x['completion']:,} | "
            + " | ".join(dollars)
            + " |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", help="a JSON file of bench_tokens rows")
    parser.add_argument("--preset", default="eco")
    parser.add_argument("--cuts", default="on", help="the row's prompt-cut setting (bench_tokens' `cuts`)")
    parser.add_argument("--models", default="gpt-4.1-mini,claude-haiku-4-5", help="comma-separated LiteLLM names")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    rows = json.loads(Path(args.rows).read_text(encoding="utf-8"))
    found = [r for r in rows if r["preset"] == args.preset and r["cuts"] == args.cuts]
    if not found:
        have = ", ".join(sorted({f"{r['preset']}/{r['cuts']}" for r in rows}))
        parser.error(f"no row for preset {args.preset!r} with cuts {args.cuts!r} in {args.rows}; it has {have}")
    row = found[0]
    print(
        f"{args.preset} ({args.cuts}): {row['nodes']} nodes, {row['calls']} LM calls, {row['seconds']:.0f} s, "
        f"status {row['status']}; cached {row['cached'] / row['prompt']:.0%} of prompt tokens"
    )
    print(table(priced(row, models), models))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
