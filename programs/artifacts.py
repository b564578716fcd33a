"""Artifacts the programs assemble from stage outputs. All frozen and JSON round-trippable."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

from deepresearch.programs.citing.provenance import SentenceProvenance, sentence_provenance
from deepresearch.programs.reference import Reference, _reference_dict
from deepresearch.programs.runtime.text import shorten
from deepresearch.retrievers.passages import clip_sentences
from deepresearch.retrievers.types import Hit
from deepresearch.signatures.types import Learning, Source

NodeStatus = Literal[
    "pending",  # planned, not started (a node's status only while the run works)
    "running",  # holds a slot, or waits for its children (only while the run works)
    "done",  # finished its work
    "failed",  # an error stopped it; `Node.error` says where and why
    "skipped",  # the run stopped before it started
    "pruned",  # stopped by the parallel strategy's monitor or depth policy
    "cancelled",  # stopped while it ran: a budget, the deadline or an interrupt
]
NODE_STATUSES: tuple[str, ...] = get_args(NodeStatus)
FINAL_STATUSES = ("done", "failed", "skipped", "pruned", "cancelled")

RunStatus = Literal[
    "done",  # the run finished (possibly stopped early by a budget or the deadline; see stats.stopped)
    "failed",  # nothing was researched because of failures (no search ran, every branch failed, no LM
    # reply was received, or no hit was judged)
    "partial",  # some hits were left unjudged (deadline, budget, failures); the report covers the rest
    "interrupted",  # a signal or the caller interrupted it; the report covers what was done before
]
# What a run folder records of its run (`run.json`; `trace.json` too when the run raised): the RunStatus once
# the run returned, `running` while it works, `error` when it raised before a report existed.
FolderStatus = Literal[RunStatus, "running", "error"]
FOLDER_STATUSES: tuple[str, ...] = get_args(FolderStatus)
RUNNING: FolderStatus = "running"
RAISED: FolderStatus = "error"


EventKind = Literal[
    "run_start",  # counts: the run's shape (strategy, depth, breadth, schedule)
    "node_planned",  # a node was added to the tree; it has not started (message: its query)
    "node_start",  # a node got its slot and began its own research
    "node_end",  # a node left its lifecycle; message: its final status (a NodeStatus)
    "stage_end",  # a step worth showing inside a node or a round (selection, deepen decision, round)
    "failure",  # an error was recorded on a node (stage and message say where and what)
    "fallback",  # a stage's answer was replaced by a stated fallback (e.g. the question as the plan)
    "budget",  # a budget, deadline or failure limit stopped the run, or running work was cancelled
    "prune",  # a subtree was stopped by the parallel strategy's monitor or depth policy
    "interrupt",  # the run was interrupted (a signal, or the caller's interrupt event)
    "run_end",  # message: the run's status (a RunStatus); counts: its stats
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)


@dataclass(frozen=True)
class Event:
    """Something that happened during a run, `elapsed_s` seconds after it started."""

    kind: EventKind
    node_id: str = ""
    stage: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    elapsed_s: float = 0.0


def as_source(hit: Hit, source_id: str, max_chars: int = 2000) -> Source:
    """The LM's view of a hit: id, title and text (its whole sentences within `max_chars`), no scores.

    A passage of a full-text paper (`deepresearch.retrievers.passages`) says which: "Title (passage 3 of 12)".
    """
    doc, title = hit.doc, hit.doc.title
    meta = doc.metadata or {}
    if "paper_id" in meta and meta.get("passage"):
        title = f"{title} (passage {meta['passage']} of {meta.get('passages') or '?'})"
    return Source(source_id=source_id, title=title, text=clip_sentences(doc.text, max_chars))


@dataclass(frozen=True)
class Failure:
    """What went wrong in one stage of one node."""

    stage: str
    error_type: str
    message: str
    cause: str = ""  # one line naming the cause and the fix (deepresearch.programs.lm.models.explain), secrets redacted


@dataclass(frozen=True)
class Node:
    """One search of the research tree and everything it produced.

    `notes` records what went wrong without stopping the node: a reply cut at its token limit, a reply
    that did not parse in the first format and was asked again, a search that fell back to the question.
    `status` is a `NodeStatus`; in a finished run's report it is one of FINAL_STATUSES.
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
    children: tuple[Node, ...] = ()
    status: NodeStatus = "pending"
    error: Failure | None = None
    notes: tuple[str, ...] = ()

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "depth": self.depth,
            "breadth": self.breadth,
            "query": self.query,
            "goal": self.goal,
            "retrieved_ids": list(self.retrieved_ids),
            "relevant_ids": list(self.relevant_ids),
            "learnings": [x.model_dump() for x in self.learnings],
            "follow_ups": list(self.follow_ups),
            "summary": self.summary,
            "status": self.status,
            "error": asdict(self.error) if self.error else None,
            "notes": list(self.notes),
            "children": [c.to_dict() for c in self.children],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        return cls(
            node_id=d["node_id"],
            depth=d["depth"],
            breadth=d["breadth"],
            query=d["query"],
            goal=d["goal"],
            retrieved_ids=tuple(d["retrieved_ids"]),
            relevant_ids=tuple(d["relevant_ids"]),
            learnings=tuple(Learning(**x) for x in d["learnings"]),
            follow_ups=tuple(d["follow_ups"]),
            summary=d["summary"],
            status=d["status"],
            error=Failure(**d["error"]) if d.get("error") else None,
            notes=tuple(d.get("notes", ())),
            children=tuple(cls.from_dict(c) for c in d["children"]),
        )


@dataclass(frozen=True)
class StageUsage:
    """LM requests of one stage: `calls` answered, `failed` requests that raised (auth, transport,
    timeout...), `fallbacks` predictor calls whose first reply did not parse and were asked again in
    JSON, `parse_failures` predictor calls with no parseable reply at all, `truncated` replies cut at
    the stage's `max_tokens`. `cached_tokens`: of `prompt_tokens`, those the server says it read from its
    prompt cache (OpenAI, Anthropic, vLLM and llama-server report them; 0 where none is reported)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: int = 0
    fallbacks: int = 0
    parse_failures: int = 0
    truncated: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0  # wall time of the stage's predictor calls, summed (concurrent calls overlap)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class RunStats:
    """What a research run did, in counts. Strategy-specific fields stay at their defaults elsewhere.

    Attributes:
        nodes: Nodes of the tree, whatever their status; `failed_nodes` ... `resumed_nodes` split them.
        searches: Searches run (restored nodes' searches are not run again, nor counted).
        learnings: Distinct learnings of the tree.
        citations: References of the report; `dropped_citations` are ids the writer cited that name no
            retrieved document, `invented_citations` sentence numbers the extractor invented (dropped at extraction).
        registered_sources: Documents given a source id (every retrieved document).
        stopped: Why research stopped early (a budget, the deadline, too many failures, an interrupt).
        lm_calls, tokens, cost: LM requests, tokens and US dollars (None when a model has no known price).
        failed_requests, parse_failures, format_fallbacks, truncated_replies: LM trouble, summed over stages.
        plan_fallback, plan_topped_up: The root plan failed (the question was searched instead), or was
            shorter than `breadth` (the question was added).
        root_notes: Notes of LM calls made outside any node (planning, writing).
        retries: Retried LM requests and searches.
        tree_s, total_s: Seconds of research, and of the whole run.
        lm_busy_s: Seconds of the run in which at least one LM request was in flight; over `total_s`,
            the share of the run the LM worked.
        turns, turns_stop, passages_examined, extraction_batches: `hero` only.
        pruned, wasted_speculative, evaluations: `parallel` only (pruned nodes by reason).
        restored_citations, lost_citations, stray_citations: Citations of learnings a merge or enrichment
            paragraph lost (restored by appending the learning; or counted, when the learning kept others),
            and citations it made of no input (removed).
        uncited_drafts: Writer drafts that cited nothing although cited learnings existed (asked again once,
            then replaced by the fallback report).
        verification: What the verify stage did: its policy and its counts of checked sentences by verdict
            and by action (`Report.verdicts` has each sentence).
        twin_answers: Calls whose LM reply was unusable (nothing parsed after the retry; a gathering plan
            with no valid action in round 1), answered by the stage's offline twin instead, by stage.
    """

    nodes: int = 0
    searches: int = 0
    failed_nodes: int = 0
    skipped_nodes: int = 0
    cancelled_nodes: int = 0
    pruned_nodes: int = 0
    resumed_nodes: int = 0
    learnings: int = 0
    citations: int = 0
    dropped_citations: int = 0
    invented_citations: int = 0
    registered_sources: int = 0
    stopped: str | None = None
    offline: bool = False
    strategy: str = "eco"
    schedule: str = "async"
    lm_calls: int = 0
    tokens: int = 0
    cost: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    failed_requests: int = 0
    parse_failures: int = 0
    format_fallbacks: int = 0
    truncated_replies: int = 0
    plan_fallback: bool = False
    plan_topped_up: bool = False
    root_notes: tuple[str, ...] = ()
    retries: dict[str, int] = field(default_factory=dict)
    tree_s: float | None = None
    total_s: float | None = None
    lm_busy_s: float | None = None
    turns: int = 0
    turns_stop: str | None = None
    passages_examined: int = 0
    extraction_batches: int = 0
    pruned: dict[str, int] = field(default_factory=dict)
    wasted_speculative: int = 0
    evaluations: int = 0
    restored_citations: int = 0
    lost_citations: int = 0
    stray_citations: int = 0
    uncited_drafts: int = 0
    verification: dict[str, Any] = field(default_factory=dict)
    twin_answers: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["root_notes"] = list(self.root_notes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunStats:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if "root_notes" in values:
            values["root_notes"] = tuple(values["root_notes"])
        return cls(**values)


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
        stats: What the run did, in counts (`RunStats`).
        events: Progress events of the run, in order.
        status: A `RunStatus`: `done`; `failed` when the run produced nothing because of failures (no
            search ran, every branch failed, no LM reply was received, or no hit was judged); `partial` when
            hits were left unjudged but others were; `interrupted` when a signal or the caller stopped it.
            The markdown's first line says when it is not `done`.
        error: For a failed or interrupted run, one line naming the cause (and the fix).
        answer: The short cited answer (answer mode), numbered like the report; empty when not asked for.
        taxonomy: The TaxoBench tree of the papers the run judged relevant (taxonomy mode), else None.
        gathered: What the gathering loop of the `gather` strategy did (its rounds, subqueries and
            selected papers, as `GatherResult.to_dict()`), else None.
        clarifications: The clarifying questions asked before research and the user's answers
            (`{"question": ..., "answer": ...}`), folded into the research brief.
        verdicts: The verify stage's verdict on each checked sentence of the draft: the sentence, the ids
            of the passages it was judged against, the verdict, the action taken and what shipped.
        passages: The text of every passage the report cites, by source id (what `report.html` shows
            behind each citation); empty for a report from an older trace.
    """

    question: str
    markdown: str
    references: tuple[Reference, ...]
    learnings: tuple[Learning, ...]
    tree: tuple[Node, ...]
    usage: dict[str, StageUsage] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    events: tuple[Any, ...] = ()
    status: RunStatus = "done"
    error: str | None = None
    answer: str = ""
    taxonomy: dict[str, Any] | None = None
    gathered: dict[str, Any] | None = None
    clarifications: tuple[dict[str, str], ...] = ()
    verdicts: tuple[dict[str, Any], ...] = ()
    passages: dict[str, str] = field(default_factory=dict)

    def nodes(self) -> list[Node]:
        return [n for root in self.tree for n in root.walk()]

    def __repr__(self) -> str:  # one line of counts (the dataclass repr of a run ran to 80 KB)
        return (
            f"Report({shorten(self.question, 60)!r}, status={self.status}, {len(self.references)} references, "
            f"{len(self.learnings)} learnings, {len(self.nodes())} nodes, {self.stats.lm_calls} LM calls)"
        )

    def provenance(self) -> tuple[SentenceProvenance, ...]:
        """Each sentence of the report body with the references, source ids and learnings behind its citations."""
        return sentence_provenance(self.markdown, self.references, self.learnings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "markdown": self.markdown,
            "references": [_reference_dict(r) for r in self.references],
            "learnings": [x.model_dump() for x in self.learnings],
            "tree": [n.to_dict() for n in self.tree],
            "usage": {k: asdict(v) for k, v in self.usage.items()},
            "stats": self.stats.to_dict(),
            "events": [asdict(e) for e in self.events],
            "status": self.status,
            "error": self.error,
            "answer": self.answer,
            "taxonomy": self.taxonomy,
            "gathered": self.gathered,
            "clarifications": [dict(c) for c in self.clarifications],
            "verdicts": [dict(v) for v in self.verdicts],
            "passages": dict(self.passages),
            "provenance": [p.to_dict() for p in self.provenance()],  # derived; provenance() rebuilds it after from_dict
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        return cls(
            question=d["question"],
            markdown=d["markdown"],
            references=tuple(Reference.from_dict(r) for r in d["references"]),
            learnings=tuple(Learning(**x) for x in d["learnings"]),
            tree=tuple(Node.from_dict(n) for n in d["tree"]),
            usage={k: StageUsage(**v) for k, v in d["usage"].items()},
            stats=RunStats.from_dict(d["stats"]),
            events=tuple(Event(**e) for e in d.get("events", [])),
            status=d.get("status", "done"),
            error=d.get("error"),
            answer=d.get("answer", ""),
            taxonomy=d.get("taxonomy"),
            gathered=d.get("gathered"),
            clarifications=tuple(dict(c) for c in d.get("clarifications", ())),
            verdicts=tuple(dict(v) for v in d.get("verdicts", ())),
            passages=dict(d.get("passages") or {}),
        )
