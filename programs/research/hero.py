"""The `hero` strategy (spec 001 §2): turns of isolated pipelines with submodular task selection.

Each turn the planner over-generates m·k candidate tasks (from turn 2 it sees earlier queries and
enriched summaries), `programs.research.selector` keeps k (α = 0.6, anchor: the question), and every kept task
runs as an isolated pipeline, a depth-1 node of the pool: batched extraction with early stopping,
merge, gap finding (k' of m·k' gaps kept with α' = 0.65, anchor: the task's query), enrichment
searches as depth-2 nodes, and an enrichment paragraph appended to the summary (S' = S + paragraph).
A pipeline sees its own documents only; its siblings reach it as query strings.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import dspy

from programs.artifacts import Node, as_source
from programs.research.selector import select
from programs.runtime.scheduler import BudgetExceeded
from programs.runtime.stage import Stage
from programs.runtime.usage import call_predictor, set_node
from signatures.enrich import WriteEnrichment
from signatures.types import Finding, Learning, Task

logger = logging.getLogger(__name__)


class EnrichmentWriter(Stage):
    """Summary + enrichment learnings -> a paragraph to append. No LM call without learnings."""

    def __init__(self):
        super().__init__()
        self.write_enrichment = dspy.Predict(WriteEnrichment)

    async def aforward(self, focus: str, summary: str, learnings: list[Learning]) -> dspy.Prediction:
        if not learnings:
            return dspy.Prediction(paragraph="")
        out = await call_predictor("enrich_write", self.write_enrichment, focus=focus, summary=summary,
                                   learnings=learnings)
        return dspy.Prediction(paragraph=out.paragraph.strip())


def hero_stages(offline: bool) -> dict[str, Stage]:
    if offline:
        from programs.stages.offline import OfflineEnrichmentWriter

        return {"enrichment_writer": OfflineEnrichmentWriter()}
    return {"enrichment_writer": EnrichmentWriter()}


def is_low_yield(new_passages: int, new_sources: int, batch_size: int, found_before: int, mode: str,
                 min_yield: float) -> bool:
    """Spec 001 §4.2: a batch is low-yield when under `min_yield` of its passages cite a new source
    (`share_of_batch`), or when its new sources are under `min_yield` of those found before
    (`relative_to_total`; the first sources found always count as productive)."""
    if mode == "relative_to_total":
        return new_sources == 0 if found_before == 0 else new_sources / found_before < min_yield
    return new_passages / batch_size < min_yield


async def extract_in_batches(program, run, task: Task, node: Node, depth: int) -> tuple[Node, list[Learning], list[str]]:
    """Retrieves `depth` passages for `task` and extracts batch by batch until two low-yield batches in a row.

    Returns the node (with retrieved and cited ids), the learnings and the follow-up questions.
    """
    h = run.config.hero
    hits = await run.sched.search(program.retriever, task.query, depth)
    run.searches += 1
    node = run.store.update(replace(node, retrieved_ids=tuple(x.doc.doc_id for x in hits[:depth])))
    learnings: list[Learning] = []
    follow_ups: list[str] = []
    found: set[str] = set()
    cited_docs: list[str] = []
    low, batches = 0, 0
    for start in range(0, min(depth, len(hits)), h.batch_size):
        batch = hits[start:start + h.batch_size]
        sources = [as_source(x, run.registry.register(x.doc), run.config.passage_chars) for x in batch]
        out = await run.sched.call(program.extractor, question=run.question, task=task, sources=sources)
        run.invented_citations += out.invented
        batches += 1
        cited = {i for x in out.learnings for i in x.source_ids}
        new = cited - found
        new_passages = sum(s.source_id in new for s in sources)
        low = low + 1 if is_low_yield(new_passages, len(new), h.batch_size, len(found), h.yield_mode,
                                      h.min_yield) else 0
        found |= new
        learnings += out.learnings
        follow_ups += [q for q in out.follow_ups if q not in follow_ups]
        cited_docs += [x.doc.doc_id for x, s in zip(batch, sources) if s.source_id in new]
        node = run.store.update(replace(node, learnings=tuple(learnings), relevant_ids=tuple(cited_docs)))
        if low >= h.low_yield_patience:
            break
    run.counters["passages_examined"] = run.counters.get("passages_examined", 0) + min(
        batches * h.batch_size, len(hits[:depth]))
    run.counters["extraction_batches"] = run.counters.get("extraction_batches", 0) + batches
    return node, learnings, follow_ups


async def _select(texts: list[str], anchor: str, k: int, alpha: float, run) -> list[int]:
    h = run.config.hero
    # embedding is CPU work: off the event loop, so other pipelines keep running
    return await asyncio.to_thread(select, texts, anchor, k, alpha, h.selection, h.seed)


async def research_hero(program, run) -> None:
    """All turns of the `hero` strategy; the report is written from the pipelines' enriched summaries."""
    h = run.config.hero
    queries: list[str] = []
    findings: list[Finding] = []
    next_id = 1
    run.finding_depth = 1  # enrichment nodes are inside their pipeline's summary
    for turn in range(1, h.turns + 1):
        if run.is_stopped:
            break
        known = [f"Already searched: {q}" for q in queries] + [f.summary for f in findings]
        try:
            candidates = (await run.sched.call(program.planner, question=run.question, known=known,
                                               max_tasks=h.multiplier * h.tasks_per_turn)).tasks
        except BudgetExceeded:
            raise
        except Exception as err:
            program._fail(run, "root", "plan", err)
            if turn > 1:
                break
            candidates = []
        if turn == 1 and not candidates:  # one failed LM call must not empty the run
            candidates = program._fallback_plan(run)
        fresh = [t for t in candidates if t.query not in queries]
        if not fresh:
            run.counters["turns_stop"] = f"the planner proposed no new task in turn {turn}"
            break
        chosen = [fresh[i] for i in await _select([t.query for t in fresh], run.question, h.tasks_per_turn,
                                                  h.alpha, run)]
        run.events.emit("stage_end", stage="select", counts={"turn": turn, "candidates": len(fresh),
                                                             "selected": len(chosen)})
        turn_queries = [t.query for t in chosen]
        futures = []
        for i, task in enumerate(chosen):
            node_id = str(next_id)
            next_id += 1
            run.store.add(Node(node_id=node_id, depth=1, breadth=len(chosen), query=task.query, goal=task.goal))
            siblings = turn_queries[:i] + turn_queries[i + 1:]
            futures.append(await run.sched.submit(1, lambda release, t=task, n=node_id, s=siblings, tn=turn:
                                                  _pipeline(program, run, t, n, s, tn, release)))
        results = await asyncio.gather(*futures, return_exceptions=True)
        queries += turn_queries
        findings += [r for r in results if isinstance(r, Finding)]
        run.counters["turns"] = turn


async def _pipeline(program, run, task: Task, node_id: str, siblings: list[str], turn: int, release) -> Finding | None:
    h = run.config.hero
    set_node(node_id)
    node = run.store.get(node_id)
    stage = ["extract"]
    gaps: list[Task] = []
    try:
        async with run.sched.node_slots:
            if run.is_stopped:
                run.store.update(replace(node, status="skipped"))
                return None
            run.events.emit("node_start", node_id=node_id, message=task.query, counts={"turn": turn})
            node, learnings, follow_ups = await extract_in_batches(program, run, task, node, h.deep_depth)
            stage[0] = "merge"
            summary = (await run.sched.call(program.merger, task=task, learnings=learnings)).summary
            node = run.store.update(replace(node, summary=summary, follow_ups=tuple(follow_ups)))
            if h.enrichments > 0 and not run.is_stopped:
                stage[0] = "enrich"
                gaps = (await run.sched.call(program.enricher, question=run.question, focus=task.query,
                                             summary=summary, open_questions=follow_ups, sibling_queries=siblings,
                                             max_tasks=h.multiplier * h.enrichments)).tasks
                if len(gaps) > h.enrichments:
                    gaps = [gaps[i] for i in await _select([g.query for g in gaps], task.query, h.enrichments,
                                                           h.enrich_alpha, run)]
        futures = []
        for i, gap in enumerate(gaps):
            child_id = f"{node_id}.{i + 1}"
            run.store.add(Node(node_id=child_id, depth=2, breadth=len(gaps), query=gap.query, goal=gap.goal),
                          node_id)
            futures.append(await run.sched.submit(2, lambda release, g=gap, c=child_id: _enrichment(
                program, run, g, c, release)))
        release()
        extra = [x for r in await asyncio.gather(*futures) for x in (r or [])]
        if extra and not run.is_stopped:
            stage[0] = "enrich_write"
            paragraph = (await run.sched.call(program.enrichment_writer, focus=task.query, summary=summary,
                                              learnings=extra)).paragraph
            if paragraph:
                summary = summary + "\n\n" + paragraph
                node = run.mark(node_id, summary=summary)
    except asyncio.CancelledError:
        run.mark(node_id, status="cancelled")
        raise
    except BudgetExceeded as err:
        run.halt(node_id, err)
    except Exception as err:
        program._fail_node(run, node_id, stage[0], err)
        return None
    node = run.store.get(node_id)
    run.events.emit("node_end", node_id=node_id, message=node.status,
                    counts={"learnings": len(node.learnings), "enrichments": len(gaps)})
    return Finding(query=task.query, summary=node.summary) if node.summary else None


async def _enrichment(program, run, task: Task, node_id: str, release) -> list[Learning]:
    node = run.store.get(node_id)
    try:
        async with run.sched.node_slots:
            if run.is_stopped:
                run.store.update(replace(node, status="skipped"))
                return []
            run.events.emit("node_start", node_id=node_id, message=task.query)
            node, learnings, _ = await extract_in_batches(program, run, task, node, run.config.hero.shallow_depth)
    except asyncio.CancelledError:
        run.mark(node_id, status="cancelled")
        raise
    except BudgetExceeded as err:
        run.halt(node_id, err)
        return []
    except Exception as err:
        program._fail_node(run, node_id, "extract", err)
        return []
    run.events.emit("node_end", node_id=node_id, message="done", counts={"learnings": len(learnings)})
    return learnings
