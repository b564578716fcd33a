"""One run's context: every node's life, from planned to finished, behind one construct.

A strategy plans nodes (`ctx.plan_node`), schedules them (`ctx.spawn`) and runs each inside
`async with ctx.node(node_id) as life:`. The context owns what every node's life has in common:
its id and place in the tree, its slot (`life.slot()`), its status (a `NodeStatus`), the stage
running now (set by `life.call` and `life.search`), failures, budget stops, cancellation, pruning,
events, and the journal that lets an interrupted run resume: a node an earlier run finished is
restored from the journal (`life.restored`) and its body skips its own research.

    async with ctx.node(node_id) as life:
        if not life.restored:
            async with life.slot():
                hits = await life.search(task.query, k)
                assessed = await life.call("assess", task=task, sources=life.sources(hits), ...)
                life.update(relevant_ids=...)
                life.spawned = child_tasks
        await ctx.spawn(life.spawned, parent_id=node_id, ...)

Leaving the block ends the node: `done`; `failed` with the error recorded on the node (the run goes on);
`cancelled` when a budget ran out (the run stops) or the run was cancelled; `skipped` when the run had
stopped before the node got a slot; `pruned` when a strategy stopped its subtree (`ctx.prune`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from deepresearch.programs.artifacts import (
    FINAL_STATUSES,
    Failure,
    Node,
    NodeStatus,
    RunStats,
    as_source,
)
from deepresearch.programs.citing.citations import CitationRegistry
from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.lm.models import explain
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.lm.usage import UsageMeter, set_node
from deepresearch.programs.runtime.events import EventLog
from deepresearch.programs.runtime.journal import Journal
from deepresearch.programs.runtime.scheduler import BudgetExceeded, Scheduler
from deepresearch.programs.runtime.stage_log import StageLog
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.types import Doc, Hit, Retriever
from deepresearch.signatures.types import Learning, Source, Task

logger = logging.getLogger(__name__)

Snapshot = Callable[[dict[str, Any]], None]


class Interrupt(asyncio.Event):
    """An event that says why it was set: `interrupt.set("interrupted by SIGINT")` stops a run."""

    def __init__(self):
        super().__init__()
        self.reason = "interrupted"

    def set(self, reason: str = "interrupted") -> None:
        self.reason = reason
        super().set()


class NodeSkipped(Exception):
    """Raised by `life.slot()` when the run stopped (or the node was pruned) while the node waited."""


class TreeStore:
    """The run's nodes as they progress, so a deadline can cut the tree and keep what exists.

    Children keep the order in which their parent planned them, whatever order they finish in.
    """

    def __init__(self):
        self.nodes: dict[str, Node] = {}
        self.children: dict[str, list[str]] = {}
        self.parents: dict[str, str | None] = {}
        self.roots: list[str] = []

    def add(self, node: Node, parent_id: str | None = None) -> Node:
        self.nodes[node.node_id] = node
        self.children[node.node_id] = []
        self.parents[node.node_id] = parent_id
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


class RunContext:
    """Everything one run owns: scheduler, tree, citations, counts, journal, events and how it stopped.

    Args:
        question: The research question.
        config: Caps, budgets, deadline and the strategy's settings.
        modules: Stage name (the vocabulary of `lms=`, usage and the trace) -> its module.
        retriever: What `life.search` searches.
        registry: Source ids of the documents retrieved (a `CitationRegistry`).
        events: The run's event log.
        meter: The run's usage meter (budgets are read from it).
        journal: Where finished nodes are recorded, and restored from on resume.
        interrupt: Set by the caller (a signal handler) to stop the run and write what exists.
        on_snapshot: Called with the tree so far, at most every `snapshot_every_s`, as nodes finish.
        title: The user's question when `question` is the research brief made from it and the answers to
            clarifying questions (reports, headings and the taxonomy's topic name it).
    """

    def __init__(
        self,
        question: str,
        config: ResearchConfig,
        *,
        modules: Mapping[str, dspy.Module],
        retriever: Retriever,
        registry: CitationRegistry,
        events: EventLog,
        meter: UsageMeter,
        journal: Journal | None = None,
        interrupt: asyncio.Event | None = None,
        on_snapshot: Snapshot | None = None,
        snapshot_every_s: float = 2.0,
        title: str | None = None,
        stage_log: StageLog | None = None,
    ):
        self.question, self.config, self.modules, self.retriever = question, config, dict(modules), retriever
        self.stage_log = stage_log
        self.title = title or question  # the user's question, when `question` is a brief built around it
        self.events, self.meter, self.journal = events, meter, journal
        self.interrupt, self.on_snapshot, self.snapshot_every_s = interrupt, on_snapshot, snapshot_every_s
        self.sched = Scheduler(config, meter)
        self.store = TreeStore()
        self.registry = registry
        self.stats = RunStats(strategy=config.strategy, schedule=config.schedule)  # counts kept as the run goes
        self.failures = 0
        self.causes: list[str] = []  # one explanation per failure, for a failed run's message
        self.stop_reason = ""
        self.interrupted = ""  # why the caller interrupted the run, when it did
        self.finding_depth: int | None = None  # only nodes at this depth become findings (None: every node)
        self.pruned: dict[str, str] = {}  # node id -> why its subtree was stopped
        self.gathered: dict[str, Any] | None = None  # the `gather` strategy's loop result, for the report
        self.write_error: OSError | None = None  # the first run file that could not be written (`write_failed`)
        self._twins: dict[str, dspy.Module] = {}  # stage name -> its offline twin, built when first needed
        self._running: dict[str, asyncio.Task] = {}
        self._changed = asyncio.Event()
        self._last_snapshot = 0.0

    # ---- counts and stopping -------------------------------------------------------------------------
    def count(self, **changes: Any) -> None:
        """Adds to (numbers) or sets (other values) fields of the run's `RunStats`."""
        values = {
            k: getattr(self.stats, k) + v if isinstance(v, int) and not isinstance(v, bool) else v
            for k, v in changes.items()
        }
        self.stats = replace(self.stats, **values)

    @property
    def is_stopped(self) -> bool:
        return bool(self.stop_reason)

    def stop(self, reason: str) -> None:
        if not self.stop_reason:
            self.stop_reason = reason
            self.events.emit("budget", message=f"stopping: {reason}")

    def fail(self, node_id: str, stage: str, err: BaseException) -> Failure:
        """Records a failure of `stage` in `node_id` (or `root`): trace, log, counts; returns it."""
        message = redact(str(err).strip().splitlines()[0][:500]) if str(err).strip() else ""
        failure = Failure(
            stage=stage, error_type=type(err).__name__, message=message, cause=explain(err, dspy.settings.lm)
        )
        self.causes.append(failure.cause)
        self.failures += 1
        logger.warning("node %s failed in %s: %s: %s", node_id, stage, failure.error_type, failure.message)
        self.events.emit("failure", node_id=node_id, stage=stage, message=f"{failure.error_type}: {failure.message}")
        if self.failures > self.config.max_failures:
            self.stop(f"more than {self.config.max_failures} failures")
        return failure

    # ---- LM calls and searches outside any node ----------------------------------------------------
    async def call(
        self, stage: str, *, reserve: int | None = None, node_id: str | None = None, **inputs: Any
    ) -> dspy.Prediction:
        """Calls stage `stage`'s module under the run's caps, rate limits and budgets; `reserve` LM calls are
        left for the writer (default: the stage's `reserve` in the stage registry; 1 for a stage it lacks).

        With a stage log, the call's inputs and outputs (or its error) are recorded for `optimize --from-runs`.
        """
        if reserve is None:
            reserve = STAGES[stage].reserve if stage in STAGES else 1
        try:
            return await self._call(stage, reserve, node_id, inputs)
        except AdapterParseError as err:
            if not self.has_twin(stage):
                raise
            fields = getattr(getattr(err, "signature", None), "output_fields", None) or {}
            reason = f"the LM's reply did not parse into {', '.join(fields) or 'its fields'}"
            return await self.answer_offline(stage, reason, **inputs)

    def has_twin(self, stage: str) -> bool:
        """Whether an offline twin can answer for `stage`'s LM module in this run."""
        module = self.modules.get(stage)
        return module is not None and not module.is_offline and stage in STAGES and STAGES[stage].offline is not None

    async def answer_offline(self, stage: str, reason: str, **inputs: Any) -> dspy.Prediction:
        """`stage`'s offline twin answers one call the LM could not: the run goes on with a usable answer, and
        the stats, the events and the log say so (`RunStats.twin_answers`)."""
        twin = self._twins.get(stage)
        if twin is None:
            twin = self._twins[stage] = STAGES[stage].build(self.config, self.retriever, offline=True)
        logger.warning("%s: %s; its offline twin answered instead", stage, reason)
        self.events.emit("fallback", stage=stage, message=f"{reason}; the offline twin answered")
        answered = dict(self.stats.twin_answers)
        answered[stage] = answered.get(stage, 0) + 1
        self.count(twin_answers=answered)
        return await twin.acall(**inputs)

    async def _call(self, stage: str, reserve: int, node_id: str | None, inputs: dict[str, Any]) -> dspy.Prediction:
        if self.stage_log is None:
            return await self.sched.call(self.modules[stage], reserve=reserve, **inputs)
        started = time.perf_counter()
        try:
            out = await self.sched.call(self.modules[stage], reserve=reserve, **inputs)
        except Exception as err:
            self._log_call(stage, node_id, inputs, None, time.perf_counter() - started, type(err).__name__)
            raise
        self._log_call(stage, node_id, inputs, out, time.perf_counter() - started)
        return out

    def _log_call(
        self, stage: str, node_id: str | None, inputs: dict, out: Any, seconds: float, error: str | None = None
    ) -> None:
        assert self.stage_log is not None  # called only with a stage log (`_call` checks)
        try:
            self.stage_log.record(stage, node_id, inputs, out, seconds=seconds, error=error)
        except OSError as err:
            self.write_failed(err)

    def write_failed(self, err: OSError) -> None:
        """A run file (the journal, the stage log) could not be written, a full disk say: the run stops, and
        `DeepResearch` raises the error once the tree is cut, so the run ends as an error naming the file."""
        if self.write_error is None:
            self.write_error = err
            logger.warning("cannot write %s: %s; stopping the run", err.filename or "a run file", err.strerror or err)
        self.stop(f"a run file could not be written ({err.strerror or type(err).__name__})")

    async def once(self, key: str, make: Callable[[], Awaitable[list[Task]]]) -> list[Task]:
        """The tasks of a plan made outside any node (the root plan, a turn), journaled under `key`.

        On resume the journaled plan is returned without calling `make`, with the counts it set.
        """
        saved = self.journal.get(key) if self.journal else None
        if saved is not None:
            if saved.get("stats"):
                self.stats = replace(self.stats, **saved["stats"])
            return [Task(**t) for t in saved["tasks"]]
        before = self.stats
        tasks = await make()
        if self.journal is not None:
            keys = ("plan_fallback", "plan_topped_up")
            changed = {k: getattr(self.stats, k) for k in keys if getattr(before, k) != getattr(self.stats, k)}
            try:
                self.journal.append(key, STAGES.plan.name, tasks=[t.model_dump() for t in tasks], stats=changed)
            except OSError as err:
                self.write_failed(err)
        return tasks

    # ---- nodes -------------------------------------------------------------------------------------
    def plan_node(self, task: Task, parent_id: str | None, *, depth: int, breadth: int) -> str:
        """Adds a node for `task` under `parent_id` (None: a root) and returns its id (`1`, `1.2`...)."""
        siblings = self.store.children[parent_id] if parent_id else self.store.roots
        node_id = f"{parent_id}.{len(siblings) + 1}" if parent_id else str(len(siblings) + 1)
        self.store.add(Node(node_id=node_id, depth=depth, breadth=breadth, query=task.query, goal=task.goal), parent_id)
        self.events.emit("node_planned", node_id=node_id, message=task.query)
        return node_id

    async def spawn(
        self,
        tasks: list[Task],
        *,
        parent_id: str | None,
        level: int,
        breadth: int,
        run: Callable[[str, Task, Callable[[], None]], Awaitable[Any]],
    ) -> list[tuple[str, asyncio.Future]]:
        """Plans a node per task and schedules `run(node_id, task, release)` for each; returns (id, future)s."""
        out = []
        for task in tasks:
            node_id = self.plan_node(task, parent_id, depth=level, breadth=breadth)
            fut = await self.sched.submit(level, functools.partial(run, node_id, task), key=node_id, parent=parent_id)
            out.append((node_id, fut))
        return out

    def node(self, node_id: str) -> NodeLife:
        """The lifecycle of node `node_id`, as an async context manager (see the module docstring)."""
        return NodeLife(self, node_id)

    def update(self, node_id: str, **changes: Any) -> Node:
        return self.store.update(replace(self.store.get(node_id), **changes))

    def prune(self, node_id: str, reason: str, *, include_self: bool = True) -> int:
        """Stops `node_id`'s subtree: unfinished nodes become `pruned` and running ones are cancelled.

        Returns how many unfinished nodes it stopped.
        """
        hit = 0
        for nid in self.store.subtree(node_id)[0 if include_self else 1 :]:
            if nid in self.pruned or self.store.get(nid).status in FINAL_STATUSES:
                continue
            hit += 1
            self.pruned[nid] = reason
            self.update(nid, status="pruned", notes=self.store.get(nid).notes + (f"pruned: {reason}",))
            task = self._running.get(nid)
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        self.events.emit("prune", node_id=node_id, message=reason, counts={"nodes": hit})
        return hit

    async def wait_change(self, timeout: float) -> None:
        """Returns when a node finishes, or after `timeout` seconds."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(0.0, timeout))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def is_live(self, node_id: str) -> bool:
        """Whether any node of `node_id`'s subtree has not finished."""
        return any(self.store.get(n).status not in FINAL_STATUSES for n in self.store.subtree(node_id))

    # ---- the run -----------------------------------------------------------------------------------
    async def run(self, research: Awaitable[None]) -> None:
        """Runs the research phase until it ends, the deadline passes or the caller interrupts it.

        Whatever stops it, running work is cancelled and every node is left in a final status.
        """
        self.sched.pool.spawn(self._guarded(research))
        joined = asyncio.ensure_future(self.sched.pool.join())
        waiters: set[asyncio.Future[Any]] = {joined}
        interrupted = asyncio.ensure_future(self.interrupt.wait()) if self.interrupt is not None else None
        if interrupted is not None:
            waiters.add(interrupted)
        try:
            await asyncio.wait(waiters, timeout=self.sched.remaining(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
        if not joined.done() or (interrupted is not None and interrupted.done() and not interrupted.cancelled()):
            if self.interrupt is not None and self.interrupt.is_set():
                self.interrupted = getattr(self.interrupt, "reason", "") or "interrupted"
                self.events.emit("interrupt", message=self.interrupted)
                self.stop(self.interrupted)
            else:
                self.stop(f"deadline of {self.config.deadline_s:g}s reached")
            cancelled = await self.sched.cancel()
            self.events.emit("budget", message="running work cancelled", counts={"tasks": cancelled})
        for node_id, node in list(self.store.nodes.items()):  # planned but never entered: held when it stopped
            if node.status not in FINAL_STATUSES:
                self.update(node_id, status="skipped" if node.status == "pending" else "cancelled")
        self.count(tree_s=round(self.sched.elapsed(), 4))

    async def _guarded(self, research: Awaitable[None]) -> None:
        """The research phase as a pool task: a failure outside any node is recorded, not raised."""
        try:
            await research
        except BudgetExceeded as err:
            self.stop(str(err))
        except Exception as err:  # recorded, and the report is still written
            self.fail("root", STAGES.plan.name, err)

    def snapshot(self, force: bool = False) -> None:
        """Hands the tree so far to `on_snapshot`, at most every `snapshot_every_s` unless `force`."""
        if self.on_snapshot is None:
            return
        now = time.monotonic()
        if not force and now - self._last_snapshot < self.snapshot_every_s:
            return
        self._last_snapshot = now
        try:
            self.on_snapshot(
                {
                    "status": "running",
                    "question": self.question,
                    "tree": [n.to_dict() for n in self.store.tree()],
                    "events": [vars(e) for e in self.events.events],
                }
            )
        except Exception as err:  # a failing writer must not stop research
            logger.warning("snapshot failed: %s: %s", type(err).__name__, err)


class NodeLife:
    """One node's life inside `async with ctx.node(node_id) as life:` (see deepresearch.programs.runtime.context)."""

    def __init__(self, ctx: RunContext, node_id: str):
        self.ctx, self.node_id = ctx, node_id
        self.stage = STAGES.search.name  # the stage running now, for the failure record
        self.spawned: list[Task] = []  # the tasks this node spawns (journaled, restored on resume)
        self.counted: dict[str, int] = {}  # this node's additions to the run's counts (restored on resume)
        self.registered: list[tuple[str, Doc]] = []  # documents this node was first to register
        self.cut_short = False  # the run stopped before this node's own work was whole (see `stopped`)
        saved = ctx.journal.get(f"node:{node_id}") if ctx.journal else None
        self.saved = saved if saved and saved["node"]["query"] == self.node.query else None

    @property
    def node(self) -> Node:
        return self.ctx.store.get(self.node_id)

    @property
    def restored(self) -> bool:
        """Whether an earlier run finished this node; its state is restored and its research skipped."""
        return self.saved is not None

    def update(self, **changes: Any) -> Node:
        return self.ctx.update(self.node_id, **changes)

    async def __aenter__(self) -> NodeLife:
        set_node(self.node_id)
        task = asyncio.current_task()
        assert task is not None  # awaited inside the node's task
        self.ctx._running[self.node_id] = task
        if self.saved is not None:
            self._restore(self.saved)
        return self

    def _restore(self, saved: dict[str, Any]) -> None:
        d = saved["node"]
        for _source_id, doc in saved.get("sources", []):
            self.ctx.registry.register(Doc(text="", **doc))
        self.update(
            retrieved_ids=tuple(d["retrieved_ids"]),
            relevant_ids=tuple(d["relevant_ids"]),
            learnings=tuple(Learning(**x) for x in d["learnings"]),
            follow_ups=tuple(d["follow_ups"]),
            summary=d["summary"],
            notes=tuple(d.get("notes", ())),
            status=d["status"],
        )
        self.spawned = [Task(**t) for t in saved.get("spawned", [])]
        self.ctx.count(resumed_nodes=1, **saved.get("stats", {}))

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Holds one of the run's node slots for the node's own research.

        Raises:
            NodeSkipped: when the run stopped, or the node was pruned, while it waited for the slot.
        """
        async with self.ctx.sched.node_slots:
            if self.ctx.is_stopped or self.node_id in self.ctx.pruned:
                raise NodeSkipped(self.node_id)
            self.update(status="running")
            self.ctx.events.emit("node_start", node_id=self.node_id, message=self.node.query)
            yield

    async def search(self, query: str, k: int) -> list[Hit]:
        self.stage = STAGES.search.name
        hits = await self.ctx.sched.search(self.ctx.retriever, query, k)
        self.ctx.count(searches=1)
        return hits

    def stopped(self) -> bool:
        """Whether the run has stopped, so the node skips the rest of its work (its children, a paragraph).

        A node that skipped work is not journaled: restored on resume it would stay without the children a
        run that never stopped gives it, so a resumed run researches it again instead.
        """
        if self.ctx.is_stopped:
            self.cut_short = True
        return self.ctx.is_stopped

    def count(self, **changes: int) -> None:
        """Adds to the run's counts on behalf of this node (journaled with it, so a resume keeps them)."""
        self.ctx.count(**changes)
        for k, v in changes.items():
            self.counted[k] = self.counted.get(k, 0) + v

    def sources(self, hits: list[Hit]) -> list[Source]:
        """The LM's view of `hits`, each registered under its stable source id."""
        out = []
        for h in hits:
            before = len(self.ctx.registry)
            sid = self.ctx.registry.register(h.doc)
            if len(self.ctx.registry) > before:
                self.registered.append((sid, h.doc))
            out.append(as_source(h, sid, self.ctx.config.passage_chars))
        return out

    async def call(self, stage: str, **inputs: Any) -> dspy.Prediction:
        """Calls stage `stage` for this node; a failure is attributed to it."""
        self.stage = stage
        return await self.ctx.call(stage, node_id=self.node_id, **inputs)

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        ctx = self.ctx
        ctx._running.pop(self.node_id, None)
        ctx._notify()
        if self.saved is not None and exc is None:
            ctx.events.emit("node_end", node_id=self.node_id, message=self.node.status, counts={"resumed": 1})
            return False
        suppress, changes = True, {}
        if exc is None:
            status: NodeStatus = "pruned" if self.node_id in ctx.pruned else "done"
        elif isinstance(exc, NodeSkipped):
            status = "pruned" if self.node_id in ctx.pruned else "skipped"
        elif isinstance(exc, asyncio.CancelledError):
            status = "pruned" if self.node_id in ctx.pruned else "cancelled"
            suppress = self.node_id in ctx.pruned  # a pruned node ends quietly; a cancelled run goes on cancelling
        elif isinstance(exc, BudgetExceeded):
            ctx.stop(str(exc))
            status = "cancelled"
        elif isinstance(exc, Exception):  # a failing branch is recorded on its node; the run goes on
            status, changes = "failed", {"error": ctx.fail(self.node_id, self.stage, exc)}
        else:  # KeyboardInterrupt, SystemExit: not ours to handle
            status, suppress = "cancelled", False
        # the notes of this node's LM calls (truncations, fallbacks) go with it, into the journal too
        node = self.update(status=status, notes=self.node.notes + ctx.meter.notes(self.node_id), **changes)
        ctx.events.emit(
            "node_end",
            node_id=self.node_id,
            message=status,
            counts={
                "hits": len(node.retrieved_ids),
                "relevant": len(node.relevant_ids),
                "learnings": len(node.learnings),
                "children": len(self.spawned),
            },
        )
        # pruning is the run's decision: kept; a node cut short by a stopping run is done again on resume
        if status in ("done", "pruned") and ctx.journal is not None and not self.cut_short:
            try:
                ctx.journal.append(
                    f"node:{self.node_id}",
                    "node",
                    node=node.to_dict(),
                    parent=ctx.store.parents[self.node_id],
                    spawned=[t.model_dump() for t in self.spawned],
                    stats=self.counted,
                    sources=[(sid, _doc_record(d)) for sid, d in self.registered],
                )
            except OSError as err:
                ctx.write_failed(err)
        ctx.snapshot()
        return suppress


def _doc_record(doc: Doc) -> dict[str, Any]:
    """What the references need of a document: its bibliographic fields, not its text."""
    record = {k: v for k, v in vars(doc).items() if k != "text"}
    return {**record, "metadata": dict(doc.metadata)}
