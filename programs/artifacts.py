"""Artifacts the programs assemble from stage outputs. All frozen and JSON round-trippable."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from retrievers.types import Hit
from signatures.types import Learning, Source, Task


def as_source(hit: Hit, source_id: str, max_chars: int = 2000) -> Source:
    """The LM's view of a hit: id, title and (truncated) text, no scores."""
    return Source(source_id=source_id, title=hit.doc.title, text=hit.doc.text[:max_chars])


@dataclass(frozen=True)
class Failure:
    """What went wrong in one stage of one node."""

    stage: str
    error_type: str
    message: str
    cause: str = ""  # one line naming the cause and the fix (programs.runtime.lm.explain), secrets redacted


@dataclass(frozen=True)
class Node:
    """One search of the research tree and everything it produced.

    `notes` records what went wrong without stopping the node: a reply cut at its token limit, a reply
    that did not parse in the first format and was asked again, a search that fell back to the question.
    `status` is `done`, `failed` (an error stopped the node; see `error`), `skipped` (the run
    stopped before the node started) or `pruned`.
    """

    node_id: str
    depth: int
    breadth: int
    query: str
    goal: str
    retrieved_ids: tuple[str, ...] = ()
    relevant_ids: tuple[str, ...] = ()
    learnings: tuple[Learning, ...] = ()
    follow_ups: tuple[str, ...] = ()
    summary: str = ""
    children: tuple["Node", ...] = ()
    status: str = "done"
    error: Failure | None = None
    notes: tuple[str, ...] = ()

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id, "depth": self.depth, "breadth": self.breadth,
            "query": self.query, "goal": self.goal,
            "retrieved_ids": list(self.retrieved_ids), "relevant_ids": list(self.relevant_ids),
            "learnings": [x.model_dump() for x in self.learnings], "follow_ups": list(self.follow_ups),
            "summary": self.summary, "status": self.status,
            "error": asdict(self.error) if self.error else None, "notes": list(self.notes),
            "children": [c.to_dict() for c in self.children],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Node":
        return cls(
            node_id=d["node_id"], depth=d["depth"], breadth=d["breadth"], query=d["query"], goal=d["goal"],
            retrieved_ids=tuple(d["retrieved_ids"]), relevant_ids=tuple(d["relevant_ids"]),
            learnings=tuple(Learning(**x) for x in d["learnings"]), follow_ups=tuple(d["follow_ups"]),
            summary=d["summary"], status=d["status"],
            error=Failure(**d["error"]) if d.get("error") else None, notes=tuple(d.get("notes", ())),
            children=tuple(cls.from_dict(c) for c in d["children"]),
        )


@dataclass(frozen=True)
class Reference:
    """One entry of a report's reference list."""

    number: int
    source_id: str
    doc_id: str
    title: str
    year: int | None = None
    url: str | None = None

    def render(self) -> str:
        year = f" ({self.year})" if self.year else ""
        where = self.url or f"doc {self.doc_id}"
        title = (self.title or self.doc_id).rstrip(". ")
        return f"[{self.number}] {title}{year}. {where}"


@dataclass(frozen=True)
class StageUsage:
    """LM requests of one stage: `calls` answered, `failed` requests that raised (auth, transport,
    timeout...), `fallbacks` predictor calls whose first reply did not parse and were asked again in
    JSON, `parse_failures` predictor calls with no parseable reply at all, `truncated` replies cut at
    the stage's `max_tokens`."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: int = 0
    fallbacks: int = 0
    parse_failures: int = 0
    truncated: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Report:
    """The result of a research run.

    Attributes:
        question: The question researched.
        markdown: The report, citations renumbered [1]..[n], ending with its References list.
        references: The list behind the citation numbers, in order of first use.
        learnings: Every learning of the tree, with the source ids it rests on, in tree order.
        tree: The research tree (roots are the planned tasks).
        usage: LM calls and tokens per stage.
        stats: Counts (nodes, searches, failed branches, dropped citations...).
        events: Progress events of the run, in order.
        status: `done`, or `failed` when the run produced nothing because of failures (no search ran, or
            every branch failed); the markdown then says so in its first line.
        error: For a failed run, one line naming the cause and the fix.
    """

    question: str
    markdown: str
    references: tuple[Reference, ...]
    learnings: tuple[Learning, ...]
    tree: tuple[Node, ...]
    usage: dict[str, StageUsage] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    events: tuple[Any, ...] = ()
    status: str = "done"
    error: str | None = None

    def nodes(self) -> list[Node]:
        return [n for root in self.tree for n in root.walk()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question, "markdown": self.markdown,
            "references": [asdict(r) for r in self.references],
            "learnings": [x.model_dump() for x in self.learnings],
            "tree": [n.to_dict() for n in self.tree],
            "usage": {k: asdict(v) for k, v in self.usage.items()},
            "stats": dict(self.stats),
            "events": [asdict(e) for e in self.events],
            "status": self.status, "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Report":
        from programs.runtime.events import Event

        return cls(
            question=d["question"], markdown=d["markdown"],
            references=tuple(Reference(**r) for r in d["references"]),
            learnings=tuple(Learning(**x) for x in d["learnings"]),
            tree=tuple(Node.from_dict(n) for n in d["tree"]),
            usage={k: StageUsage(**v) for k, v in d["usage"].items()},
            stats=dict(d["stats"]), events=tuple(Event(**e) for e in d.get("events", [])),
            status=d.get("status", "done"), error=d.get("error"),
        )


__all__ = ["Failure", "Node", "Reference", "Report", "StageUsage", "Task", "as_source"]
