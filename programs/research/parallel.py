"""The `parallel` strategy, after ParallelResearch: an adaptive research tree steered while it runs.

Planning nodes choose their breadth with a breadth policy (1..b_max subqueries, seeing the whole
tree's findings); after each research node a depth policy decides whether to go deeper; children are
planned speculatively, alongside their parent's research; and a monitor scores every running node
every `interval_s` and stops its subtree when its goal is met (`satisfied`) or its evidence is poor
twice in a row (`low_value`). The monitor asks again only when the subtree has found something new, and
only while its requests stay within `orchestration_share` of the run's prompt tokens. Every switch can be
turned off (ParallelConfig) for ablations: the fixed fallbacks are the planner with `breadth` tasks, always
deepening to `depth`, and no monitor.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass, field

from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.research.strategy import plan_root, question_task, research_task
from deepresearch.programs.runtime.context import RunContext
from deepresearch.programs.runtime.scheduler import BudgetExceeded
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.types import Task

logger = logging.getLogger(__name__)

MAX_FINDINGS_SHOWN = 40
PRUNE_REASONS = ("satisfied", "low_value", STAGES.deepen.research_attr_name)


@dataclass
class _Steering:
    """What the strategy keeps for one run: the breadth policy's answers by (query, findings), and how many of
    the monitor's requests are under way."""

    plans: dict[tuple[str, tuple[str, ...]], list[str]] = field(default_factory=dict)
    scoring: int = 0


_RUNS: weakref.WeakKeyDictionary[RunContext, _Steering] = weakref.WeakKeyDictionary()


class Parallel:
    name = "parallel"
    prune_reasons: tuple[str, ...] = PRUNE_REASONS  # the reasons nodes are pruned for, counted in RunStats.pruned
    stages = STAGES.of_strategy(name)

    def planned_nodes(self, config: ResearchConfig) -> int:
        # the tree grows as it runs; its horizon is what the root plans, then what each planner adds
        p = config.parallel
        return p.max_breadth if p.adaptive_breadth else config.breadth

    async def research(self, ctx: RunContext) -> None:
        tasks = await ctx.once("plan:root", lambda: self._plan_root(ctx))
        await self._spawn(ctx, tasks, None, level=1, breadth=ctx.config.breadth)

    async def _plan_root(self, ctx: RunContext) -> list[Task]:
        if not ctx.config.parallel.adaptive_breadth:
            return await plan_root(ctx, ctx.config.breadth)
        try:
            tasks = await self._plan(ctx, ctx.question, ctx.config.breadth)
        except BudgetExceeded:
            raise
        except Exception as err:  # recorded, and the question itself is searched instead
            ctx.fail("root", STAGES.plan.name, err)
            tasks = []
        # no split at the root: the question itself is the one research node
        return tasks or [question_task(ctx, "plan_fallback", "no subquery planned; searching the question itself")]

    async def _plan(self, ctx: RunContext, query: str, breadth: int) -> list[Task]:
        p = ctx.config.parallel
        if not p.adaptive_breadth:
            return (await ctx.call(STAGES.plan.name, question=query, known=[], max_tasks=breadth)).tasks
        findings = [x.text for n in ctx.store.nodes.values() for x in n.learnings][-MAX_FINDINGS_SHOWN:]
        # The same query over the same findings gets the answer it already got: where the root is not split, the
        # question's own node would otherwise ask again, before it has found anything, what the root was asked.
        asked, plans = (query, tuple(findings)), _RUNS.setdefault(ctx, _Steering()).plans
        if asked not in plans:
            plans[asked] = (
                await ctx.call(
                    STAGES.breadth.name,
                    query=query,
                    accumulated_findings=findings,
                    user_constraints=p.constraints,
                    max_breadth=p.max_breadth,
                )
            ).subqueries
        return [Task(query=q, goal=f"Part of: {query}") for q in plans[asked]]

    async def _spawn(
        self, ctx: RunContext, tasks: list[Task], parent_id: str | None, level: int, breadth: int
    ) -> list[str]:
        spawned = await ctx.spawn(
            tasks,
            parent_id=parent_id,
            level=level,
            breadth=len(tasks),
            run=lambda n, t, r: self._node(ctx, n, t, level, breadth, r),
        )
        return [node_id for node_id, _ in spawned]

    async def _node(self, ctx: RunContext, node_id: str, task: Task, level: int, breadth: int, release) -> None:
        p, c = ctx.config.parallel, ctx.config
        can_deepen = level < c.depth
        child_breadth = c.next_breadth(breadth)
        planning: asyncio.Future | None = None
        try:
            async with ctx.node(node_id) as life:
                if life.restored:  # its children as they were planned; each restores or runs on its own
                    await self._spawn(ctx, life.spawned, node_id, level + 1, child_breadth)
                    return
                children: list[str] = []
                if can_deepen and p.speculation != "none":  # speculative: planned alongside this node's research
                    planning = asyncio.ensure_future(self._plan(ctx, task.query, child_breadth))
                if p.orchestrate:
                    ctx.sched.pool.spawn(self._monitor(ctx, node_id))
                if planning is not None and p.speculation == "immediate":
                    life.stage = STAGES.plan.name
                    life.spawned = await planning
                    children = await self._spawn(ctx, life.spawned, node_id, level + 1, child_breadth)
                async with life.slot():
                    await research_task(life, task, c.hits_per_query)
                if planning is not None and p.speculation == "after_initial_research":
                    life.stage = STAGES.plan.name
                    life.spawned = await planning
                    children = await self._spawn(ctx, life.spawned, node_id, level + 1, child_breadth)
                deepen = can_deepen and await self._deepen(ctx, life, task, level)
                if not deepen and children:
                    for child in children:
                        ctx.prune(child, STAGES.deepen.research_attr_name)
                elif deepen and p.speculation == "none":
                    life.stage = STAGES.plan.name
                    life.spawned = await self._plan(ctx, task.query, child_breadth)
                    await self._spawn(ctx, life.spawned, node_id, level + 1, child_breadth)
        finally:
            if planning is not None and not planning.done():
                planning.cancel()
            release()

    async def _deepen(self, ctx: RunContext, life, task: Task, level: int) -> bool:
        p = ctx.config.parallel
        if not p.adaptive_depth:
            return True
        decision = await life.call(
            STAGES.deepen.name,
            query=task.query,
            local_findings=[x.text for x in life.node.learnings],
            user_constraints=p.constraints,
            depth=level,
            max_depth=ctx.config.depth,
        )
        ctx.events.emit(
            "stage_end",
            node_id=life.node_id,
            stage=STAGES.deepen.name,
            message=decision.rationale,
            counts={STAGES.deepen.name: decision.deepen},
        )
        return bool(decision.deepen)

    @staticmethod
    def _affordable(ctx: RunContext, under_way: int) -> bool:
        """Whether one more evaluation keeps the monitor's prompt tokens within `orchestration_share` of the run's.

        The next request, and the monitor's `under_way` requests not yet answered (other nodes' monitors), are
        reckoned at the mean size of its requests so far (of all requests, before its first), so the share holds
        once they are answered, not only before they are sent."""
        share = ctx.config.parallel.orchestration_share
        if share is None:
            return True
        usage = ctx.meter.snapshot()
        total = sum(u.prompt_tokens for u in usage.values())
        mine = usage.get(STAGES.orchestrate.name)
        if mine is not None and mine.calls:
            spent, size = mine.prompt_tokens, mine.prompt_tokens / mine.calls
        else:
            spent, size = 0, total / max(sum(u.calls for u in usage.values()), 1)
        upcoming = size * (1 + under_way)
        return spent + upcoming <= share * (total + upcoming)

    async def _monitor(self, ctx: RunContext, node_id: str) -> None:
        """Scores a node every interval while its subtree runs, and stops the subtree when a rule fires.

        A score stands while the subtree finds nothing new: it counts again towards the rules at each tick,
        without a request (the same request would get the same answer, as it does from DSPy's cache)."""
        p = ctx.config.parallel
        steering = _RUNS.setdefault(ctx, _Steering())
        loop = asyncio.get_running_loop()
        start = loop.time()
        ticks, low_streak = 1, 0
        judged: tuple[tuple[str, ...], str] | None = None  # the findings and sources `score` was given for
        score = None
        while True:
            due = start + ticks * p.interval_s
            # a wait shorter than a microsecond is done: `now + left` can round back to `now`, and a timer set
            # there fires at once without the clock moving (on a virtual clock, a spin that never ends)
            while ctx.is_live(node_id) and (left := due - loop.time()) > 1e-6:
                await ctx.wait_change(left)
            if not ctx.is_live(node_id) or node_id in ctx.pruned or ctx.is_stopped:
                return
            nodes = [ctx.store.get(i) for i in ctx.store.subtree(node_id)]
            findings = [x.text for n in nodes for x in n.learnings][-MAX_FINDINGS_SHOWN:]
            doc_ids = [d for n in nodes for d in n.relevant_ids]
            if findings or doc_ids:  # nothing to judge yet: skip the tick
                titles = {d.doc_id: d.title for _, d in ctx.registry.items()}
                context = "; ".join(dict.fromkeys(titles.get(d, d) for d in doc_ids))[:2000]
                seen = (tuple(findings), context)
                if seen != judged and self._affordable(ctx, steering.scoring):
                    steering.scoring += 1
                    try:
                        score = await ctx.call(
                            STAGES.orchestrate.name,
                            goal=ctx.store.get(node_id).query,
                            user_constraints=p.constraints,
                            context_summary=context,
                            findings=findings,
                        )
                        judged = seen
                    except BudgetExceeded as err:
                        ctx.stop(str(err))
                        return
                    except Exception as err:  # a failed evaluation never stops research
                        logger.warning("evaluating node %s failed: %s: %s", node_id, type(err).__name__, err)
                        score = judged = None
                    finally:
                        steering.scoring -= 1
                    if score is not None:
                        ctx.count(evaluations=1)
                        ctx.events.emit(
                            "stage_end",
                            node_id=node_id,
                            stage=STAGES.orchestrate.name,
                            message=score.rationale,
                            counts={"goal_satisfaction": score.goal_satisfaction, "quality": score.quality},
                        )
                if score is not None and seen == judged:
                    low_streak = low_streak + 1 if score.quality < p.prune_quality else 0
                    reason = None
                    if score.goal_satisfaction >= p.satisfied_goal and score.quality >= p.satisfied_quality:
                        reason = "satisfied"
                    elif low_streak >= 2:
                        reason = "low_value"
                    if reason and node_id not in ctx.pruned:
                        ctx.prune(node_id, reason)
                        return
            # the next tick after now: a tick that passed while the evaluation ran is skipped. At least the next
            # one: (due - start) // interval may round down to the tick just handled, and a monitor that waited
            # for it again would not wait at all (on a virtual clock, forever)
            ticks = max(ticks + 1, int((loop.time() - start) // p.interval_s) + 1)
