"""What a research strategy is: the small protocol `DeepResearch` runs, and the steps strategies share.

A strategy names the stages it adds to the shared ones, builds their modules, and researches a
question through a `RunContext` only: it plans and spawns nodes, runs each inside `ctx.node(...)`,
and calls stages by name. Budgets, the deadline, failures and the journal are the context's, and
finish.py assembles the report; both are the same for every strategy.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from typing import Protocol

from deepresearch.programs.citing.citation_guard import check_node_citations
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.runtime.context import NodeLife, RunContext
from deepresearch.programs.runtime.scheduler import BudgetExceeded
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.programs.stages.merger import NO_INFORMATION
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.types import Source, Task

logger = logging.getLogger(__name__)

# The stages every strategy shares: name -> the attribute of `DeepResearch` holding its module (from the
# stage registry). `clarify` (asked before research), `write` and `verify` are the program's own calls;
# the strategies call the other five.
SHARED_STAGES: dict[str, str] = STAGES.shared()


class Strategy(Protocol):
    """How the nodes of a research run are planned, scheduled and steered."""

    name: str
    stages: dict[str, str]  # the strategy's own stages: name -> attribute (as SHARED_STAGES)
    prune_reasons: tuple[str, ...]  # why it prunes nodes (counted per reason in RunStats.pruned); () if never

    def planned_nodes(self, config: ResearchConfig) -> int:
        """The most nodes a run of `config` can plan (a progress bar's horizon; not a budget)."""

    async def research(self, ctx: RunContext) -> None:
        """Researches `ctx.question`: plans, spawns and runs nodes until none is left."""


# run -> node id -> what its extractor was sent (source ids and digests of passage texts), for `skip_seen`
_SENT: weakref.WeakKeyDictionary[RunContext, dict[str, set[str]]] = weakref.WeakKeyDictionary()


def _keys(source: Source) -> tuple[str, str]:
    return source.source_id, "text:" + hashlib.blake2b(norm_text(source.text).encode(), digest_size=12).hexdigest()


def unseen(life: NodeLife, sources: list[Source], limit: int | None = None) -> list[Source]:
    """The sources (at most `limit`) the extractor of `life`'s node should be sent, per `config.skip_seen`,
    recorded as sent.

    `node`: none already sent for this node (same id, or same text under another id: one paper's text
    once per node). `lineage`: nor one sent for an ancestor node, whose learnings already hold it. The
    ancestors finished before the node started, so what a node skips does not depend on scheduling. Only
    for the LM extractor: the offline one costs no tokens, and its baseline reads every passage it is given.
    """
    mode = life.ctx.config.skip_seen
    if mode == "off" or life.ctx.modules[STAGES.extract.name].is_offline:
        return sources[:limit]
    sent = _SENT.setdefault(life.ctx, {})
    mine = sent.setdefault(life.node_id, set())
    known = set(mine)
    if mode == "lineage":
        parent = life.ctx.store.parents.get(life.node_id)
        while parent:
            known |= sent.get(parent, set())
            parent = life.ctx.store.parents.get(parent)
    out: list[Source] = []
    for s in sources:
        if limit is not None and len(out) >= limit:
            break
        keys = _keys(s)
        if not known.intersection(keys):
            out.append(s)
            known.update(keys)
            mine.update(keys)
    return out


async def research_task(life: NodeLife, task: Task, hits_k: int) -> list[str]:
    """Search, assess, extract and merge for one node, with HERO's stages.

    Records what each step produced on the node as it goes; returns the follow-up questions.
    """
    ctx = life.ctx
    hits = await life.search(task.query, hits_k)
    sources = life.sources(hits)
    life.update(retrieved_ids=tuple(h.doc.doc_id for h in hits))
    # the LM assessor sees each paper's title and best sentences (`assess_sentences`), and the offline rule, which
    # reads whole passages, records that view as its demonstration for the LM; the extractor reads the passage
    brief = {"sentences": ctx.config.assess_sentences} if ctx.config.assess_sentences else {}
    assessed = await life.call(STAGES.assess.name, task=task, sources=sources, scores=[h.score for h in hits], **brief)
    doc_of = {s.source_id: h.doc.doc_id for s, h in zip(sources, hits)}
    life.update(relevant_ids=tuple(doc_of[s.source_id] for s in assessed.kept))
    extracted = await life.call(
        STAGES.extract.name,
        question=ctx.question,
        task=task,
        sources=unseen(life, assessed.kept, ctx.config.max_passages),
    )
    life.count(invented_citations=extracted.invented)
    life.update(learnings=tuple(extracted.learnings), follow_ups=tuple(extracted.follow_ups))
    merged = await life.call(STAGES.merge.name, task=task, learnings=extracted.learnings)
    life.update(
        summary=check_node_citations(life, STAGES.merge.name, merged.summary, extracted.learnings, empty=NO_INFORMATION)
    )
    return list(extracted.follow_ups)


async def plan_root(ctx: RunContext, max_tasks: int) -> list[Task]:
    """The root plan: `max_tasks` tasks for the question, with the fallbacks one failed call must not defeat.

    A failed or empty plan falls back to the question itself; a plan shorter than `breadth` is topped up
    with it (the size of a full tree assumes `breadth` searches at the root; small models often plan
    one task). Both are recorded (events, `RunStats.plan_fallback` / `plan_topped_up`).
    """
    try:
        tasks = (await ctx.call(STAGES.plan.name, question=ctx.question, known=[], max_tasks=max_tasks)).tasks
    except BudgetExceeded:
        raise
    except Exception as err:  # recorded, and the question itself is searched instead
        ctx.fail("root", STAGES.plan.name, err)
        tasks = []
    if not tasks:
        return [question_task(ctx, "plan_fallback", "planning produced no task; searching the question itself")]
    planned = {norm_text(t.query) for t in tasks}
    if len(tasks) >= ctx.config.breadth or norm_text(plain_brief(ctx.question)) in planned:
        return tasks
    return [
        *tasks,
        question_task(
            ctx,
            "plan_topped_up",
            f"{len(tasks)} of {ctx.config.breadth} tasks planned; the question itself is searched too",
        ),
    ]


def question_task(ctx: RunContext, counter: str, message: str) -> Task:
    """The question as a task of its own, recorded as a planning fallback (`counter` in the stats).

    A clarified run's task searches the question and the answers, not the brief's labels.
    """
    logger.warning("%s", message)
    ctx.count(**{counter: True})
    ctx.events.emit("fallback", stage=STAGES.plan.name, message=message)
    return Task(query=plain_brief(ctx.question), goal=ctx.title)
