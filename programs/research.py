"""DeepResearch: the recursive depth x breadth research program (spec 000 §3, stages of spec 001)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Any

import dspy

from programs.artifacts import Failure, Node, Report, as_source
from programs.assessor import Assessor
from programs.citations import CitationRegistry, render_references, renumber_citations
from programs.config import ResearchConfig
from programs.enricher import Enricher
from programs.events import EventHandler, EventLog
from programs.extractor import Extractor
from programs.merger import NO_INFORMATION, Merger
from programs.planner import Planner
from programs.stage import run_sync
from programs.usage import UsageMeter, metered
from programs.writer import Writer
from retrievers.types import Hit, Retriever
from signatures.types import Finding, Learning, Task

logger = logging.getLogger(__name__)

STAGES = ("planner", "assessor", "extractor", "merger", "enricher", "writer")


class Shared:
    """Holds an object a program uses but must not copy or save (a retriever with a large index).

    Optimizers deep-copy programs; this keeps every copy pointing at the same retriever.
    """

    def __init__(self, obj: Any):
        self.obj = obj

    def __deepcopy__(self, memo):
        return self


async def search(retriever: Retriever, query: str, k: int) -> list[Hit]:
    if hasattr(retriever, "asearch"):
        return await retriever.asearch(query, k)
    return await asyncio.to_thread(retriever.search, query, k)


def tree_size(config: ResearchConfig) -> tuple[int, int]:
    """(searches, query-generation calls) of a full tree: spec 000 §3.4's S and G."""
    searches, generations, width, level_breadth = 0, 0, 1, config.breadth
    for _ in range(config.depth):
        if level_breadth <= 0:
            break
        generations += width
        width *= level_breadth
        searches += width
        level_breadth = config.next_breadth(level_breadth)
    return searches, generations


@dataclass
class _Run:
    """Everything that belongs to one run, kept off the module so a program can run concurrently."""

    question: str
    config: ResearchConfig
    events: EventLog
    registry: CitationRegistry = field(default_factory=CitationRegistry)
    meter: UsageMeter = field(default_factory=UsageMeter)
    slots: asyncio.Semaphore | None = None
    searches: int = 0
    failures: int = 0
    invented_citations: int = 0
    is_stopped: bool = False
    stop_reason: str = ""


class DeepResearch(dspy.Module):
    """Plans tasks, researches each as a node of a recursive tree, and writes a cited report.

    Every node retrieves, assesses relevance, extracts cited learnings, merges them and asks for
    follow-up tasks; children recurse with depth - 1 and the next breadth (ceil(b/2) by default).
    Predictors are created once here and shared by all nodes, so `named_predictors()` lists each
    stage once whatever the depth.

    Args:
        retriever: Any object with `search(query, k)` (and optionally `asearch`) returning hits.
        config: Tree shape and node settings; `depth` and `breadth` override it when given.
        offline: Use the deterministic extractive stages of `programs.offline` instead of an LM.
        lms: Per-stage LMs, keyed by stage attribute (`planner`, `assessor`, `extractor`, `merger`,
            `enricher`, `writer`); other stages use the LM in `dspy.settings`.
        on_event: Called with every progress `Event` of a run.

    Example:
        >>> program = DeepResearch(retriever=BM25Retriever(load_corpus("scifact")), depth=2, breadth=3)  # doctest: +SKIP
        >>> out = program(question="Does vitamin D reduce fracture risk?")                           # doctest: +SKIP
        >>> out.markdown, out.references, out.tree, out.usage                                         # doctest: +SKIP
    """

    def __init__(self, retriever: Retriever, config: ResearchConfig | None = None, *, depth: int | None = None,
                 breadth: int | None = None, offline: bool = False, lms: dict[str, Any] | None = None,
                 on_event: EventHandler | None = None):
        super().__init__()
        if not hasattr(retriever, "search"):
            raise TypeError(f"retriever must have a search(query, k) method, got {type(retriever).__name__}")
        config = config or ResearchConfig()
        overrides = {k: v for k, v in {"depth": depth, "breadth": breadth}.items() if v is not None}
        self.config = replace(config, **overrides) if overrides else config
        self._retriever = Shared(retriever)
        self.is_offline = offline
        self.on_event = on_event
        if offline:
            from programs.offline import offline_stages

            stages = offline_stages(retriever, self.config)
        else:
            stages = {"planner": Planner(), "assessor": Assessor(keep_uncertain=self.config.keep_uncertain),
                      "extractor": Extractor(max_learnings=self.config.max_learnings), "merger": Merger(),
                      "enricher": Enricher(), "writer": Writer()}
        self.planner, self.assessor, self.extractor = stages["planner"], stages["assessor"], stages["extractor"]
        self.merger, self.enricher, self.writer = stages["merger"], stages["enricher"], stages["writer"]
        for name, lm in (lms or {}).items():
            if name not in STAGES:
                raise ValueError(f"unknown stage {name!r} in lms; choose from: {', '.join(STAGES)}")
            getattr(self, name).set_lm(lm)

    @property
    def retriever(self) -> Retriever:
        return self._retriever.obj

    def forward(self, question: str) -> dspy.Prediction:
        return run_sync(self.aforward(question=question))

    async def aforward(self, question: str) -> dspy.Prediction:
        """Researches `question` and returns a Prediction carrying the `Report` fields and `report` itself."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question is empty; pass the research question as a non-empty string")
        question = question.strip()
        run = _Run(question=question, config=self.config, events=EventLog(self.on_event),
                   slots=asyncio.Semaphore(self.config.max_concurrency))
        with metered(run.meter):
            report = await self._run(run)
        return dspy.Prediction(report=report, **{k: getattr(report, k) for k in report.__dataclass_fields__})

    async def _run(self, run: _Run) -> Report:
        config = run.config
        max_searches, _ = tree_size(config)
        run.events.emit("run_start", counts={"max_searches": max_searches, "depth": config.depth,
                                             "breadth": config.breadth})
        try:
            tasks = (await self.planner.acall(question=run.question, known=[], max_tasks=config.breadth)).tasks
        except Exception as err:  # recorded, and the report is still written
            self._fail(run, "root", "plan", err)
            tasks = []
        queries = [t.query for t in tasks]
        roots = await asyncio.gather(*[
            self._node(run, task, str(i + 1), depth_left=config.depth, breadth=config.breadth,
                       siblings=queries[:i] + queries[i + 1:])
            for i, task in enumerate(tasks)
        ])
        return await self._report(run, tuple(roots))

    async def _node(self, run: _Run, task: Task, node_id: str, depth_left: int, breadth: int,
                    siblings: list[str]) -> Node:
        node = Node(node_id=node_id, depth=run.config.depth - depth_left + 1, breadth=breadth, query=task.query,
                    goal=task.goal)
        child_breadth = run.config.next_breadth(breadth)
        child_tasks: list[Task] = []
        stage = "search"
        async with run.slots:
            if run.is_stopped:  # checked once a slot is free: the run may have stopped while this node waited
                run.events.emit("node_end", node_id=node_id, message="skipped")
                return replace(node, status="skipped")
            run.events.emit("node_start", node_id=node_id, message=task.query)
            try:
                hits = await search(self.retriever, task.query, run.config.hits_per_query)
                run.searches += 1
                sources = [as_source(h, run.registry.register(h.doc), run.config.passage_chars) for h in hits]
                node = replace(node, retrieved_ids=tuple(h.doc.doc_id for h in hits))
                stage = "assess"
                assessed = await self.assessor.acall(task=task, sources=sources, scores=[h.score for h in hits])
                doc_of = {s.source_id: h.doc.doc_id for s, h in zip(sources, hits)}
                kept = assessed.kept[: run.config.max_passages]
                node = replace(node, relevant_ids=tuple(doc_of[s.source_id] for s in assessed.kept))
                stage = "extract"
                extracted = await self.extractor.acall(question=run.question, task=task, sources=kept)
                run.invented_citations += extracted.invented
                node = replace(node, learnings=tuple(extracted.learnings), follow_ups=tuple(extracted.follow_ups))
                stage = "merge"
                merged = await self.merger.acall(task=task, learnings=extracted.learnings)
                node = replace(node, summary=merged.summary)
                if depth_left > 1 and child_breadth > 0 and not run.is_stopped:
                    stage = "enrich"
                    child_tasks = (await self.enricher.acall(
                        question=run.question, focus=task.query, summary=merged.summary,
                        open_questions=list(extracted.follow_ups), sibling_queries=siblings,
                        max_tasks=child_breadth)).tasks
            except Exception as err:  # a failing branch is recorded on its node; the run goes on
                failure = self._fail(run, node_id, stage, err)
                run.events.emit("node_end", node_id=node_id, message="failed")
                return replace(node, status="failed", error=failure)
            run.events.emit("node_end", node_id=node_id, message="done",
                            counts={"hits": len(node.retrieved_ids), "relevant": len(node.relevant_ids),
                                    "learnings": len(node.learnings), "children": len(child_tasks)})
        queries = [t.query for t in child_tasks]
        children = await asyncio.gather(*[
            self._node(run, t, f"{node_id}.{i + 1}", depth_left - 1, child_breadth, queries[:i] + queries[i + 1:])
            for i, t in enumerate(child_tasks)
        ])
        return replace(node, children=tuple(children))

    def _fail(self, run: _Run, node_id: str, stage: str, err: Exception) -> Failure:
        failure = Failure(stage=stage, error_type=type(err).__name__, message=str(err).splitlines()[0][:500] if str(err) else "")
        run.failures += 1
        logger.warning("node %s failed in %s: %s: %s", node_id, stage, failure.error_type, failure.message)
        run.events.emit("failure", node_id=node_id, stage=stage, message=f"{failure.error_type}: {failure.message}")
        if run.failures > run.config.max_failures and not run.is_stopped:
            run.is_stopped = True
            run.stop_reason = f"more than {run.config.max_failures} failures"
            run.events.emit("budget", message=f"stopping: {run.stop_reason}")
        return failure

    async def _report(self, run: _Run, roots: tuple[Node, ...]) -> Report:
        nodes = [n for r in roots for n in r.walk()]
        findings = [Finding(query=n.query, summary=n.summary) for n in nodes
                    if n.status == "done" and n.learnings and n.summary != NO_INFORMATION]
        learnings = tuple({x.text: x for n in nodes for x in n.learnings}.values())  # first-seen order, exact dedup
        write_failed = False
        if findings:
            try:
                body = (await self.writer.acall(question=run.question, findings=findings)).report
            except Exception as err:
                self._fail(run, "root", "write", err)
                write_failed = True
                body = fallback_report(run.question, findings)
        else:
            body = f"## {run.question}\n\nThe search found no relevant evidence for this question in the corpus."
        renumbered = renumber_citations(body, run.registry)
        failed = sum(n.status == "failed" for n in nodes)
        notes = []
        if failed:
            notes.append(f"{failed} of {len(nodes)} research branches failed; their errors are recorded in the trace.")
        if write_failed:
            notes.append("The writer failed, so this report lists the merged findings as they are.")
        if run.is_stopped:
            notes.append(f"The run stopped early ({run.stop_reason}); this report covers what was gathered before.")
        markdown = renumbered.markdown
        if notes:
            markdown += "\n\n" + "\n".join(f"> Note: {n}" for n in notes)
        markdown += "\n\n" + render_references(renumbered.references) + "\n"
        stats = {
            "nodes": len(nodes), "searches": run.searches, "failed_nodes": failed,
            "skipped_nodes": sum(n.status == "skipped" for n in nodes), "learnings": len(learnings),
            "citations": len(renumbered.references), "dropped_citations": renumbered.dropped,
            "invented_citations": run.invented_citations, "registered_sources": len(run.registry),
            "stopped": run.stop_reason or None, "offline": self.is_offline,
        }
        run.events.emit("run_end", counts=dict(stats))
        return Report(question=run.question, markdown=markdown, references=renumbered.references,
                      learnings=learnings, tree=roots, usage=run.meter.snapshot(), stats=stats,
                      events=tuple(run.events.events))


def fallback_report(question: str, findings: list[Finding]) -> str:
    """The merged findings under their queries, used when the writer cannot produce a report."""
    parts = [f"## {question}"]
    parts += [f"### {f.query}\n\n{f.summary}" for f in findings]
    return "\n\n".join(parts)


__all__ = ["DeepResearch", "Learning", "run_sync", "tree_size"]
