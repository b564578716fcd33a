"""Gatherer: ScholarGym's plan -> retrieve -> assess loop over a tree of subqueries.

Each round the planner reads the tree, its memory, its checklist and the assessor's notes from the last
round, and proposes actions (derive, expand, continue); every action becomes one search against the
retriever (date constraint, already-selected papers excluded, pages for continue); the assessor labels
each candidate and writes notes. The loop stops after `iterations` rounds, when the planner says the
search is complete, or when no valid action is left.

`GatherLoop` is the loop itself, run on behalf of a `LoopHost` that sends its LM calls and searches
under some run's caps and budgets and records its failures: the standalone `Gatherer` hosts it on a
scheduler of its own; the research program's `gather` strategy (programs/research/gather.py) on its run. The planner and
assessor modules are in programs/stages/gathering.py.

Full text (`--full-text`, a `FullTextRetriever`): the loop searches the papers it wraps (`papers_and_reader`);
the second look reads a paper's PDF (`deepresearch.programs.stages.gathering`), counted per search
(`Search.rechecked`, `browsed`, `unread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol, cast

import dspy
from pydantic import TypeAdapter, ValidationError

from deepresearch.programs.artifacts import StageUsage
from deepresearch.programs.config import GatherLoopConfig, ResearchConfig, check_minimum
from deepresearch.programs.gather.artifacts import (
    Candidate,
    GatherResult,
    Round,
    Search,
    Selection,
    StopReason,
    Subquery,
)
from deepresearch.programs.lm.models import structured_adapter
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.lm.usage import UsageMeter, metered
from deepresearch.programs.runtime.events import EventHandler, EventLog
from deepresearch.programs.runtime.scheduler import BudgetExceeded, Scheduler
from deepresearch.programs.runtime.stage import Shared, run_sync, set_stage_lms
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.choice import TwinChoice
from deepresearch.programs.stages.gathering import clip, reading_full_text
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.fulltext import FullTextRetriever
from deepresearch.retrievers.types import Hit, Retriever
from deepresearch.signatures.gather import PlannedSearch, RoundResult, SubqueryNode

logger = logging.getLogger(__name__)
# the links of the loop's subquery tree, as `SubqueryNode.link` takes them
SubqueryLink = Literal["root", "derive", "expand"]

# The loop's stage names (as in usage and the trace) -> the attribute holding their module.
GATHER_STAGES: dict[str, str] = STAGES.gather()

# Predictors that changed shape, by their last path component (or last two): a compiled file holding one was
# tuned for a signature this code no longer has, so its demos and instructions would not fit.
RETIRED_PREDICTORS: dict[str, str] = {
    "assess_candidates": "the gathering assessor now writes one label per candidate (label_candidates)",
    "extract_learnings.predict": "the extractor now quotes sentences by number (extract_learnings)",
}


def check_retired(state: dict[str, Any], program: dspy.Module | None = None) -> None:
    """Raises ValueError (one line) when saved `state` holds a predictor whose signature has changed shape:
    one retired by name (`RETIRED_PREDICTORS`), or, given `program`, one whose saved fields are not those of
    the predictor of that name in `program` (the merger and research assessor changed their fields in place)."""
    for name in state:
        why = RETIRED_PREDICTORS.get(name.rsplit(".", 1)[-1]) or RETIRED_PREDICTORS.get(".".join(name.split(".")[-2:]))
        if why:
            raise ValueError(
                f"the compiled program holds {name}, compiled for an older signature: {why}; "
                f"compile it again with `deepresearch optimize`"
            )
    predictors = dict(program.named_predictors()) if program is not None else {}
    for name, saved in state.items():
        fields = saved.get("signature", {}).get("fields") if isinstance(saved, dict) else None
        if name not in predictors or not isinstance(fields, list):
            continue
        was = [f.get("prefix", "").rstrip(":") for f in fields if isinstance(f, dict)]
        now = [f.json_schema_extra["prefix"].rstrip(":") for f in predictors[name].signature.fields.values()]
        if was != now:
            raise ValueError(
                f"the compiled program holds {name}, compiled for an older signature (fields {', '.join(was)}; "
                f"now {', '.join(now)}); compile it again with `deepresearch optimize`"
            )
        field = unfit_demo_field(saved.get("demos") or [], predictors[name].signature)
        if field:  # same field names, another shape (the extractor now names passages by number)
            raise ValueError(
                f"the compiled program holds {name}, whose demonstrations do not fit its signature's field "
                f"{field} any more; compile it again with `deepresearch optimize`"
            )


def unfit_demo_field(demos: list[Any], signature: type[dspy.Signature]) -> str | None:
    """The first field of `signature` whose value in one of the saved `demos` its type no longer accepts."""
    for demo in demos:
        values = demo if isinstance(demo, dict) else {}
        for name, info in signature.fields.items():
            value = values.get(name)
            if not isinstance(value, list | dict):  # only structured values: a string may be a rendered one
                continue
            try:
                TypeAdapter(info.annotation).validate_python(value)
            except ValidationError:
                return name
    return None


@dataclass(frozen=True)
class GatherConfig(GatherLoopConfig):
    """Settings of the standalone `Gatherer`: the loop's (`deepresearch.programs.config.GatherLoopConfig`: iterations,
    max_actions, max_pages, max_k, ranking_depth, memory_chars, preview_chars, second_look) and the run's limits.

    Args:
        max_concurrency: Searches and assessments of one round running at once (each also a cap on LM calls
            and searches in flight).
        deadline_s: Wall-clock seconds for the loop; the rounds finished before it stand.
        max_lm_calls: LM requests the loop may send; the round under way when it runs out is its last.
        lm_timeout_s: Seconds one LM call may take before it is retried (as in the research program).
    """

    max_concurrency: int = 8
    deadline_s: float | None = None
    max_lm_calls: int | None = None
    lm_timeout_s: float | None = 120.0

    def __post_init__(self):
        super().__post_init__()
        check_minimum(self, ("max_concurrency",), 1)
        self.limits()  # the run limits are checked here too

    def limits(self) -> ResearchConfig:
        """The caps, budgets and timeouts of the scheduler the loop runs on (shared with research runs)."""
        return ResearchConfig(
            max_concurrency=self.max_concurrency,
            lm_concurrency=self.max_concurrency,
            search_concurrency=self.max_concurrency,
            deadline_s=self.deadline_s,
            max_lm_calls=self.max_lm_calls,
            lm_timeout_s=self.lm_timeout_s,
        )


def papers_and_reader(retriever: Retriever) -> tuple[Retriever, FullTextRetriever | None]:
    """The retriever the loop searches, which returns whole papers, and the reader of their full text: for a
    `FullTextRetriever` (which puts a paper's passages in its place) the retriever it wraps and itself,
    else `retriever` and None. The loop selects papers by id, so it never searches passages."""
    if isinstance(retriever, FullTextRetriever):
        return retriever.inner, retriever
    return retriever, None


def validate_plan(
    searches: list[PlannedSearch], tree: list[Subquery], pages: dict[int, int], config: GatherLoopConfig
) -> tuple[list[PlannedSearch], list[str], int]:
    """Keeps the actions the loop can run: returns kept, drop reasons, repairs.

    Dropped: unknown source, continue on the root, continue past `max_pages`, a derive or expand with
    no text, a text already in the tree or earlier in the plan, a second continue of one node, and
    anything past the first `max_actions` valid actions. Repaired: `target_k` clamped to [1, max_k].
    """
    nodes = {n.node_id for n in tree}
    texts = {norm_text(n.text) for n in tree}
    continued: set[int] = set()
    kept: list[PlannedSearch] = []
    dropped: list[str] = []
    repaired = 0
    for s in searches:
        if s.source_id not in nodes:
            reason = f"unknown source {s.source_id}"
        elif s.action == "continue" and s.source_id == 0:
            reason = "continue on the root"
        elif s.action == "continue" and (s.source_id in continued or pages.get(s.source_id, 0) >= config.max_pages):
            reason = f"continue of node {s.source_id} past its page limit or twice"
        elif s.action != "continue" and not norm_text(s.text):
            reason = f"{s.action} without text"
        elif s.action != "continue" and norm_text(s.text) in texts:
            reason = f"repeated query {s.text!r}"
        elif len(kept) == config.max_actions:
            reason = f"more than {config.max_actions} actions"
        else:
            reason = ""
        if reason:
            dropped.append(reason)
            continue
        k = min(max(s.target_k, 1), config.max_k)
        if k != s.target_k:
            repaired += 1
            s = s.model_copy(update={"target_k": k})
        if s.action == "continue":
            continued.add(s.source_id)
        else:
            texts.add(norm_text(s.text))
        kept.append(s)
    return kept, dropped, repaired


class LoopHost(Protocol):
    """What the loop needs from the run it is part of.

    `plan` and `assess` call the loop's planner and assessor, `search` the retriever, each under the run's
    caps, budgets and timeouts (an exhausted budget raises `BudgetExceeded`); `failed` records a failed step
    (`where` is a round or a subquery id, `stage` one of `plan`, `search`, `assess`); `halted` says why no
    further round may start (a stop reason and a message), or None; `events` is the run's event log.
    """

    events: EventLog

    async def plan(self, **inputs: Any) -> dspy.Prediction: ...

    async def assess(self, **inputs: Any) -> dspy.Prediction: ...

    async def search(self, query: str, k: int, **filters: Any) -> list[Hit]: ...

    def failed(self, where: str, stage: str, err: BaseException) -> None: ...

    def halted(self) -> tuple[StopReason, str] | None: ...

    async def rescue(self, reason: str, **inputs: Any) -> dspy.Prediction | None:
        """A usable first plan from the planner's offline twin, when the LM's has no valid action (`reason`);
        None where the run keeps the benchmark's rule that such a query failed."""


class GatherLoop:
    """One run of the loop for one question: the subquery tree, pages, selections, rounds and memory.

    The state stays here, off the modules, so one program can serve concurrent runs; `result` can be taken
    at any time, also from a loop cut short by a deadline (the rounds finished before it stand).

    Args:
        question: The research question (node 0 of the tree).
        date_constraint: Papers published after this month (`YYYY-MM`) are out of reach; None for no limit.
        config: The loop's settings.
        host: Where LM calls and searches go and failures are recorded.
        tag: Put before round and subquery ids in events and failure records (e.g. `gather:`).
        full_text: Reads the open-access PDF of an uncertain candidate at the assessor's second look
            (None: the second look reads the candidate's stored text).
    """

    def __init__(
        self,
        question: str,
        date_constraint: str | None,
        config: GatherLoopConfig,
        host: LoopHost,
        tag: str = "",
        full_text: FullTextRetriever | None = None,
    ):
        self.question, self.date_constraint = question, date_constraint or None
        self.config, self.host, self.tag, self.full_text = config, host, tag, full_text
        self.tree = [Subquery(node_id=0, parent_id=None, link="root", text=question, iteration=0)]
        self.pages: dict[int, int] = {}
        self.returned: dict[int, list[str]] = {}
        self.selected: dict[str, Selection] = {}
        self.rounds: list[Round] = []
        self.checklist = ""
        self.memory = ""
        self.last_round: list[RoundResult] = []

    def result(
        self, stop_reason: StopReason, is_failed: bool, usage: dict[str, StageUsage] | None = None
    ) -> GatherResult:
        return GatherResult(
            question=self.question,
            date_constraint=self.date_constraint,
            tree=tuple(self.tree),
            rounds=tuple(self.rounds),
            selected=tuple(self.selected.values()),
            stop_reason=stop_reason,
            is_failed=is_failed,
            usage=usage or {},
        )

    def node_states(self) -> list[SubqueryNode]:
        chosen: dict[int, int] = {}
        for x in self.selected.values():
            chosen[x.node_id] = chosen.get(x.node_id, 0) + 1
        return [
            SubqueryNode(
                node_id=n.node_id,
                parent_id=n.parent_id,
                link=cast(SubqueryLink, n.link),  # the loop's tree holds these links only
                iteration=n.iteration,
                text=n.text,
                pages=self.pages.get(n.node_id, 0),
                retrieved=len(self.returned.get(n.node_id, ())),
                selected=chosen.get(n.node_id, 0),
            )
            for n in self.tree
        ]

    async def run(self) -> tuple[StopReason, bool]:
        """Runs the rounds; returns why the loop stopped and whether the query counts as failed."""
        config, host = self.config, self.host
        for t in range(1, config.iterations + 1):
            halted = host.halted()
            if halted:
                host.events.emit("budget", message=halted[1])
                return halted[0], not self.selected
            inputs = {
                "question": self.question,
                "date_constraint": self.date_constraint or "",
                "subquery_tree": self.node_states(),
                "last_round": self.last_round,
                "checklist": self.checklist,
                "memory": self.memory,
            }
            try:
                plan = await host.plan(**inputs)
            except BudgetExceeded as err:
                host.events.emit("budget", message=str(err))
                return "budget", not self.selected
            except Exception as err:  # the rounds before stand; the failure is recorded by the host
                host.failed(f"{self.tag}{t}", STAGES.gather_plan.loop_step_name, err)
                return "plan_failed", not self.selected
            actions, dropped, repaired = validate_plan(plan.searches, self.tree, self.pages, config)
            if t == 1 and (plan.is_complete or not actions):  # a first plan that would fail the query
                why = "declared the search complete before any search" if plan.is_complete else "had no valid action"
                rescued = await host.rescue(f"the first plan {why}", **inputs)
                if rescued is not None:
                    plan = rescued
                    actions, dropped, repaired = validate_plan(plan.searches, self.tree, self.pages, config)
            self.checklist = clip(plan.checklist, config.memory_chars)
            self.memory = clip(plan.memory, config.memory_chars)
            if plan.is_complete:
                return "complete", not self.selected
            if dropped:
                logger.debug("round %d dropped %d actions: %s", t, len(dropped), "; ".join(dropped))
            if not actions:
                return "no_new_subqueries", t == 1
            searches = await self._round(t, actions)
            self.rounds.append(
                Round(
                    iteration=t,
                    searches=tuple(searches),
                    checklist=self.checklist,
                    memory=self.memory,
                    dropped=tuple(dropped),
                    repaired=repaired,
                )
            )
            host.events.emit(
                "stage_end",
                node_id=f"{self.tag}{t}",
                stage="round",
                counts={
                    "searches": len(searches),
                    "selected": len(self.selected),
                    "dropped": len(dropped),
                    "failed": sum(s.error is not None for s in searches),
                    **{k: sum(getattr(s, k) for s in searches) for k in ("rechecked", "browsed", "unread")},
                },
            )
            halted = host.halted()
            if halted:
                host.events.emit("budget", message=halted[1])
                return halted[0], not self.selected
        return "iterations", False

    async def _round(self, t: int, actions: list[PlannedSearch]) -> list[Search]:
        exclude = frozenset(self.selected)
        calls = []  # (node_id, action, text, k, offset)
        for a in actions:
            if a.action == "continue":
                node = self.tree[a.source_id]
                # Offset in the ranking filtered by today's exclusions: this subquery's earlier results that
                # are still eligible. (The reference counts all earlier results, which skips papers once
                # some of them were selected.)
                offset = sum(d not in exclude for d in self.returned.get(node.node_id, ()))
                calls.append((node.node_id, "continue", node.text, a.target_k, offset))
            else:
                source = self.tree[a.source_id]
                parent = source.node_id if a.action == "derive" or source.parent_id is None else source.parent_id
                node = Subquery(
                    node_id=len(self.tree), parent_id=parent, link=a.action, text=(a.text or "").strip(), iteration=t
                )
                self.tree.append(node)
                calls.append((node.node_id, a.action, node.text, a.target_k, 0))

        async def one(node_id: int, action: str, text: str, k: int, offset: int) -> Search:
            """One search and its assessment; a failure of either is recorded on the search, not raised."""
            search = Search(node_id=node_id, action=action, text=text, k=k, offset=offset, candidates=())
            stage = STAGES.search.loop_step_name
            try:
                hits, ranking = await self._retrieve(text, k, offset, exclude)
                search = replace(search, ranking=ranking)
                stage = STAGES.gather_assess.loop_step_name
                with reading_full_text(self.full_text):
                    assessed = await self.host.assess(
                        question=self.question,
                        subquery=text,
                        checklist=self.checklist,
                        hits=hits,
                        preview_chars=self.config.preview_chars,
                        second_look=self.config.second_look,
                    )
            except Exception as err:  # a budget stop included: the loop checks the budget after the round
                if not isinstance(err, BudgetExceeded):
                    self.host.failed(f"{self.tag}{node_id}", stage, err)
                return replace(search, error=f"{stage}: {type(err).__name__}: {redact(str(err))[:300]}")
            candidates = tuple(
                Candidate(doc_id=h.doc.doc_id, rank=h.rank, score=h.score, label=j.label, reason=j.reason)
                for h, j in zip(hits, assessed.judgements)
            )
            return replace(
                search,
                candidates=candidates,
                feedback=assessed.feedback,
                rechecked=int(getattr(assessed, "rechecked", 0) or 0),
                browsed=int(getattr(assessed, "browsed", 0) or 0),
                unread=int(getattr(assessed, "unread", 0) or 0),
            )

        searches = list(await asyncio.gather(*[one(*c) for c in calls]))
        for s in searches:
            self.pages[s.node_id] = self.pages.get(s.node_id, 0) + 1
            self.returned.setdefault(s.node_id, []).extend(c.doc_id for c in s.candidates)
            for doc_id in s.selected:
                self.selected.setdefault(doc_id, Selection(doc_id=doc_id, iteration=t, node_id=s.node_id))
        self.last_round = [
            RoundResult(
                node_id=s.node_id,
                text=s.text,
                retrieved=len(s.candidates),
                selected=len(s.selected),
                feedback=s.feedback,
            )
            for s in searches
        ]
        return searches

    async def _retrieve(
        self, text: str, k: int, offset: int, exclude: frozenset[str]
    ) -> tuple[list[Hit], tuple[str, ...]]:
        """One page of results and, when `ranking_depth` is set, the ids of the top of the same ranking.

        With a ranking to record, one search of depth max(ranking_depth, offset + k) serves both.
        """
        depth = self.config.ranking_depth
        filters = {"exclude": exclude, "before": self.date_constraint}
        if depth == 0:
            return await self.host.search(text, k, offset=offset, **filters), ()
        top = await self.host.search(text, max(depth, offset + k), offset=0, **filters)
        return top[offset : offset + k], tuple(h.doc.doc_id for h in top[:depth])


class Gatherer(TwinChoice, dspy.Module):
    """Finds the papers that answer a research question with ScholarGym's planner-retriever-assessor loop.

    Args:
        retriever: Any `Retriever`; the loop uses its `offset`, `exclude` and `before` filters. A
            `FullTextRetriever` turns on full text: the loop searches the retriever it wraps and the second
            look at an uncertain candidate reads the paper's PDF (`papers_and_reader`).
        config: Loop settings; `iterations` overrides `config.iterations` when given.
        offline: Give both stages their offline twins (a deterministic planner and assessor, no LM);
            `offline()` returns such a copy of a gatherer.
        lms: Per-stage LMs keyed by stage name, `gather_plan` or `gather_assess` (which also rechecks);
            other stages use the LM in `dspy.settings`.
        on_event: Called with a `stage_end` event after every round.

    Example:
        >>> gatherer = Gatherer(BM25Retriever(load_corpus("scifact")), iterations=3)  # doctest: +SKIP
        >>> out = gatherer(question="Does vitamin D reduce fracture risk?")           # doctest: +SKIP
        >>> out.selected, out.candidates, out.tree, out.result.to_dict()               # doctest: +SKIP
    """

    _NOT_SAVED = (
        "{path} is not a saved gathering program ({error}); pass a file saved by `Gatherer.save` or "
        "`deepresearch optimize --program gather`"
    )

    def __init__(
        self,
        retriever: Retriever,
        config: GatherConfig | None = None,
        *,
        iterations: int | None = None,
        offline: bool = False,
        lms: dict[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ):
        super().__init__()
        if not hasattr(retriever, "search"):
            raise TypeError(f"retriever must have a search(query, k) method, got {type(retriever).__name__}")
        config = config or GatherConfig()
        self.config = config if iterations is None else GatherConfig(**{**asdict(config), "iterations": iterations})
        self._retriever = Shared(retriever)
        self.is_offline = offline
        self.on_event = on_event
        for name, attr in GATHER_STAGES.items():
            setattr(self, attr, STAGES[name].build(self.config, retriever, offline=offline))
        set_stage_lms(self, GATHER_STAGES, lms)

    def offline(self) -> Gatherer:
        """This gatherer with both stages' offline twins: same settings and predictor names, no LM. The twins
        record their answers in DSPy's trace under the LM predictors' names, so it teaches the LM gatherer:
        `dspy.BootstrapFewShot(metric=dr.metrics.gather_f1).compile(gatherer, teacher=gatherer.offline(), ...)`.
        """
        return Gatherer(self.retriever, self.config, offline=True, on_event=self.on_event)

    def stage_table(self) -> dict[str, str]:
        """Stage name -> the attribute holding its module."""
        return dict(GATHER_STAGES)

    def load_state(self, state: dict[str, Any], **options: Any) -> Gatherer:
        """Loads saved (compiled) state; a state compiled for an older assessor signature is refused."""
        check_retired(state, self)
        super().load_state(state, **options)
        return self

    def forward(self, question: str, date_constraint: str | None = None) -> dspy.Prediction:
        return run_sync(self.aforward(question=question, date_constraint=date_constraint))

    async def aforward(self, question: str, date_constraint: str | None = None) -> dspy.Prediction:
        """Gathers papers for `question`; the Prediction has `result` (a GatherResult), `selected` (doc ids in
        order of selection), `candidates` (doc_id -> {node_id: best rank}) and `tree`."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question is empty; pass the research question as a non-empty string")
        meter, events = UsageMeter(), EventLog(self.on_event)
        # with no adapter configured, replies are formatted as on the command line (`--structured auto`)
        adapter = None if self.is_offline or dspy.settings.adapter else structured_adapter("auto", dspy.settings.lm)
        with metered(meter), dspy.context(adapter=adapter) if adapter else contextlib.nullcontext():
            sched = Scheduler(self.config.limits(), meter)
            loop = GatherLoop(
                question.strip(),
                date_constraint,
                self.config,
                _SchedulerHost(self, sched, events),
                full_text=papers_and_reader(self.retriever)[1],
            )
            events.emit("run_start", counts={"iterations": self.config.iterations})
            try:
                stop_reason, is_failed = await asyncio.wait_for(loop.run(), sched.remaining())
            except asyncio.TimeoutError:  # the rounds finished before the deadline stand
                events.emit("budget", message=f"deadline of {self.config.deadline_s:g}s reached")
                stop_reason, is_failed = "deadline", not loop.selected
        result = loop.result(stop_reason, is_failed, meter.snapshot())
        events.emit(
            "run_end", message=stop_reason, counts={"selected": len(result.selected), "rounds": len(result.rounds)}
        )
        return dspy.Prediction(
            result=result,
            selected=[x.doc_id for x in result.selected],
            candidates=result.candidates(),
            tree=result.tree,
        )


class _SchedulerHost:
    """The Gatherer's own run: a scheduler of its own, failures in the log and the events."""

    def __init__(self, gatherer: Gatherer, sched: Scheduler, events: EventLog):
        self.gatherer, self.sched, self.events = gatherer, sched, events

    async def plan(self, **inputs: Any) -> dspy.Prediction:
        return await self.sched.call(self.gatherer.planner, reserve=0, **inputs)

    async def assess(self, **inputs: Any) -> dspy.Prediction:
        return await self.sched.call(self.gatherer.assessor, reserve=0, **inputs)

    async def search(self, query: str, k: int, **filters: Any) -> list[Hit]:
        return await self.sched.search(papers_and_reader(self.gatherer.retriever)[0], query, k, **filters)

    def failed(self, where: str, stage: str, err: BaseException) -> None:
        message = redact(str(err).strip().splitlines()[0][:300]) if str(err).strip() else ""
        logger.warning("gathering %s failed in %s: %s: %s", where, stage, type(err).__name__, message)
        self.events.emit("failure", node_id=where, stage=stage, message=f"{type(err).__name__}: {message}")

    def halted(self) -> tuple[StopReason, str] | None:
        reason = self.sched.exhausted(reserve=0)
        return ("budget", reason) if reason else None

    async def rescue(self, reason: str, **inputs: Any) -> dspy.Prediction | None:
        return None  # the Gatherer is what benchmarks score: a first plan with no valid action fails the query
