"""`deepresearch eval gather`: files, resume, settings check, LM accounting, frozen-candidate replay."""

import asyncio
import io
import json

import dspy

import cli
from eval.querysets import load_queryset
from eval.run_gather import load_frozen_cases, read_records, run_queries, usage_totals
from programs.gather.loop import CandidateAssessor, Gatherer
from signatures.gather import AssessCandidates, PlanSubqueries
from tests.scripted import inputs_of


def gather(data_dir, out, *extra):
    return cli.main(["eval", "gather", "--queries", str(data_dir / "scifact"), "--qrels", "test", "--lm", "offline",
                     "--limit", "4", "--iterations", "2", "--bootstrap", "50", "--out", str(out), "--no-progress",
                     *extra])


def test_offline_run_writes_results_and_summary_then_resumes(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert gather(data_dir, out) == 0
    printed = capsys.readouterr()
    assert "| F1 |" in printed.out and "LM calls 0" in printed.out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["evaluated"] == 4 and len(summary["per_iteration"]["recall"]) == 2
    assert set(summary["ci95"]) >= {"f1", "ret_f1", "avg_distance"}
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4 and (out / "summary.md").read_text().startswith("# Gathering: loop")

    assert gather(data_dir, out) == 0  # nothing left to do
    assert "4 already done" in capsys.readouterr().err
    assert (out / "results.jsonl").read_text().splitlines() == lines

    (out / "results.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # interrupted mid-write
    assert gather(data_dir, out) == 0
    assert "3 already done" in capsys.readouterr().err
    assert set(read_records(out / "results.jsonl")) == {json.loads(x)["query_id"] for x in lines}
    assert json.loads((out / "summary.json").read_text())["final"] == summary["final"]


def test_resume_refuses_a_run_with_other_settings(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert gather(data_dir, out) == 0
    assert gather(data_dir, out, "--method", "raw") == 2
    assert "different method" in capsys.readouterr().err
    assert gather(data_dir, out, "--method", "raw", "--restart") == 0


def planner(messages):
    if len(json.loads(inputs_of(messages)["subquery_tree"])) > 1:
        return {"searches": [], "checklist_update": "c", "memory_update": "m", "is_complete": False}
    question = inputs_of(messages)["question"]
    return {"searches": [{"action": "derive", "source_id": 0, "text": f"{question[:50]} evidence", "target_k": 5}],
            "checklist_update": "on topic", "memory_update": "m", "is_complete": False}


def keep_first(messages):
    papers = json.loads(inputs_of(messages)["candidates"])
    return {"judgements": [{"source_id": p["paper_id"], "label": "relevant" if i == 0 else "irrelevant",
                            "reason": "r"} for i, p in enumerate(papers)],
            "feedback": {"covered_topics": "t", "relevant": "r", "irrelevant": "i", "suggestions": "s"}}


def test_concurrent_queries_count_lm_calls_and_frozen_candidates_replay(data_dir, scifact, scifact_bm25, tmp_path,
                                                                        make_lm, routed):
    queries = load_queryset(data_dir / "scifact")[:3]
    lm = make_lm(routed({PlanSubqueries: planner, AssessCandidates: keep_first}), delay=0.01)
    sink, done = io.StringIO(), []
    with dspy.context(lm=lm):
        errors = asyncio.run(run_queries(Gatherer(scifact_bm25), queries, 2, sink, done.append))
    assert errors == 0 and [r["status"] for r in done] == ["done"] * 3
    assert usage_totals(done) == {"calls": 9, "prompt_tokens": 90, "completion_tokens": 45}  # 2 plans + 1 assessment each
    path = tmp_path / "results.jsonl"
    path.write_text(sink.getvalue())
    cases = load_frozen_cases(path, scifact)
    assert len(cases) == 3 and all(len(c.hits) == 5 for c in cases)
    assert [c.labels[0] for c in cases] == ["relevant"] * 3 and cases[0].checklist == "on topic"
    replay = make_lm(routed({AssessCandidates: keep_first}))
    with dspy.context(lm=replay):
        out = asyncio.run(CandidateAssessor().acall(question=cases[0].question, subquery=cases[0].subquery,
                                                    checklist=cases[0].checklist, hits=list(cases[0].hits)))
    assert [j.label for j in out.judgements] == list(cases[0].labels) and replay.scripted.calls == 1
