"""The stages' names as plain strings, for what must not load DSPy to name them: the command line's --help
(`--stage-lm`, `optimize --stage`). The registry (`registry.STAGES`) is the source; tests/test_cli_help.py
checks that these lists match it."""

from __future__ import annotations

# every stage a research program may have, in the registry's research order (`STAGES.research()`)
RESEARCH_STAGES = (
    "clarify",
    "plan",
    "assess",
    "extract",
    "merge",
    "enrich",
    "write",
    "verify",
    "answer",
    "taxonomy",
    "enrich_write",
    "breadth",
    "deepen",
    "orchestrate",
    "gather_plan",
    "gather_assess",
)
GATHER_STAGES = ("gather_plan", "gather_assess")  # the gathering program's (`STAGES.gather()`)
RECORDED_STAGES = ("extract", "merge", "enrich", "enrich_write", "write")  # `STAGES.recorded()`: --from-runs
MAX_QUESTIONS = 3  # clarifying questions asked before research; DeepResearch-Eco asks at most three
