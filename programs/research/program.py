"""DeepResearch: one recursive research module with three strategies as presets.

`eco` (the default) is spec 000 §3's depth x breadth recursion with the stages of spec 001; `hero`
(programs/research/hero.py) runs spec 001's turns of isolated pipelines; `parallel` (programs/research/parallel.py)
runs spec 002's adaptive tree. All three run their nodes as tasks of one pool (programs/runtime/scheduler.py)
under the run's caps, rate limits and budgets, and share the report assembly below.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field, replace
from typing import Any

import dspy

from programs.artifacts import Failure, Node, Report, as_source
from programs.config import ResearchConfig
from programs.research.citations import CitationRegistry, render_references, renumber_citations
from programs.runtime.events import EventHandler, EventLog
from programs.runtime.lm import explain, structured_adapter, summarize_failures
from programs.runtime.scheduler import BudgetExceeded, CostMeter, Scheduler
from programs.runtime.secrets import redact
from programs.runtime.stage import Shared, run_sync
from programs.runtime.usage import metered, set_node
from programs.stages.assessor import Assessor
from programs.stages.enricher import Enricher
from programs.stages.extractor import Extractor
from programs.stages.merger import NO_INFORMATION, Merger
from programs.stages.planner import Planner
from programs.stages.writer import Writer
from retrievers.types import Retriever
from signatures.types import Finding, Learning, Task

logger = logging.getLogger(__name__)

STAGES = ("planner", "assessor", "extractor", "merger", "enricher", "writer")
STRATEGY_STAGES = {"eco": (), "hero": ("enrichment_writer",),
                   "parallel": ("breadth_policy", "depth_policy", "progress_scorer")}


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


class TreeStore:
    """The run's nodes as they progress, so a deadline can cut the tree and keep what exists.

    Children keep the order in which their parent registered them, whatever order they finish in.
    """

    def __init__(self):
        self.nodes: dict[str, Node] = {}
        self.children: dict[str, list[str]] = {}
        self.roots: list[str] = []

    def add(self, node: Node, parent_id: str | None = None) -> Node:
        self.nodes[node.node_id] = node
        self.children[node.node_id] = []
        (self.children[parent_id] if parent_id else self.roots).append(node.node_id)
        return node

    def update(self, node: Node) -> Node:
        self.nodes[node.node_id] = node
        return node

    def get(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def subtree(self, node_id: str) -> list[str]:
        ids = [node_id]
        for c in self.children[node_id]:
            ids += self.subtree(c)
        return ids

    def build(self, node_id: str) -> Node:
        return replace(self.nodes[node_id], children=tuple(self.build(c) for c in self.children[node_id]))

    def tree(self) -> tuple[Node, ...]:
        return tuple(self.build(r) for r in self.roots)


@dataclass
class _Run:
    """Everything that belongs to one run, kept off the module so a program can run concurrently."""

    question: str
    config: ResearchConfig
    events: EventLog
    registry: CitationRegistry = field(default_factory=CitationRegistry)
    meter: CostMeter = field(default_factory=CostMeter)
    store: TreeStore = field(default_factory=TreeStore)
    sched: Scheduler | None = None
    searches: int = 0
    failures: int = 0
    invented_citations: int = 0
    is_stopped: bool = False
    stop_reason: str = ""
    finding_depth: int | None = None  # only nodes at this depth become findings (None: every node)
    counters: dict[str, Any] = field(default_factory=dict)
    causes: list[str] = field(default_factory=list)  # one explanation per failure, for a failed run's message

    def stop(self, reason: str) -> None:
        if not self.is_stopped:
            self.is_stopped = True
            self.stop_reason = reason
            self.events.emit("budget", message=f"stopping: {reason}")

    def mark(self, node_id: str, **changes: Any) -> Node:
        """Replaces fields of a stored node (status, error...) and returns the new node."""
        return self.store.update(replace(self.store.get(node_id), **changes))

    def halt(self, node_id: str, err: Exception) -> None:
        """A budget ran out inside `node_id`: stop the run and mark the node cancelled."""
        self.stop(str(err))
        self.mark(node_id, status="cancelled")


class DeepResearch(dspy.Module):
    """Plans tasks, researches each as a node of a recursive tree, and writes a cited report.

    With the default `eco` strategy every node retrieves, assesses relevance, extracts cited learnings,
    merges them and asks for follow-up tasks; children recurse with depth - 1 and the next breadth
    (ceil(b/2) by default). `config.strategy` selects `hero` or `parallel` instead (see the presets in
    programs/config.py). Predictors are created once here and shared by all nodes, so
    `named_predictors()` lists each stage once whatever the depth.

    Args:
        retriever: Any object with `search(query, k)` (and optionally `asearch`) returning hits.
        config: Tree shape, strategy, schedule, caps and budgets; `depth` and `breadth` override it.
        offline: Use the deterministic extractive stages of `programs.stages.offline` instead of an LM.
        lms: Per-stage LMs, keyed by stage attribute (`planner`, `assessor`, `extractor`, `merger`,
            `enricher`, `writer`, and the strategy's own stages); others use the LM in `dspy.settings`.
        on_event: Called with every progress `Event` of a run.

    Example:
        >>> program = DeepResearch(retriever=BM25Retriever(load_corpus("scifact")), depth=2, breadth=3)  # doctest: +SKIP
        >>> out = program(question="Does vitamin D reduce fracture risk?")                           # doctest: +SKIP
        >>> out.markdown, out.references, out.tree, out.usage, out.stats["cost"]                      # doctest: +SKIP
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
            from programs.stages.offline import offline_stages

            stages = offline_stages(retriever, self.config)
        else:
            stages = {"planner": Planner(), "assessor": Assessor(keep_uncertain=self.config.keep_uncertain),
                      "extractor": Extractor(max_learnings=self.config.max_learnings), "merger": Merger(),
                      "enricher": Enricher(), "writer": Writer()}
        self.planner, self.assessor, self.extractor = stages["planner"], stages["assessor"], stages["extractor"]
        self.merger, self.enricher, self.writer = stages["merger"], stages["enricher"], stages["writer"]
        for name, stage in strategy_stages(self.config, offline).items():
            setattr(self, name, stage)
        known = STAGES + STRATEGY_STAGES[self.config.strategy]
        for name, lm in (lms or {}).items():
            if name not in known:
                raise ValueError(f"unknown stage {name!r} in lms; choose from: {', '.join(known)}")
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
        self._check_lm()
        run = _Run(question=question.strip(), config=self.config, events=EventLog(self.on_event))
        adapter = None
        if self.config.structured and dspy.settings.adapter is None and not self.is_offline:
            adapter = structured_adapter(self.config.structured, dspy.settings.lm)
        with metered(run.meter), dspy.context(adapter=adapter) if adapter else contextlib.nullcontext():
            run.sched = Scheduler(self.config, run.meter)
            report = await self._run(run)
        return dspy.Prediction(report=report, **{k: getattr(report, k) for k in report.__dataclass_fields__})

    def _check_lm(self) -> None:
        """Raises before any work when an LM stage has no LM: neither its own nor one in dspy.settings."""
        if self.is_offline or dspy.settings.lm is not None:
            return
        bare = sorted({name.split(".", 1)[0] for name, p in self.named_predictors() if p.lm is None})
        if bare:
            raise dspy.utils.exceptions.LMNotConfiguredError(
                f"no LM configured for {', '.join(bare)}: call dspy.configure(lm=dspy.LM(...)) or run inside "
                f"dspy.context(lm=...), or pass offline=True for the extractive baseline")

    async def _run(self, run: _Run) -> Report:
        config = run.config
        max_searches, _ = tree_size(config)
        run.events.emit("run_start", counts={"max_searches": max_searches, "depth": config.depth,
                                             "breadth": config.breadth, "strategy": config.strategy,
                                             "schedule": config.schedule})
        if config.strategy == "hero":
            from programs.research.hero import research_hero

            research = research_hero(self, run)
        elif config.strategy == "parallel":
            from programs.research.parallel import research_parallel

            research = research_parallel(self, run)
        else:
            research = self._research_eco(run)
        sched = run.sched
        sched.pool.spawn(self._guarded(run, research))
        finished = await sched.join(sched.remaining())
        if not finished:
            run.stop(f"deadline of {config.deadline_s:g}s reached")
            cancelled = await sched.cancel()
            run.events.emit("budget", message="deadline: running work cancelled", counts={"tasks": cancelled})
        # a node planned but never started (held by a schedule, waiting for a slot when the run stopped)
        # still carries the default status; it did not run
        started = {e.node_id for e in run.events.events if e.kind == "node_start"}
        for node_id, node in list(run.store.nodes.items()):
            if node_id not in started and node.status == "done":
                run.mark(node_id, status="skipped")
        run.counters["tree_s"] = round(sched.elapsed(), 4)
        return await self._report(run, run.store.tree())

    async def _guarded(self, run: _Run, coro) -> None:
        """The research phase as a pool task: a failure in planning is recorded, not raised."""
        try:
            await coro
        except BudgetExceeded as err:
            run.stop(str(err))
        except Exception as err:  # recorded, and the report is still written
            self._fail(run, "root", "plan", err)

    async def _research_eco(self, run: _Run) -> None:
        config = run.config
        try:
            tasks = (await run.sched.call(self.planner, question=run.question, known=[],
                                          max_tasks=config.breadth)).tasks
        except BudgetExceeded:
            raise
        except Exception as err:  # recorded, and the question itself is searched instead
            self._fail(run, "root", "plan", err)
            tasks = []
        tasks = self._top_up_plan(run, tasks) if tasks else self._fallback_plan(run)
        await self._submit_children(run, None, tasks, level=1, depth_left=config.depth, breadth=config.breadth)

    def _fallback_plan(self, run: _Run) -> list[Task]:
        """The question itself as the only task, when planning failed or planned nothing.

        One failed LM call must not empty a run; the fallback is recorded in the trace.
        """
        logger.warning("planning produced no task; searching the question itself")
        return [_question_task(run, "plan_fallback", "planning produced no task; searching the question itself")]

    def _top_up_plan(self, run: _Run, tasks: list[Task]) -> list[Task]:
        """Adds the question itself when the root plan has fewer tasks than `breadth` and lacks it.

        The tree's size (spec 000 §3.4) assumes `breadth` searches at the root; a short plan (small models
        often write one task) would leave that budget unused, and the question is always a sound search.
        """
        planned = {" ".join(t.query.lower().split()) for t in tasks}
        if len(tasks) >= run.config.breadth or " ".join(run.question.lower().split()) in planned:
            return tasks
        return [*tasks, _question_task(run, "plan_topped_up", f"{len(tasks)} of {run.config.breadth} tasks "
                                                              f"planned; the question itself is searched too")]

    async def _submit_children(self, run: _Run, parent_id: str | None, tasks: list[Task], level: int,
                               depth_left: int, breadth: int) -> list[asyncio.Future]:
        queries = [t.query for t in tasks]
        futures = []
        for i, task in enumerate(tasks):
            node_id = f"{parent_id}.{i + 1}" if parent_id else str(i + 1)
            run.store.add(Node(node_id=node_id, depth=level, breadth=breadth, query=task.query, goal=task.goal),
                          parent_id)
            siblings = queries[:i] + queries[i + 1:]
            futures.append(await run.sched.submit(level, lambda release, t=task, n=node_id, s=siblings: self._node(
                run, t, n, depth_left, breadth, s, release), key=node_id, parent=parent_id))
        return futures

    async def _node(self, run: _Run, task: Task, node_id: str, depth_left: int, breadth: int,
                    siblings: list[str], release) -> None:
        node = run.store.get(node_id)
        child_breadth = run.config.next_breadth(breadth)
        child_tasks: list[Task] = []
        stage_ref = ["search"]  # the stage running now, for the failure record
        set_node(node_id)
        async with run.sched.node_slots:
            if run.is_stopped:  # checked once a slot is free: the run may have stopped while this node waited
                run.events.emit("node_end", node_id=node_id, message="skipped")
                run.store.update(replace(node, status="skipped"))
                return
            run.events.emit("node_start", node_id=node_id, message=task.query)
            try:
                node, summary, follow_ups = await self._research_node(run, task, node, stage_ref)
                if depth_left > 1 and child_breadth > 0 and not run.is_stopped:
                    stage_ref[0] = "enrich"
                    child_tasks = (await run.sched.call(
                        self.enricher, question=run.question, focus=task.query, summary=summary,
                        open_questions=follow_ups, sibling_queries=siblings, max_tasks=child_breadth)).tasks
            except asyncio.CancelledError:
                run.mark(node_id, status="cancelled")
                raise
            except BudgetExceeded as err:
                run.halt(node_id, err)
                run.events.emit("node_end", node_id=node_id, message="cancelled")
                return
            except Exception as err:  # a failing branch is recorded on its node; the run goes on
                self._fail_node(run, node_id, stage_ref[0], err)
                return
            run.events.emit("node_end", node_id=node_id, message="done",
                            counts={"hits": len(node.retrieved_ids), "relevant": len(node.relevant_ids),
                                    "learnings": len(node.learnings), "children": len(child_tasks)})
        await self._submit_children(run, node_id, child_tasks, node.depth + 1, depth_left - 1, child_breadth)
        release()

    async def _research_node(self, run: _Run, task: Task, node: Node, stage_ref: list[str]):
        """Search, assess, extract and merge for one node; records progress on the store as it goes.

        Returns the updated node, its summary and its follow-up questions; `stage_ref[0]` names the stage
        running, so a failure can be attributed.
        """
        store = run.store
        set_node(node.node_id)
        stage_ref[0] = "search"
        hits = await run.sched.search(self.retriever, task.query, run.config.hits_per_query)
        run.searches += 1
        sources = [as_source(h, run.registry.register(h.doc), run.config.passage_chars) for h in hits]
        node = store.update(replace(node, retrieved_ids=tuple(h.doc.doc_id for h in hits)))
        stage_ref[0] = "assess"
        assessed = await run.sched.call(self.assessor, task=task, sources=sources, scores=[h.score for h in hits])
        doc_of = {s.source_id: h.doc.doc_id for s, h in zip(sources, hits)}
        kept = assessed.kept[: run.config.max_passages]
        node = store.update(replace(node, relevant_ids=tuple(doc_of[s.source_id] for s in assessed.kept)))
        stage_ref[0] = "extract"
        extracted = await run.sched.call(self.extractor, question=run.question, task=task, sources=kept)
        run.invented_citations += extracted.invented
        node = store.update(replace(node, learnings=tuple(extracted.learnings),
                                    follow_ups=tuple(extracted.follow_ups)))
        stage_ref[0] = "merge"
        merged = await run.sched.call(self.merger, task=task, learnings=extracted.learnings)
        node = store.update(replace(node, summary=merged.summary))
        return node, merged.summary, list(extracted.follow_ups)

    def _fail_node(self, run: _Run, node_id: str, stage: str, err: Exception) -> None:
        """Records a failure in `stage` of node `node_id`, marks the node failed and ends it in the trace."""
        failure = self._fail(run, node_id, stage, err)
        run.mark(node_id, status="failed", error=failure)
        run.events.emit("node_end", node_id=node_id, message="failed")

    def _fail(self, run: _Run, node_id: str, stage: str, err: Exception) -> Failure:
        lm = dspy.settings.lm
        message = redact(str(err).strip().splitlines()[0][:500]) if str(err).strip() else ""
        failure = Failure(stage=stage, error_type=type(err).__name__, message=message, cause=explain(err, lm))
        run.causes.append(failure.cause)
        run.failures += 1
        logger.warning("node %s failed in %s: %s: %s", node_id, stage, failure.error_type, failure.message)
        run.events.emit("failure", node_id=node_id, stage=stage, message=f"{failure.error_type}: {failure.message}")
        if run.failures > run.config.max_failures and not run.is_stopped:
            run.stop(f"more than {run.config.max_failures} failures")
        return failure

    async def _report(self, run: _Run, roots: tuple[Node, ...]) -> Report:
        roots = tuple(_with_notes(r, run.meter) for r in roots)
        nodes = [n for r in roots for n in r.walk()]
        findings = [Finding(query=n.query, summary=n.summary) for n in nodes
                    if n.status in ("done", "pruned", "cancelled") and n.learnings and n.summary
                    and n.summary != NO_INFORMATION and run.finding_depth in (None, n.depth)]
        learnings = tuple({x.text: x for n in nodes for x in n.learnings}.values())  # first-seen order, exact dedup
        write_failed = False
        failed = sum(n.status == "failed" for n in nodes)
        started = [n for n in nodes if n.status not in ("skipped",)]
        error = None
        if run.searches == 0 or (started and all(n.status == "failed" for n in started)):
            # nothing was researched because of failures: say so, never "no relevant evidence"
            cause = summarize_failures(run.causes) or run.stop_reason or "no search ran"
            what = "no search ran" if run.searches == 0 else f"every research branch failed ({failed} of {len(nodes)})"
            error = f"{what}: {cause}"
        if error is None and findings:
            try:
                body = (await self._write(run, findings)).report
            except Exception as err:
                self._fail(run, "root", "write", err)
                write_failed = True
                body = fallback_report(run.question, findings)
        elif error is None:
            body = f"## {run.question}\n\nThe search found no relevant evidence for this question in the corpus."
        else:
            body = (f"# Research failed: {error}\n\nNo report was written for: {run.question}\n\n"
                    f"Every error is recorded in the trace (trace.json), node by node.")
        renumbered = renumber_citations(body, run.registry)
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
        usage = run.meter.snapshot()
        costs = run.meter.costs()
        stats = {
            "nodes": len(nodes), "searches": run.searches, "failed_nodes": failed,
            "skipped_nodes": sum(n.status == "skipped" for n in nodes), "learnings": len(learnings),
            "citations": len(renumbered.references), "dropped_citations": renumbered.dropped,
            "invented_citations": run.invented_citations, "registered_sources": len(run.registry),
            "stopped": run.stop_reason or None, "offline": self.is_offline,
            "cancelled_nodes": sum(n.status == "cancelled" for n in nodes),
            "pruned_nodes": sum(n.status == "pruned" for n in nodes),
            "strategy": run.config.strategy, "schedule": run.config.schedule,
            "lm_calls": run.meter.total_calls, "tokens": run.meter.total_tokens,
            "cost": {"stages": costs, "total": None if any(v is None for v in costs.values())
                     else round(sum(costs.values()), 8)},
            "limits": {"nodes": run.config.max_concurrency, "lm": run.config.lm_concurrency,
                       "search": run.config.search_concurrency},
            "failed_requests": sum(u.failed for u in usage.values()),
            "parse_failures": sum(u.parse_failures for u in usage.values()),
            "format_fallbacks": sum(u.fallbacks for u in usage.values()),
            "truncated_replies": sum(u.truncated for u in usage.values()),
            "plan_fallback": bool(run.counters.get("plan_fallback")),
            "plan_topped_up": bool(run.counters.get("plan_topped_up")),
            "root_notes": list(run.meter.notes("root")),  # notes of calls made outside any node (planning, writing)
            "retries": dict(run.sched.retries), "tree_s": run.counters.get("tree_s"),
            "total_s": round(run.sched.elapsed(), 4),
            **{k: v for k, v in run.counters.items() if k not in ("tree_s", "plan_fallback", "plan_topped_up")},
        }
        run.events.emit("run_end", message="failed" if error else "done", counts=dict(stats))
        return Report(question=run.question, markdown=markdown, references=renumbered.references,
                      learnings=learnings, tree=roots, usage=usage, stats=stats,
                      events=tuple(run.events.events), status="failed" if error else "done", error=error)

    async def _write(self, run: _Run, findings: list[Finding]) -> dspy.Prediction:
        """Calls the writer; after a deadline it gets a grace period only, then the findings stand as they are.

        The grace is a tenth of the deadline (at least 5 s, at most the LM timeout), so a server that
        never answers cannot hold the run long past `deadline_s`.
        """
        call = run.sched.call(self.writer, reserve=0, question=run.question, findings=findings)
        c = run.config
        if c.deadline_s is None or run.sched.elapsed() < c.deadline_s:
            return await call
        grace = max(5.0, 0.1 * c.deadline_s)
        if c.lm_timeout_s is not None:
            grace = min(grace, c.lm_timeout_s)
        return await asyncio.wait_for(call, grace)


def strategy_stages(config: ResearchConfig, offline: bool) -> dict[str, dspy.Module]:
    """The stage modules a strategy adds to the six shared ones (none for `eco`)."""
    if config.strategy == "hero":
        from programs.research.hero import hero_stages

        return hero_stages(offline)
    if config.strategy == "parallel":
        from programs.research.parallel import parallel_stages

        return parallel_stages(offline)
    return {}


def _question_task(run: _Run, counter: str, message: str) -> Task:
    """The question as a task of its own, recorded as a planning fallback (`counter` in the stats)."""
    run.counters[counter] = True
    run.events.emit("fallback", stage="plan", message=message)
    return Task(query=run.question, goal=run.question)


def _with_notes(node: Node, meter) -> Node:
    """The node, and its children, with the notes the meter kept for them (truncations, fallbacks)."""
    notes = meter.notes(node.node_id)
    children = tuple(_with_notes(c, meter) for c in node.children)
    return replace(node, notes=node.notes + notes, children=children)


def fallback_report(question: str, findings: list[Finding]) -> str:
    """The merged findings under their queries, used when the writer cannot produce a report."""
    parts = [f"## {question}"]
    parts += [f"### {f.query}\n\n{f.summary}" for f in findings]
    return "\n\n".join(parts)


__all__ = ["DeepResearch", "Learning", "STAGES", "Shared", "TreeStore", "fallback_report", "run_sync",
           "tree_size"]
