"""The stage table of docs/reference/stages.md, generated from the stage registry.

`python -m tests.stages_page --write` rewrites the table; tests/test_stage_names.py checks the page
against it, so the page lists every registered stage with the metric it is tuned on alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

from deepresearch.optimize.metrics import metric_names
from deepresearch.programs.stages.registry import STAGES, StageSpec

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "stages.md"
BEGIN, END = "<!-- stages: begin (python -m tests.stages_page --write) -->", "<!-- stages: end -->"


def tuned_alone(spec: StageSpec) -> str:
    if spec.tuning is None:
        return f"no: {spec.unscored}" if spec.unscored else "no (inside its program)"
    inputs = "recorded runs (`--from-runs`)" if spec.tuning.inputs == "recorded" else "frozen inputs"
    metrics = ", ".join(f"`{m}`" for m in metric_names(spec.tuning.target))
    return f"{metrics} on {inputs}"


def _short(cls: type | None) -> str:
    return f"`{cls.__name__}`" if cls else "—"


def table() -> str:
    rows = [
        "| Stage | Module (research / gather attribute) | Signatures | Offline twin | Strategy | Tuned alone "
        "| Output tokens | Calls left for the writer |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in STAGES:
        attrs = " / ".join(f"`{a}`" if a else "—" for a in (s.research_attr, s.gather_attr))
        module = f"inside `{s.part_of}`" if s.part_of else f"{_short(s.module)} ({attrs})" if s.module else "—"
        sigs = ", ".join(f"`{x.__name__}`" for x in s.signatures) or "—"
        strategy = {"baseline": "— (a baseline)", "step": "all (no LM)"}.get(s.kind, s.strategy or "all")
        is_lm = bool(s.signatures) and s.kind != "baseline"
        tuned = tuned_alone(s) if s.kind in ("stage", "output") else "—"
        rows.append(
            f"| `{s.name}` | {module} | {sigs} | {_short(s.offline)} | {strategy} | {tuned} | "
            f"{s.max_output_tokens if s.signatures else '—'} | {s.reserve if is_lm else '—'} |"
        )
    return "\n".join(rows)


def section() -> str:
    return f"{BEGIN}\n{table()}\n{END}"


def written() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text[text.index(BEGIN) : text.index(END) + len(END)]


if __name__ == "__main__":
    if "--write" in sys.argv:
        text = PAGE.read_text(encoding="utf-8")
        PAGE.write_text(text.replace(written(), section()), encoding="utf-8")
    else:
        print(section())
