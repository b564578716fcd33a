"""Every preset stops at its deadline within seconds and writes its report: on a virtual clock, and in real time."""

from __future__ import annotations

import time
from dataclasses import replace

import dspy
import pytest

from deepresearch.programs.config import preset
from deepresearch.programs.research import DeepResearch
from tests.programs.test_presets import QUESTION, hero_handler, parallel_handler
from tests.research_lm import research_handler
from tests.scripted import scripted_lm
from tests.virtual_clock import run_virtual

HANDLERS = {"eco": research_handler, "hero": hero_handler, "parallel": parallel_handler}


def config_of(name: str, deadline: float):
    # each preset at its own default shape, only the deadline (and hero's call budget) changed
    return preset(name, deadline_s=deadline, max_lm_calls=None)


@pytest.mark.parametrize("name", ["eco", "hero", "parallel"])
def test_each_preset_stops_at_its_deadline_on_the_virtual_clock(scifact_bm25, name):
    # every LM call takes 4 virtual seconds; the whole tree would need minutes; the deadline is 30 s
    lm = scripted_lm(HANDLERS[name](), delay=4.0)
    program = DeepResearch(retriever=scifact_bm25, config=config_of(name, 30.0))

    async def go():
        with dspy.context(lm=lm):
            return await program.acall(question=QUESTION)

    out, elapsed = run_virtual(go())
    grace = 5.0  # the writer's grace after a deadline: max(5 s, a tenth of it), here 5 s; its call takes 4
    assert 30.0 <= elapsed <= 30.0 + grace + 0.5, elapsed
    assert "deadline of 30s reached" in out.stats.stopped
    cut = [n for n in out.report.nodes() if n.status == "cancelled" and n.retrieved_ids and not n.relevant_ids]
    # a node cut between its search and its assessment leaves hits unjudged: the run is partial, and says so
    assert out.report.status == ("partial" if cut else "done"), out.report.error
    assert name != "parallel" or cut  # parallel's wide tree is cut mid-assessment at 30 s
    if cut:
        assert f"the hits of {len(cut)} of" in out.report.error and "This report is partial" in out.markdown
    assert out.markdown.strip() and "## References" in out.markdown and out.stats.nodes >= 1
    assert {n.status for n in out.report.nodes()} <= {"done", "cancelled", "skipped", "pruned", "failed"}
    assert out.stats.cancelled_nodes + out.stats.skipped_nodes >= 1  # the deadline cut real work


@pytest.mark.parametrize("name", ["eco", "hero", "parallel"])
def test_each_preset_stops_at_its_deadline_in_real_time_offline(scifact_bm25, name):
    # offline stages are instant, so the tree grows as fast as searches run: parallel's default shape (depth 10,
    # up to 6 subqueries per node) once ran 1,117 s past a 600 s deadline and wrote nothing
    config = config_of(name, 5.0)
    question = QUESTION
    if name == "eco":  # eco's default tree finishes in a second offline: make it one that cannot (on this
        # question the offline assessor keeps enough for the tree to grow: 19,581 nodes and 40 s without a deadline)
        config = replace(config, depth=10, breadth=6, breadth_rule="fixed")
        question = "Does obesity increase the risk of type 2 diabetes?"
    if name == "hero":  # its shape as it is; first_k selection, so loading the embedding model (seconds on a
        # cold, busy machine) cannot eat the 5 s before the first search
        config = replace(config, hero=replace(config.hero, selection="first_k"))
    program = DeepResearch(retriever=scifact_bm25, config=config, offline=True)
    started = time.monotonic()
    out = program(question=question)
    elapsed = time.monotonic() - started
    # the deadline, then cancellation and the report: seconds, not minutes (the run's own clock, then the
    # wall clock with the event loop's start and shutdown, on a machine that may be busy)
    assert out.stats.total_s < 5.0 + 5.0 and elapsed < 5.0 + 15.0, (out.stats.total_s, elapsed)
    assert out.report.status == "done", out.report.error
    assert out.markdown.strip() and "## References" in out.markdown
    if out.stats.stopped:  # hero's default tree is small: it may finish before its deadline
        assert "deadline" in out.stats.stopped
    assert name == "hero" or out.stats.stopped
