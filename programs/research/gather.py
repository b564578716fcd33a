"""The `gather` strategy (ScholarGym's loop inside the research program): gather the papers, then research them.

ScholarGym's planner-retriever-assessor loop (`deepresearch.programs.gather.loop.GatherLoop`, the code the standalone
`Gatherer` runs) gathers the paper set on the run's scheduler: its LM calls and searches count against the
run's caps, budgets and deadline, and its failures are the run's failures. Then node i researches
subquery i of the loop's tree: its `retrieved_ids` are the papers that subquery's searches returned, its
`relevant_ids` the papers it was first to select; it extracts from those papers in batches of
`max_passages` and merges what it learned, and the report is written from the nodes as for every strategy.

The loop's result goes on the report (`Report.gathered`, so trace.json), from which
`deepresearch.eval.gather.metrics_from_trace` computes ScholarGym's metrics, and into the journal, so a resumed run
does not gather again. When the loop ran no successful search at all, the question itself is researched
as one more node, recorded as a planning fallback.

With `full_text` (`--full-text`; the run's retriever is then a `FullTextRetriever`), the loop still
searches and selects whole papers by id, through the retriever the reader wraps; its second look at an
uncertain candidate reads the paper's open-access PDF (ScholarGym's adaptive browsing), and each node
extracts from the `full_text_passages` passages of each selected paper that best match its subquery, as
the other strategies' nodes do, cited `paper#n` and listed in the references under the paper. A paper
without a readable PDF is read from its abstract. The second looks are counted in the trace
(`gathered`: `rechecked`, `browsed`, `unread` on each search) and the `gather` event.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

import dspy

from deepresearch.programs.citing.citation_guard import check_node_citations
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.gather.artifacts import Candidate, GatherResult, StopReason, Subquery
from deepresearch.programs.gather.loop import GatherLoop, papers_and_reader
from deepresearch.programs.research.strategy import question_task, research_task
from deepresearch.programs.runtime.context import NodeLife, RunContext
from deepresearch.programs.stages.merger import NO_INFORMATION
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.types import Doc, Hit
from deepresearch.signatures.types import Learning, Task

logger = logging.getLogger(__name__)

# The loop's step names (in `Search.error`) -> the stage names of the research program's vocabulary.
LOOP_STAGES = {s.loop_step: s.name for s in STAGES if s.loop_step}
JOURNAL_KEY = "gather"
TAG = "gather:"  # before round and subquery ids in events and failure records


class Gather:
    name = "gather"
    prune_reasons: tuple[str, ...] = ()  # prunes no node
    stages = STAGES.of_strategy(name)

    def planned_nodes(self, config: ResearchConfig) -> int:
        return config.gather.iterations * config.gather.max_actions  # each action adds at most one subquery

    async def research(self, ctx: RunContext) -> None:
        result, docs = await self._gather(ctx)
        plans = [(n, subquery_task(result, n)) for n in result.tree[1:]]
        tasks = [t for _, t in plans]
        if not any(s.error is None for r in result.rounds for s in r.searches):
            why = f"the gathering loop ran no successful search ({result.stop_reason}); searching the question itself"
            tasks.append(question_task(ctx, "plan_fallback", why))

        async def run(node_id: str, task: Task, release) -> None:
            sub = next((n for n, t in plans if t is task), None)
            async with ctx.node(node_id) as life:
                if not life.restored:
                    if sub is not None:  # recorded before the slot: a node the run skips still shows them
                        record_gathered(life, sub, result)
                    async with life.slot():
                        if sub is None:
                            await research_task(life, task, ctx.config.hits_per_query)
                        else:
                            await research_selected(life, task, sub, result, docs)
            release()

        await ctx.spawn(tasks, parent_id=None, level=1, breadth=len(tasks), run=run)

    async def _gather(self, ctx: RunContext) -> tuple[GatherResult, dict[str, Doc]]:
        """The loop's result and the documents it selected: from the journal on resume, else by running it."""
        saved = ctx.journal.get(JOURNAL_KEY) if ctx.journal else None
        if saved is not None:
            ctx.count(**saved.get("stats", {}))
            result = GatherResult.from_dict(saved["result"])
            ctx.gathered = result.to_dict()
            return result, {d["doc_id"]: Doc(**d) for d in saved["docs"]}
        c = ctx.config
        settings = replace(c.gather, max_k=min(c.gather.max_k, c.hits_per_query))
        host = RunHost(ctx)
        loop = GatherLoop(ctx.question, None, settings, host, tag=TAG, full_text=papers_and_reader(ctx.retriever)[1])
        try:
            stop_reason, is_failed = await loop.run()
        except asyncio.CancelledError:  # the deadline or an interrupt: the rounds finished before it stand
            cut: StopReason = "interrupted" if ctx.interrupted else "deadline"
            ctx.gathered = loop.result(cut, not loop.selected, gather_usage(ctx)).to_dict()
            raise
        result = loop.result(stop_reason, is_failed, gather_usage(ctx))
        ctx.gathered = result.to_dict()
        ctx.events.emit(
            "stage_end",
            node_id=TAG.rstrip(":"),
            stage="gather",
            message=stop_reason,
            counts={
                "rounds": len(result.rounds),
                "subqueries": len(result.tree) - 1,
                "selected": len(result.selected),
                "searches": host.searches,
                **result.second_looks(),
            },
        )
        if stop_reason == "budget":  # nothing is left for extraction: the run stops, and writes what exists
            ctx.stop(ctx.sched.exhausted() or "the LM budget ran out while gathering")
        docs = {x.doc_id: host.docs[x.doc_id] for x in result.selected}
        if ctx.journal is not None:
            ctx.journal.append(
                JOURNAL_KEY,
                "gather",
                result=result.to_dict(),
                stats={"searches": host.searches},
                docs=[doc_record(d) for d in docs.values()],
            )
        return result, docs


class RunHost:
    """The loop inside a research run: LM calls through `ctx.call` (the run's caps, rate limits and
    budgets, one call kept for the writer), searches on the run's scheduler (counted in its stats),
    failures recorded with `ctx.fail`; the loop halts when the run stopped or its budget is spent.
    Searches return whole papers: with full text, those of the retriever the reader wraps."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.events = ctx.events
        self.papers = papers_and_reader(ctx.retriever)[0]
        self.docs: dict[str, Doc] = {}  # the documents the loop's searches returned, by id
        self.searches = 0

    async def plan(self, **inputs: Any) -> dspy.Prediction:
        return await self.ctx.call(STAGES.gather_plan.name, **inputs)

    async def assess(self, **inputs: Any) -> dspy.Prediction:
        return await self.ctx.call(STAGES.gather_assess.name, **inputs)

    async def search(self, query: str, k: int, **filters: Any) -> list[Hit]:
        hits = await self.ctx.sched.search(self.papers, query, k, **filters)
        self.searches += 1
        self.ctx.count(searches=1)
        for h in hits:
            self.docs.setdefault(h.doc.doc_id, h.doc)
        return hits

    def failed(self, where: str, stage: str, err: BaseException) -> None:
        self.ctx.fail(where, LOOP_STAGES.get(stage, stage), err)

    async def rescue(self, reason: str, **inputs: Any) -> dspy.Prediction | None:
        """A research run goes on: the planner's offline twin plans the first round (counted and noted)."""
        if not self.ctx.has_twin(STAGES.gather_plan.name):
            return None
        return await self.ctx.answer_offline(STAGES.gather_plan.name, reason, **inputs)

    def halted(self) -> tuple[StopReason, str] | None:
        if self.ctx.is_stopped:
            return "stopped", self.ctx.stop_reason
        reason = self.ctx.sched.exhausted()
        return ("budget", reason) if reason else None


def subquery_task(result: GatherResult, sub: Subquery) -> Task:
    """The research task of one subquery: its text, and the checklist of the round that made it as the goal."""
    checklist = next((r.checklist for r in result.rounds if r.iteration == sub.iteration), "")
    return Task(query=sub.text, goal=checklist or f"Papers that answer: {result.question}")


def record_gathered(life: NodeLife, sub: Subquery, result: GatherResult) -> None:
    """Records on the node what subquery `sub`'s searches returned, what it was first to select, and why any
    of its searches failed."""
    searches = [s for r in result.rounds for s in r.searches if s.node_id == sub.node_id]
    retrieved = dict.fromkeys(c.doc_id for s in searches for c in s.candidates)
    life.update(
        retrieved_ids=tuple(retrieved),
        relevant_ids=tuple(x.doc_id for x in result.selected if x.node_id == sub.node_id),
        notes=life.node.notes + tuple(f"gathering: {s.error}" for s in searches if s.error),
    )


async def research_selected(
    life: NodeLife, task: Task, sub: Subquery, result: GatherResult, docs: dict[str, Doc]
) -> None:
    """Extracts from the papers subquery `sub` selected (the node's `relevant_ids`), in batches of
    `max_passages`, and merges what was learned. With full text, each paper with a readable PDF is read as
    its passages that best match the node's query (the paper stays the node's relevant id)."""
    ctx = life.ctx
    if not life.node.relevant_ids:
        return
    first: dict[str, Candidate] = {}  # doc id -> the candidate record of its first appearance under this subquery
    for s in (s for r in result.rounds for s in r.searches if s.node_id == sub.node_id):
        for c in s.candidates:
            first.setdefault(c.doc_id, c)
    hits = [Hit(doc=docs[d], score=first[d].score, rank=first[d].rank) for d in life.node.relevant_ids]
    reader = papers_and_reader(ctx.retriever)[1]
    if reader is not None:  # fetching and reading PDFs blocks: off the event loop
        hits = await asyncio.to_thread(reader.expand, task.query, hits)
    sources = life.sources(hits)
    learnings: list[Learning] = []
    follow_ups: list[str] = []
    step = ctx.config.max_passages
    for start in range(0, len(sources), step):
        out = await life.call(
            STAGES.extract.name, question=ctx.question, task=task, sources=sources[start : start + step]
        )
        life.count(invented_citations=out.invented)
        learnings += out.learnings
        follow_ups += [q for q in out.follow_ups if q not in follow_ups]
        life.update(learnings=tuple(learnings), follow_ups=tuple(follow_ups))
    merged = await life.call(STAGES.merge.name, task=task, learnings=learnings)
    life.update(summary=check_node_citations(life, STAGES.merge.name, merged.summary, learnings, empty=NO_INFORMATION))


def gather_usage(ctx: RunContext) -> dict:
    """The run's usage of the loop's stages (planning, assessing, second looks)."""
    return {k: v for k, v in ctx.meter.snapshot().items() if k.startswith("gather_")}


def doc_record(doc: Doc) -> dict[str, Any]:
    """A selected document as the journal keeps it: with its text, which a resumed run extracts from."""
    return {**vars(doc), "metadata": dict(doc.metadata)}
