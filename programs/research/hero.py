"""The `hero` strategy, after HERO: turns of isolated pipelines with submodular task selection.

Each turn the planner over-generates m·k candidate tasks (from turn 2 it sees earlier queries and
enriched summaries), `deepresearch.programs.research.selector` keeps k (α = 0.6, anchor: the question), and every kept task
runs as an isolated pipeline, a depth-1 node of the pool: batched extraction with early stopping,
merge, gap finding (k' of m·k' gaps kept with α' = 0.65, anchor: the task's query), enrichment
searches as depth-2 nodes, and an enrichment paragraph appended to the summary (S' = S + paragraph).
A pipeline sees its own documents only; its siblings reach it as query strings.
"""

from __future__ import annotations

import asyncio
import functools

from deepresearch.programs.citing.citation_guard import check_node_citations
from deepresearch.programs.citing.citations import CITATION, citation_labels
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.research.selector import select
from deepresearch.programs.research.strategy import plan_root, unseen
from deepresearch.programs.runtime.context import NodeLife, RunContext
from deepresearch.programs.runtime.scheduler import BudgetExceeded
from deepresearch.programs.stages.merger import NO_INFORMATION
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.types import Hit
from deepresearch.signatures.types import Finding, Learning, Source, Task


def is_low_yield(
    new_passages: int, new_sources: int, batch_size: int, found_before: int, mode: str, min_yield: float
) -> bool:
    """A batch is low-yield when under `min_yield` of its passages cite a new source
    (`share_of_batch`), or when its new sources are under `min_yield` of those found before
    (`relative_to_total`; the first sources found always count as productive)."""
    if mode == "relative_to_total":
        return new_sources == 0 if found_before == 0 else new_sources / found_before < min_yield
    return new_passages / batch_size < min_yield


class Hero:
    name = "hero"
    prune_reasons: tuple[str, ...] = ()  # prunes no node
    stages = STAGES.of_strategy(name)

    def planned_nodes(self, config: ResearchConfig) -> int:
        h = config.hero
        return h.turns * h.tasks_per_turn * (1 + h.enrichments)

    async def research(self, ctx: RunContext) -> None:
        """All turns; the report is written from the pipelines' enriched summaries."""
        h = ctx.config.hero
        queries: list[str] = []
        findings: list[Finding] = []
        ctx.finding_depth = 1  # enrichment nodes are inside their pipeline's summary
        for turn in range(1, h.turns + 1):
            if ctx.is_stopped:
                break
            chosen = await ctx.once(
                f"plan:turn:{turn}", functools.partial(self._plan_turn, ctx, turn, queries, findings)
            )
            if not chosen:
                ctx.count(turns_stop=f"the planner proposed no new task in turn {turn}")
                break
            turn_queries = [t.query for t in chosen]

            async def run(
                node_id: str, task: Task, release, tn=turn, tasks=chosen, turn_queries=turn_queries
            ) -> Finding | None:
                i = next(i for i, t in enumerate(tasks) if t is task)
                siblings = turn_queries[:i] + turn_queries[i + 1 :]
                return await self._pipeline(ctx, node_id, task, siblings, tn, release)

            spawned = await ctx.spawn(chosen, parent_id=None, level=1, breadth=len(chosen), run=run)
            results = await asyncio.gather(*[f for _, f in spawned], return_exceptions=True)
            queries += turn_queries
            findings += [r for r in results if isinstance(r, Finding)]
            ctx.count(turns=1)

    async def _plan_turn(self, ctx: RunContext, turn: int, queries: list[str], findings: list[Finding]) -> list[Task]:
        """m·k candidates, cut to k by submodular selection; from turn 2 the planner sees what is known."""
        h = ctx.config.hero
        if turn == 1:
            candidates = await plan_root(ctx, h.multiplier * h.tasks_per_turn)
        else:
            known = [f"Already searched: {q}" for q in queries] + [f.summary for f in findings]
            try:
                candidates = (
                    await ctx.call(
                        STAGES.plan.name, question=ctx.question, known=known, max_tasks=h.multiplier * h.tasks_per_turn
                    )
                ).tasks
            except BudgetExceeded:
                raise
            except Exception as err:
                ctx.fail("root", STAGES.plan.name, err)  # a later turn that cannot plan ends the turns
                return []
        fresh = [t for t in candidates if t.query not in queries]
        chosen = (
            [fresh[i] for i in await _select([t.query for t in fresh], ctx.question, h.tasks_per_turn, h.alpha, ctx)]
            if fresh
            else []
        )
        ctx.events.emit(
            "stage_end", stage="select", counts={"turn": turn, "candidates": len(fresh), "selected": len(chosen)}
        )
        return chosen

    async def _pipeline(
        self, ctx: RunContext, node_id: str, task: Task, siblings: list[str], turn: int, release
    ) -> Finding | None:
        """One isolated pipeline: batched extraction, merge, gaps, enrichment searches, an appended paragraph."""
        h = ctx.config.hero
        async with ctx.node(node_id) as life:
            if not life.restored:
                async with life.slot():
                    learnings, follow_ups = await extract_in_batches(life, task, h.deep_depth)
                    summary = (await life.call(STAGES.merge.name, task=task, learnings=learnings)).summary
                    summary = check_node_citations(life, STAGES.merge.name, summary, learnings, empty=NO_INFORMATION)
                    life.update(summary=summary, follow_ups=tuple(follow_ups))
                    if h.enrichments > 0 and not life.stopped():
                        gaps = (
                            await life.call(
                                STAGES.enrich.name,
                                question=ctx.question,
                                focus=task.query,
                                summary=summary,
                                open_questions=follow_ups,
                                sibling_queries=siblings,
                                max_tasks=h.multiplier * h.enrichments,
                            )
                        ).tasks
                        if len(gaps) > h.enrichments:
                            gaps = [
                                gaps[i]
                                for i in await _select(
                                    [g.query for g in gaps], task.query, h.enrichments, h.enrich_alpha, ctx
                                )
                            ]
                        life.spawned = gaps
            spawned = await ctx.spawn(
                life.spawned,
                parent_id=node_id,
                level=2,
                breadth=len(life.spawned),
                run=lambda n, t, r: self._enrichment(ctx, n, t, r),
            )
            release()
            extra = [x for _, f in spawned for x in (await f or [])]
            if extra and not life.restored and not life.stopped():  # a restored summary has its paragraph
                paragraph = (
                    await life.call(
                        STAGES.enrich_write.name, focus=task.query, summary=life.node.summary, learnings=extra
                    )
                ).paragraph
                cited = [x for m in CITATION.finditer(life.node.summary) for x in citation_labels(m)]
                paragraph = check_node_citations(life, STAGES.enrich_write.name, paragraph, extra, known=cited)
                if paragraph:
                    life.update(summary=life.node.summary + "\n\n" + paragraph)
        node = ctx.store.get(node_id)
        return Finding(query=task.query, summary=node.summary) if node.summary else None

    async def _enrichment(self, ctx: RunContext, node_id: str, task: Task, release) -> list[Learning]:
        async with ctx.node(node_id) as life:
            if not life.restored:
                async with life.slot():
                    await extract_in_batches(life, task, ctx.config.hero.shallow_depth)
        node = ctx.store.get(node_id)
        return list(node.learnings) if node.status == "done" else []


async def extract_in_batches(life: NodeLife, task: Task, depth: int) -> tuple[list[Learning], list[str]]:
    """Retrieves `depth` passages for `task` and extracts batch by batch until two low-yield batches in a row.

    Records retrieved and cited ids and the learnings on the node; returns the learnings and follow-ups.
    """
    ctx = life.ctx
    h = ctx.config.hero
    hits = (await life.search(task.query, depth))[:depth]
    life.update(retrieved_ids=tuple(x.doc.doc_id for x in hits))
    learnings: list[Learning] = []
    follow_ups: list[str] = []
    found: set[str] = set()
    cited_docs: list[str] = []
    low, batches, examined = 0, 0, 0
    pending = list(hits)
    while pending:
        batch: list[Hit] = []  # the next `batch_size` hits whose passages were not sent before (`skip_seen`)
        sources: list[Source] = []
        while pending and len(sources) < h.batch_size:
            hit = pending.pop(0)
            fresh = unseen(life, life.sources([hit]))
            batch += [hit] * len(fresh)
            sources += fresh
        if not sources:
            break
        examined += len(sources)
        out = await life.call(STAGES.extract.name, question=ctx.question, task=task, sources=sources)
        life.count(invented_citations=out.invented)
        batches += 1
        cited = {i for x in out.learnings for i in x.source_ids}
        new = cited - found
        new_passages = sum(s.source_id in new for s in sources)
        low = (
            low + 1 if is_low_yield(new_passages, len(new), h.batch_size, len(found), h.yield_mode, h.min_yield) else 0
        )
        found |= new
        learnings += out.learnings
        follow_ups += [q for q in out.follow_ups if q not in follow_ups]
        cited_docs += [x.doc.doc_id for x, s in zip(batch, sources) if s.source_id in new]
        life.update(learnings=tuple(learnings), relevant_ids=tuple(cited_docs))
        if low >= h.low_yield_patience:
            break
    life.count(passages_examined=examined, extraction_batches=batches)
    return learnings, follow_ups


async def _select(texts: list[str], anchor: str, k: int, alpha: float, ctx: RunContext) -> list[int]:
    h = ctx.config.hero
    # embedding is CPU work: off the event loop, so other pipelines keep running
    return await asyncio.to_thread(select, texts, anchor, k, alpha, h.selection, h.seed)
