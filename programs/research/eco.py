"""The `eco` strategy (the default, after DeepResearch-Eco): a depth x breadth recursion with halving breadth.

The root plan has `breadth` tasks; every node searches, assesses, extracts and merges, then asks the
enricher for up to next_breadth(b) follow-up tasks, which recurse with depth - 1. A child is spawned
as soon as its parent's own research is done, so no level waits for another (`schedule="async"`).
"""

from __future__ import annotations

from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.research.strategy import plan_root, research_task
from deepresearch.programs.runtime.context import RunContext
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.types import Task


class Eco:
    name = "eco"
    prune_reasons: tuple[str, ...] = ()  # prunes no node
    stages: dict[str, str] = {}

    def planned_nodes(self, config: ResearchConfig) -> int:
        return tree_size(config)

    async def research(self, ctx: RunContext) -> None:
        tasks = await ctx.once("plan:root", lambda: plan_root(ctx, ctx.config.breadth))
        await self._spawn(ctx, tasks, None, level=1, depth_left=ctx.config.depth, breadth=ctx.config.breadth)

    async def _spawn(
        self, ctx: RunContext, tasks: list[Task], parent_id: str | None, level: int, depth_left: int, breadth: int
    ) -> None:
        queries = [t.query for t in tasks]

        async def run(node_id: str, task: Task, release) -> None:
            i = next(i for i, t in enumerate(tasks) if t is task)
            siblings = queries[:i] + queries[i + 1 :]
            await self._node(ctx, node_id, task, level, depth_left, breadth, siblings, release)

        await ctx.spawn(tasks, parent_id=parent_id, level=level, breadth=breadth, run=run)

    async def _node(
        self,
        ctx: RunContext,
        node_id: str,
        task: Task,
        level: int,
        depth_left: int,
        breadth: int,
        siblings: list[str],
        release,
    ) -> None:
        child_breadth = ctx.config.next_breadth(breadth)
        async with ctx.node(node_id) as life:
            if not life.restored:
                async with life.slot():
                    follow_ups = await research_task(life, task, ctx.config.hits_per_query)
                    if depth_left > 1 and child_breadth > 0 and not life.stopped():
                        life.spawned = (
                            await life.call(
                                STAGES.enrich.name,
                                question=ctx.question,
                                focus=task.query,
                                summary=life.node.summary,
                                open_questions=follow_ups,
                                sibling_queries=siblings,
                                max_tasks=child_breadth,
                            )
                        ).tasks
            await self._spawn(ctx, life.spawned, node_id, level + 1, depth_left - 1, child_breadth)
        release()


def tree_size(config: ResearchConfig) -> int:
    """The number of searches of a full tree."""
    searches, width, level_breadth = 0, 1, config.breadth
    for _ in range(config.depth):
        if level_breadth <= 0:
            break
        width *= level_breadth
        searches += width
        level_breadth = config.next_breadth(level_breadth)
    return searches
