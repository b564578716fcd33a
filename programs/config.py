"""Run configuration and named presets. Holds no secrets, so it is always safe to print or save."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

BREADTH_RULES = ("ceil_half", "floor_half")


@dataclass(frozen=True)
class ResearchConfig:
    """How large the research tree grows and how each node works.

    Args:
        depth: Levels of search along any root-to-leaf path (1 = only the planned tasks).
        breadth: Tasks planned at the root; deeper levels get next_breadth() of their parent's.
        breadth_rule: `ceil_half` (b -> ceil(b/2), never 0; spec 000 §3.2) or `floor_half` (b // 2;
            a level whose breadth reaches 0 is not run).
        hits_per_query: Documents retrieved per search.
        max_passages: Passages (relevant hits) given to the extractor per node.
        max_learnings: Learnings kept per node.
        keep_uncertain: Pass papers judged `uncertain` on to extraction.
        max_concurrency: Nodes doing their own work at the same time, across the whole tree.
        max_failures: Failed nodes tolerated before the run stops and writes what it has.
        passage_chars: Characters of each document shown to the LM.
    """

    depth: int = 2
    breadth: int = 3
    breadth_rule: str = "ceil_half"
    hits_per_query: int = 10
    max_passages: int = 8
    max_learnings: int = 5
    keep_uncertain: bool = True
    max_concurrency: int = 8
    max_failures: int = 5
    passage_chars: int = 2000

    def __post_init__(self):
        if self.depth < 1 or self.breadth < 1:
            raise ValueError(f"depth and breadth must be >= 1, got depth={self.depth}, breadth={self.breadth}")
        if self.breadth_rule not in BREADTH_RULES:
            raise ValueError(f"unknown breadth_rule {self.breadth_rule!r}; choose one of: {', '.join(BREADTH_RULES)}")
        for name in ("hits_per_query", "max_passages", "max_learnings", "max_concurrency", "passage_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_failures < 0:
            raise ValueError(f"max_failures must be >= 0, got {self.max_failures}")

    def next_breadth(self, breadth: int) -> int:
        """Breadth of the level below one with `breadth` tasks."""
        return math.ceil(breadth / 2) if self.breadth_rule == "ceil_half" else breadth // 2


PRESETS: dict[str, ResearchConfig] = {
    "quick": ResearchConfig(depth=1, breadth=2),
    "standard": ResearchConfig(),
    "deep": ResearchConfig(depth=4, breadth=4),
}


def preset(name: str, **overrides) -> ResearchConfig:
    """A named configuration with some fields replaced.

    Raises:
        ValueError: for an unknown preset name (the message lists the known ones).
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return dataclasses.replace(PRESETS[name], **overrides)
