"""Runs that survive a kill: the journal records finished nodes, and a resumed run redoes none of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dspy
import pytest

from deepresearch.programs.research import DeepResearch
from deepresearch.programs.runtime.journal import Journal, JournalError
from tests.programs.resume_cases import QUESTION, case
from tests.programs.test_research import CountingRetriever
from tests.scripted import inputs_of, scripted_lm

ROOT = Path(__file__).resolve().parents[2]


def node_entries(path: Path) -> list[dict]:
    entries = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # the line the kill cut
            continue
        if entry.get("kind") == "node":
            entries.append(entry)
    return entries


def kill_after(journal: Path, preset_name: str, nodes: int, data: Path) -> None:
    """Starts the run in a process of its own and kills it (SIGKILL) once `nodes` nodes are journaled."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.programs.resume_worker", preset_name, str(journal), str(data)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(node_entries(journal)) >= nodes:
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def run(preset_name: str, retriever, journal: Path | None = None, resume: bool = False):
    config, handler = case(preset_name)
    lm = scripted_lm(handler)
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=retriever, config=config)(question=QUESTION, journal=journal, resume=resume)
    return out, lm


@pytest.mark.parametrize("preset_name,kill_at", [("eco", 3), ("hero", 2), ("parallel", 3)])
def test_a_killed_run_resumes_without_redoing_finished_nodes(tmp_path, scifact_bm25, data_dir, preset_name, kill_at):
    whole, _ = run(preset_name, scifact_bm25)
    journal = tmp_path / "journal.jsonl"
    kill_after(journal, preset_name, kill_at, data_dir / "scifact")
    finished = {
        e["node"]["node_id"]: e["node"]["query"] for e in node_entries(journal) if e["node"]["status"] == "done"
    }
    assert len(finished) >= kill_at

    counting = CountingRetriever(scifact_bm25)
    resumed, lm = run(preset_name, counting, journal=journal, resume=True)
    # no search and no LM call for a finished node: its query is neither searched nor shown as a task
    assert not set(finished.values()) & set(counting.queries)
    tasks = [json.loads(a["task"])["query"] for a in map(inputs_of, lm.scripted.prompts) if "task" in a]
    assert tasks and not set(finished.values()) & set(tasks)
    assert resumed.stats.resumed_nodes == len(finished)
    # and the same report as the run that was never interrupted
    assert resumed.report.status == "done" and resumed.markdown == whole.markdown
    assert [(n.node_id, n.status, n.summary) for n in resumed.report.nodes()] == [
        (n.node_id, n.status, n.summary) for n in whole.report.nodes()
    ]
    assert len(counting.queries) == whole.stats.searches - len(
        [n for n in whole.report.nodes() if n.node_id in finished and n.retrieved_ids]
    )


def test_a_journal_of_another_question_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    Journal(path, "question one").close()
    with pytest.raises(JournalError, match="belongs to another question"):
        Journal(path, "question two", resume=True)
    Journal(path, "question one", resume=True).close()  # the same question resumes


def test_a_line_cut_by_a_kill_is_ignored_and_other_damage_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path, "q")
    j.append("node:1", "node", node={"node_id": "1"})
    j.close()
    with open(path, "a") as f:
        f.write('{"kind": "node", "key": "node:2", "no')  # the kill came mid-line
    j = Journal(path, "q", resume=True)
    assert set(j.entries) == {"node:1"}
    j.append("node:2", "node", node={"node_id": "2"})  # the cut line was cut: node 2 starts a line of its own
    j.close()
    assert set(Journal(path, "q", resume=True).entries) == {"node:1", "node:2"}
    path.write_text(path.read_text().replace('"key": "node:1"', '"key": node:1'))
    with pytest.raises(JournalError, match="line 2 is damaged; pass --overwrite"):
        Journal(path, "q", resume=True)


def test_a_node_cut_short_by_a_stopping_run_is_researched_again_on_resume(tmp_path, scifact_bm25):
    # node 1's extraction fails and, with max_failures=0, stops the run while node 2's merge is under way
    # (its reply is slow): node 2 then ends without asking for its children. It must not be journaled as
    # finished, or the resumed run would restore it childless and write a smaller tree than a run that
    # was never stopped
    from deepresearch.programs.config import ResearchConfig
    from deepresearch.signatures import ExtractLearnings
    from tests.research_lm import _extract, research_handler

    config = ResearchConfig(depth=2, breadth=2, max_failures=0, parse_retries=0)

    def extract(messages):
        if "aspect 1" in inputs_of(messages)["task"]:
            raise RuntimeError("the model server broke on this request")  # unparseable would be the twin's
        return _extract(messages)

    def slow_merge_of_node_2(messages):
        asked = inputs_of(messages)
        return 0.3 if "learnings" in asked and "aspect 2" in asked.get("task", "") else 0.0

    def research(handler, **kw):
        with dspy.context(lm=scripted_lm(handler, delay=slow_merge_of_node_2)):
            return DeepResearch(retriever=scifact_bm25, config=config)(question=QUESTION, **kw)

    journal = tmp_path / "journal.jsonl"
    stopped = research(research_handler({ExtractLearnings: extract}), journal=journal)
    assert stopped.stats.stopped == "more than 0 failures"
    assert [(n.status, n.children) for n in stopped.tree] == [("failed", ()), ("done", ())]
    assert node_entries(journal) == []  # node 2 did not finish its part: nothing to restore

    resumed = research(research_handler(), journal=journal, resume=True)
    whole = research(research_handler())
    assert len(whole.report.nodes()) == 2 + 2 * 1
    assert [(n.node_id, n.status, n.summary) for n in resumed.report.nodes()] == [
        (n.node_id, n.status, n.summary) for n in whole.report.nodes()
    ]
