"""The `parallel` strategy (spec 002): an adaptive research tree steered while it runs.

Planning nodes choose their breadth with a breadth policy (1..b_max subqueries, seeing the whole
tree's findings); after each research node a depth policy decides whether to go deeper; children are
planned speculatively, alongside their parent's research; and a monitor scores every running node
every `interval_s` and stops its subtree when its goal is met (`satisfied`) or its evidence is poor
twice in a row (`low_value`). Every switch can be turned off (ParallelConfig) for ablations: the
fixed fallbacks are the planner with `breadth` tasks, always deepening to `depth`, and no monitor.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

import dspy

from programs.artifacts import Node
from programs.runtime.scheduler import BudgetExceeded
from programs.runtime.stage import Stage
from programs.runtime.usage import call_predictor, set_node
from signatures.orchestrate import DecideDeepen, EvaluateProgress, PlanBreadth
from signatures.types import Task

logger = logging.getLogger(__name__)

TERMINAL = ("done", "failed", "skipped", "pruned", "cancelled")
MAX_FINDINGS_SHOWN = 40


class BreadthPolicy(Stage):
    """Query + the tree's findings -> 0..max_breadth subqueries (spec 002 π_b)."""

    def __init__(self):
        super().__init__()
        self.plan_breadth = dspy.Predict(PlanBreadth)

    async def aforward(self, query: str, accumulated_findings: list[str], user_constraints: str,
                       max_breadth: int) -> dspy.Prediction:
        out = await call_predictor("breadth", self.plan_breadth, query=query, accumulated_findings=accumulated_findings,
                                   user_constraints=user_constraints, max_breadth=max_breadth)
        seen, kept = set(), []
        for q in out.subqueries:
            key = " ".join(q.lower().split())
            if key and key not in seen:
                seen.add(key)
                kept.append(q.strip())
        return dspy.Prediction(subqueries=kept[:max_breadth])


class DepthPolicy(Stage):
    """Query + its findings -> go one level deeper or not (spec 002 π_d, direct mode)."""

    def __init__(self):
        super().__init__()
        self.decide_deepen = dspy.Predict(DecideDeepen)

    async def aforward(self, query: str, local_findings: list[str], user_constraints: str, depth: int,
                       max_depth: int) -> dspy.Prediction:
        if depth >= max_depth:  # never beyond the maximum: decided here, without an LM call
            return dspy.Prediction(deepen=False, rationale="maximum depth reached")
        out = await call_predictor("deepen", self.decide_deepen, query=query, local_findings=local_findings,
                                   user_constraints=user_constraints, depth=depth, max_depth=max_depth)
        return dspy.Prediction(deepen=bool(out.deepen), rationale=out.rationale)


class ProgressScorer(Stage):
    """A running node's goal, sources and findings -> goal satisfaction and quality in [0, 1] (spec 002 π_o)."""

    def __init__(self):
        super().__init__()
        self.evaluate_progress = dspy.Predict(EvaluateProgress)

    async def aforward(self, goal: str, user_constraints: str, context_summary: str,
                       findings: list[str]) -> dspy.Prediction:
        out = await call_predictor("orchestrate", self.evaluate_progress, goal=goal, user_constraints=user_constraints,
                                   context_summary=context_summary, findings=findings)
        clamp = lambda x: min(1.0, max(0.0, float(x)))  # noqa: E731
        return dspy.Prediction(goal_satisfaction=clamp(out.goal_satisfaction), quality=clamp(out.quality),
                               rationale=out.rationale)


def parallel_stages(offline: bool) -> dict[str, Stage]:
    if offline:
        from programs.stages.offline import OfflineBreadthPolicy, OfflineDepthPolicy, OfflineProgressScorer

        return {"breadth_policy": OfflineBreadthPolicy(), "depth_policy": OfflineDepthPolicy(),
                "progress_scorer": OfflineProgressScorer()}
    return {"breadth_policy": BreadthPolicy(), "depth_policy": DepthPolicy(), "progress_scorer": ProgressScorer()}


class _Tree:
    """Per-run state of the adaptive tree: live nodes, their tasks, kills and a wake-up for monitors."""

    def __init__(self):
        self.active: set[str] = set()
        self.tasks: dict[str, asyncio.Task] = {}
        self.killed: dict[str, str] = {}
        self.changed = asyncio.Condition()


async def _plan(program, run, query: str, breadth: int, is_root: bool) -> list[Task]:
    p = run.config.parallel
    if p.adaptive_breadth:
        findings = [x.text for n in run.store.nodes.values() for x in n.learnings][-MAX_FINDINGS_SHOWN:]
        subqueries = (await run.sched.call(program.breadth_policy, query=query, accumulated_findings=findings,
                                           user_constraints=p.constraints, max_breadth=p.max_breadth)).subqueries
        tasks = [Task(query=q, goal=f"Part of: {query}") for q in subqueries]
    else:
        tasks = (await run.sched.call(program.planner, question=query, known=[], max_tasks=breadth)).tasks
    if not tasks and is_root:  # no split at the root: the question itself is the one research node
        tasks = [Task(query=run.question, goal=run.question)]
    return tasks


async def research_parallel(program, run) -> None:
    tree = _Tree()
    run.counters.update(pruned={"satisfied": 0, "low_value": 0, "depth_policy": 0}, wasted_speculative=0,
                        evaluations=0)
    try:
        tasks = await _plan(program, run, run.question, run.config.breadth, is_root=True)
    except BudgetExceeded:
        raise
    except Exception as err:
        program._fail(run, "root", "plan", err)
        tasks = program._fallback_plan(run)
    await _submit(program, run, tree, None, tasks, level=1, breadth=run.config.breadth)


async def _submit(program, run, tree: _Tree, parent_id: str | None, tasks: list[Task], level: int,
                  breadth: int) -> list[str]:
    ids = []
    for i, task in enumerate(tasks):
        node_id = f"{parent_id}.{i + 1}" if parent_id else str(i + 1)
        run.store.add(Node(node_id=node_id, depth=level, breadth=len(tasks), query=task.query, goal=task.goal),
                      parent_id)
        tree.active.add(node_id)
        ids.append(node_id)
        await run.sched.submit(level, lambda release, t=task, n=node_id: _research_node(
            program, run, tree, t, n, level, breadth, release))
    return ids


async def _finished(tree: _Tree, node_id: str) -> None:
    tree.active.discard(node_id)
    tree.tasks.pop(node_id, None)
    async with tree.changed:
        tree.changed.notify_all()


def kill(run, tree: _Tree, node_id: str, reason: str, include_self: bool = True) -> int:
    """Stops a node's subtree: marks it pruned, cancels what runs; returns how many unfinished nodes it hit."""
    hit = 0
    for nid in run.store.subtree(node_id)[0 if include_self else 1:]:
        if nid in tree.killed:
            continue
        node = run.store.get(nid)
        if nid in tree.active:
            hit += 1
            tree.killed[nid] = reason
            run.store.update(replace(node, status="pruned"))
            task = tree.tasks.get(nid)
            if task is not None and task is not asyncio.current_task():
                task.cancel()
    run.events.emit("prune", node_id=node_id, message=reason, counts={"nodes": hit})
    return hit


async def _research_node(program, run, tree: _Tree, task: Task, node_id: str, level: int, breadth: int,
                         release) -> None:
    p, c = run.config.parallel, run.config
    set_node(node_id)
    tree.tasks[node_id] = asyncio.current_task()
    can_deepen = level < c.depth
    child_breadth = c.next_breadth(breadth)
    planning: asyncio.Task | None = None
    children: list[str] = []
    stage_ref = ["search"]
    try:
        if node_id in tree.killed or run.is_stopped:
            run.mark(node_id, status="pruned" if node_id in tree.killed else "skipped")
            return
        if can_deepen and p.speculation != "none":  # speculative: planned alongside this node's research
            planning = asyncio.ensure_future(_plan(program, run, task.query, child_breadth, is_root=False))
        if p.orchestrate:
            run.sched.pool.spawn(_monitor(program, run, tree, node_id))
        if planning is not None and p.speculation == "immediate":
            children = await _submit(program, run, tree, node_id, await planning, level + 1, child_breadth)
        async with run.sched.node_slots:
            run.events.emit("node_start", node_id=node_id, message=task.query)
            node, _, _ = await program._research_node(run, task, run.store.get(node_id), stage_ref)
        run.events.emit("node_end", node_id=node_id, message="researched",
                        counts={"hits": len(node.retrieved_ids), "learnings": len(node.learnings)})
        if planning is not None and p.speculation == "after_initial_research":
            stage_ref[0] = "plan"
            children = await _submit(program, run, tree, node_id, await planning, level + 1, child_breadth)
        stage_ref[0] = "deepen"
        if not can_deepen:
            deepen = False
        elif p.adaptive_depth:
            decision = await run.sched.call(program.depth_policy, query=task.query,
                                            local_findings=[x.text for x in node.learnings],
                                            user_constraints=p.constraints, depth=level, max_depth=c.depth)
            deepen = decision.deepen
            run.events.emit("stage_end", node_id=node_id, stage="deepen", message=decision.rationale,
                            counts={"deepen": deepen})
        else:
            deepen = True
        if not deepen and children:
            wasted = sum(kill(run, tree, child, "depth_policy") for child in children)
            run.counters["pruned"]["depth_policy"] += wasted
            run.counters["wasted_speculative"] += wasted
        elif deepen and p.speculation == "none":
            stage_ref[0] = "plan"
            await _submit(program, run, tree, node_id, await _plan(program, run, task.query, child_breadth, False),
                          level + 1, child_breadth)
    except asyncio.CancelledError:
        if planning is not None:
            planning.cancel()
        if node_id not in tree.killed:
            run.mark(node_id, status="cancelled")
            raise
    except BudgetExceeded as err:
        run.halt(node_id, err)
    except Exception as err:
        program._fail_node(run, node_id, stage_ref[0], err)
    finally:
        if planning is not None and not planning.done():
            planning.cancel()
        release()
        await _finished(tree, node_id)


def _subtree_running(run, tree: _Tree, node_id: str) -> bool:
    return any(n in tree.active for n in run.store.subtree(node_id))


async def _monitor(program, run, tree: _Tree, node_id: str) -> None:
    """Scores a node every interval while its subtree runs, and stops the subtree when a rule fires."""
    p = run.config.parallel
    start = time.monotonic()
    ticks, low_streak = 1, 0
    while True:
        due = start + ticks * p.interval_s
        while _subtree_running(run, tree, node_id) and time.monotonic() < due:
            async with tree.changed:
                try:
                    await asyncio.wait_for(tree.changed.wait(), max(0.0, due - time.monotonic()))
                except asyncio.TimeoutError:
                    pass
        if not _subtree_running(run, tree, node_id) or node_id in tree.killed or run.is_stopped:
            return
        ids = run.store.subtree(node_id)
        nodes = [run.store.get(i) for i in ids]
        findings = [x.text for n in nodes for x in n.learnings][-MAX_FINDINGS_SHOWN:]
        doc_ids = [d for n in nodes for d in n.relevant_ids]
        if findings or doc_ids:  # nothing to judge yet: skip the tick
            titles = {d.doc_id: d.title for _, d in run.registry.items()}
            context = "; ".join(dict.fromkeys(titles.get(d, d) for d in doc_ids))[:2000]
            try:
                score = await run.sched.call(program.progress_scorer, goal=run.store.get(node_id).query,
                                             user_constraints=p.constraints, context_summary=context, findings=findings)
            except BudgetExceeded as err:
                run.stop(str(err))
                return
            except Exception as err:  # a failed evaluation never stops research
                logger.warning("evaluating node %s failed: %s: %s", node_id, type(err).__name__, err)
                score = None
            if score is not None:
                run.counters["evaluations"] += 1
                run.events.emit("stage_end", node_id=node_id, stage="orchestrate", message=score.rationale,
                                counts={"goal_satisfaction": score.goal_satisfaction, "quality": score.quality})
                low_streak = low_streak + 1 if score.quality < p.prune_quality else 0
                reason = None
                if score.goal_satisfaction >= p.satisfied_goal and score.quality >= p.satisfied_quality:
                    reason = "satisfied"
                elif low_streak >= 2:
                    reason = "low_value"
                if reason and node_id not in tree.killed:
                    run.counters["pruned"][reason] += kill(run, tree, node_id, reason)
                    return
        # the next tick after now: a tick that passed while the evaluation ran is skipped
        ticks = int((time.monotonic() - start) // p.interval_s) + 1
