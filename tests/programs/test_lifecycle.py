"""The node lifecycle every strategy shares (deepresearch.programs.runtime.context), and the typed vocabulary of a run."""

from __future__ import annotations

import asyncio
from typing import get_args

import dspy
import pytest

from deepresearch.programs.artifacts import (
    FINAL_STATUSES,
    NODE_STATUSES,
    NodeStatus,
    Report,
    RunStats,
    RunStatus,
)
from deepresearch.programs.citing.citations import CitationRegistry
from deepresearch.programs.config import ResearchConfig, preset
from deepresearch.programs.research import DeepResearch
from deepresearch.programs.runtime.context import RunContext
from deepresearch.programs.runtime.events import EVENT_KINDS, EventLog
from deepresearch.programs.runtime.journal import Journal
from deepresearch.programs.runtime.scheduler import BudgetExceeded, CostMeter
from deepresearch.programs.runtime.stage import Stage
from deepresearch.signatures.types import Task
from tests.programs.test_presets import QUESTION, hero_handler, parallel_handler
from tests.research_lm import research_handler
from tests.scripted import scripted_lm


def test_statuses_and_event_kinds_are_closed_vocabularies():
    assert NODE_STATUSES == ("pending", "running", "done", "failed", "skipped", "pruned", "cancelled")
    assert set(FINAL_STATUSES) == set(NODE_STATUSES) - {"pending", "running"}
    assert get_args(RunStatus) == ("done", "failed", "partial", "interrupted") and get_args(NodeStatus) == NODE_STATUSES
    assert set(EVENT_KINDS) == {
        "run_start",
        "node_planned",
        "node_start",
        "node_end",
        "stage_end",
        "failure",
        "fallback",
        "budget",
        "prune",
        "interrupt",
        "run_end",
    }
    with pytest.raises(ValueError, match="unknown event kind 'node_done'"):
        EventLog().emit("node_done")


class Echo(Stage):
    """A stage module without an LM: returns what it is given, or raises what it is told to."""

    async def aforward(self, value=None, error=None):
        if error is not None:
            raise error
        return dspy.Prediction(value=value)


class Bm25Like:
    def search(self, query, k=10, **filters):
        return []


async def lifecycle_run(body, config=None, journal=None):
    """Runs `body(ctx)` as the research phase of a run whose only stage is `echo`; returns the context."""
    config = config or ResearchConfig()
    ctx = RunContext(
        "q",
        config,
        modules={"echo": Echo()},
        retriever=Bm25Like(),
        registry=CitationRegistry(),
        events=EventLog(),
        meter=CostMeter(),
        journal=journal,
    )
    await ctx.run(body(ctx))
    return ctx


def test_one_construct_records_done_failed_cancelled_and_skipped():
    async def body(ctx):
        ids = [ctx.plan_node(Task(query=f"t{i}", goal="g"), None, depth=1, breadth=4) for i in range(4)]

        async def ok(life):
            await life.call("echo", value=1)
            life.update(summary="s")

        async def broken(life):
            await life.call("echo", value=1)
            await life.call("echo", error=RuntimeError("boom"))

        async def over_budget(life):
            raise BudgetExceeded("LM call budget of 3 reached")

        for node_id, work in zip(ids[:3], (ok, broken, over_budget)):
            async with ctx.node(node_id) as life:
                async with life.slot():
                    await work(life)
        async with ctx.node(ids[3]) as life:  # the budget stopped the run: this one never gets to work
            async with life.slot():
                raise AssertionError("a stopped run gave a slot")

    ctx = asyncio.run(lifecycle_run(body))
    status = {n: ctx.store.get(n).status for n in ctx.store.nodes}
    assert status == {"1": "done", "2": "failed", "3": "cancelled", "4": "skipped"}
    failure = ctx.store.get("2").error
    assert (failure.stage, failure.error_type, failure.message) == ("echo", "RuntimeError", "boom")
    assert ctx.stop_reason == "LM call budget of 3 reached"
    kinds = [(e.kind, e.node_id, e.message) for e in ctx.events.events if e.node_id]
    assert kinds[:4] == [("node_planned", str(i), f"t{i - 1}") for i in range(1, 5)]
    assert [(k, m) for k, n, m in kinds if k == "node_end"] == [
        ("node_end", s) for s in ("done", "failed", "cancelled", "skipped")
    ]
    assert sum(k == "node_start" for k, _, _ in kinds) == 3


def test_nodes_never_entered_are_skipped_and_a_pruned_subtree_stops(tmp_path):
    async def body(ctx):
        root = ctx.plan_node(Task(query="root", goal="g"), None, depth=1, breadth=1)
        child = ctx.plan_node(Task(query="child", goal="g"), root, depth=2, breadth=1)
        ctx.plan_node(Task(query="never", goal="g"), None, depth=1, breadth=1)

        async def child_work():
            async with ctx.node(child) as life:
                async with life.slot():
                    await asyncio.sleep(30)  # pruned while it runs

        task = asyncio.ensure_future(child_work())
        async with ctx.node(root) as life:
            async with life.slot():
                await asyncio.sleep(0.01)
                assert ctx.prune(root, "satisfied", include_self=False) == 1
        await task

    journal = Journal(tmp_path / "journal.jsonl", "q")
    ctx = asyncio.run(lifecycle_run(body, journal=journal))
    journal.close()
    assert [ctx.store.get(n).status for n in ("1", "1.1", "2")] == ["done", "pruned", "skipped"]
    assert "pruned: satisfied" in ctx.store.get("1.1").notes
    assert set(Journal(tmp_path / "journal.jsonl", "q", resume=True).entries) == {"node:1", "node:1.1"}


@pytest.mark.parametrize(
    "name,handler", [("eco", research_handler), ("hero", hero_handler), ("parallel", parallel_handler)]
)
def test_every_strategy_plans_announces_and_ends_every_node(scifact_bm25, name, handler):
    config = preset(name, depth=2, deadline_s=None, max_lm_calls=None)
    if name == "parallel":
        from dataclasses import replace

        config = replace(config, parallel=replace(config.parallel, orchestrate=False, max_breadth=3))
    program = DeepResearch(retriever=scifact_bm25, config=config)
    with dspy.context(lm=scripted_lm(handler())):
        out = program(question=QUESTION)
    nodes = out.report.nodes()
    planned = [e.node_id for e in out.events if e.kind == "node_planned"]
    ended = [e.node_id for e in out.events if e.kind == "node_end"]
    # a progress bar's total: one node_planned per node of the tree, one node_end for each
    assert sorted(planned) == sorted(ended) == sorted(n.node_id for n in nodes) and len(planned) == out.stats.nodes
    assert {n.status for n in nodes} <= set(FINAL_STATUSES)
    if name == "hero":  # 3 turns x 3 pipelines x (1 + 2 enrichments)
        assert program.planned_nodes() == 27 == len(planned)
    if name == "eco":
        assert program.planned_nodes() == len(planned) == 4 + 4 * 2  # the eco preset's 2 x 4: 4 roots, 2 children each
    # one stage vocabulary: usage, failures and lms= all speak the program's stage names
    assert set(out.usage) <= set(program.stage_table())
    assert isinstance(out.stats, RunStats) and Report.from_dict(out.report.to_dict()).stats == out.stats
