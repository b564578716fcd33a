"""What a gathering run produces: the subquery tree, each round's searches and candidates,
the selected papers, and the run as a whole, which round-trips through JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from deepresearch.programs.artifacts import StageUsage
from deepresearch.programs.runtime.text import shorten
from deepresearch.signatures.gather import Feedback

StopReason = Literal[
    "iterations",  # every round ran
    "complete",  # the planner said the search is complete
    "no_new_subqueries",  # no valid action was left
    "single_search",  # a single-search baseline (deepresearch.programs.gather.baselines)
    "plan_failed",  # the planner's call failed; the rounds before it stand
    "budget",  # the LM call or token budget ran out
    "deadline",  # the deadline passed; the rounds finished before it stand
    "stopped",  # the research run the loop is part of stopped (too many failures)
    "interrupted",  # the research run was interrupted; the rounds finished before it stand
]


@dataclass(frozen=True)
class Subquery:
    """A node of the subquery tree; node 0 is the research question."""

    node_id: int
    parent_id: int | None
    link: str
    text: str
    iteration: int


@dataclass(frozen=True)
class Candidate:
    """A paper one search returned, its 1-based rank there and the assessor's label."""

    doc_id: str
    rank: int
    score: float
    label: str
    reason: str = ""


@dataclass(frozen=True)
class Search:
    """One tool call: an action of the plan run against the retriever, and its assessment."""

    node_id: int
    action: str
    text: str
    k: int
    offset: int
    candidates: tuple[Candidate, ...]
    feedback: str = ""
    ranking: tuple[str, ...] = ()
    error: str | None = None  # why the search or its assessment failed (the round, and the run, went on)
    rechecked: int = 0  # candidates labelled uncertain that got a second look
    browsed: int = 0  # of them, judged on passages of their full text (--full-text)
    unread: int = 0  # of them, full text wanted but not available (no link, a failed fetch): "no evidence"

    @property
    def selected(self) -> list[str]:
        return [c.doc_id for c in self.candidates if c.label == "relevant"]


@dataclass(frozen=True)
class Round:
    """One iteration: its searches, the plan's checklist and memory, and the actions the loop dropped."""

    iteration: int
    searches: tuple[Search, ...]
    checklist: str = ""
    memory: str = ""
    dropped: tuple[str, ...] = ()
    repaired: int = 0


@dataclass(frozen=True)
class Selection:
    """A selected paper, with the round and subquery that first selected it."""

    doc_id: str
    iteration: int
    node_id: int


@dataclass(frozen=True)
class GatherResult:
    """Everything one gathering run produced; round-trips through JSON with `to_dict`/`from_dict`.

    `stop_reason` is a `StopReason`; `is_failed` follows the reference: the planner declared completion
    before anything was selected, or its first plan had no valid action; and a run that stopped (a failed
    plan, a budget, the deadline) before selecting anything.
    """

    question: str
    date_constraint: str | None
    tree: tuple[Subquery, ...]
    rounds: tuple[Round, ...]
    selected: tuple[Selection, ...]
    stop_reason: StopReason
    is_failed: bool = False
    usage: dict[str, StageUsage] = field(default_factory=dict)

    def __repr__(self) -> str:  # one line of counts
        state = "failed" if self.is_failed else self.stop_reason
        return (
            f"GatherResult({shorten(self.question, 60)!r}, {len(self.rounds)} rounds, "
            f"{len(self.tree)} subqueries, {len(self.selected)} selected, stopped: {state})"
        )

    def retrieved_in(self, iteration: int) -> set[str]:
        return {c.doc_id for r in self.rounds if r.iteration == iteration for s in r.searches for c in s.candidates}

    def selected_in(self, iteration: int) -> set[str]:
        return {x.doc_id for x in self.selected if x.iteration == iteration}

    def candidates(self) -> dict[str, dict[int, int]]:
        """doc_id -> {node_id: best rank of the doc in that subquery's results}."""
        best: dict[str, dict[int, int]] = {}
        for r in self.rounds:
            for s in r.searches:
                for c in s.candidates:
                    ranks = best.setdefault(c.doc_id, {})
                    ranks[s.node_id] = min(c.rank, ranks.get(s.node_id, c.rank))
        return best

    def second_looks(self) -> dict[str, int]:
        """Second looks over the whole run: `rechecked`, `browsed` (read from the full text) and `unread`."""
        searches = [s for r in self.rounds for s in r.searches]
        return {k: sum(getattr(s, k) for s in searches) for k in ("rechecked", "browsed", "unread")}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = {k: asdict(v) for k, v in self.usage.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GatherResult:
        def search(s: dict[str, Any]) -> Search:
            candidates = tuple(Candidate(**c) for c in s["candidates"])
            return Search(**{**s, "candidates": candidates, "ranking": tuple(s.get("ranking", ()))})

        rounds = tuple(
            Round(**{**r, "searches": tuple(search(s) for s in r["searches"]), "dropped": tuple(r.get("dropped", ()))})
            for r in d["rounds"]
        )
        return cls(
            question=d["question"],
            date_constraint=d.get("date_constraint"),
            tree=tuple(Subquery(**n) for n in d["tree"]),
            rounds=rounds,
            selected=tuple(Selection(**x) for x in d["selected"]),
            stop_reason=d["stop_reason"],
            is_failed=d.get("is_failed", False),
            usage={k: StageUsage(**v) for k, v in d.get("usage", {}).items()},
        )


def feedback_text(feedback: Feedback) -> str:
    return (
        f"covered: {feedback.covered_topics} | relevant: {feedback.relevant} | "
        f"irrelevant: {feedback.irrelevant} | next: {feedback.suggestions}"
    )
