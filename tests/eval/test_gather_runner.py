"""`deepresearch eval gather`: files, resume (after a kill too), settings check, LM accounting, frozen-candidate
replay; and the record files every eval runner appends to (`deepresearch.programs.formats.jsonl`)."""

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dspy
import pytest

from deepresearch import cli
from deepresearch.eval.querysets import load_queryset
from deepresearch.eval.run_gather import load_frozen_cases, read_records, run_queries, usage_totals
from deepresearch.programs.formats.jsonl import JsonlAppender, JsonlError, read_jsonl
from deepresearch.programs.gather.loop import Gatherer
from deepresearch.programs.stages.gathering import CandidateAssessor
from deepresearch.signatures.gather import LabelCandidates, PlanSubqueries
from tests.scripted import inputs_of

ROOT = Path(cli.__file__).resolve().parent


def gather_argv(data_dir, out, *extra, limit=4):
    return [
        "eval",
        "gather",
        "--data",
        str(data_dir / "scifact"),
        "--qrels",
        "test",
        "--lm",
        "offline",
        "--limit",
        str(limit),
        "--iterations",
        "2",
        "--bootstrap",
        "50",
        "--out",
        str(out),
        "-q",
        *extra,
    ]


def gather(data_dir, out, *extra, limit=4):
    return cli.main(gather_argv(data_dir, out, *extra, limit=limit))


def kill_when(records: Path, count: int, argv: list[str]) -> None:
    """Runs `deepresearch argv` in a process of its own and kills it (SIGKILL) once `records` holds `count`
    finished lines, failing if the run ends first (its stderr goes to a file beside the run's folder)."""
    with open(records.parent.with_suffix(".stderr"), "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "deepresearch.cli", *argv],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if records.exists() and records.read_bytes().count(b"\n") >= count:
                break
            time.sleep(0.01)
        still_running = proc.poll() is None
        if still_running:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert still_running, f"the run ended before it could be killed: {Path(err.name).read_text()[-2000:]}"


def summary_without_timing(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("seconds")
    return summary


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
    assert gather(data_dir, out, "--method", "raw", "--overwrite") == 0


def test_a_killed_run_resumes_without_redoing_finished_queries(data_dir, tmp_path, capsys):
    out = tmp_path / "killed"
    results = out / "results.jsonl"
    kill_when(results, 3, gather_argv(data_dir, out, limit=120))
    finished = read_records(results)  # a line the kill cut is ignored
    assert len(finished) >= 3 and not (out / "summary.json").exists()
    finished_lines = [json.dumps(r, ensure_ascii=False) for r in finished.values()]

    assert gather(data_dir, out, limit=120) == 0
    assert f"120 queries · {len(finished)} already done" in capsys.readouterr().err
    records = read_jsonl(results)
    assert len(records) == 120 and len({r["query_id"] for r in records}) == 120  # no query recorded twice
    assert [json.dumps(r, ensure_ascii=False) for r in records[: len(finished)]] == finished_lines

    assert gather(data_dir, tmp_path / "whole", limit=120) == 0  # never interrupted
    assert summary_without_timing(out) == summary_without_timing(tmp_path / "whole")


def test_a_damaged_line_before_the_last_stops_the_run_naming_it(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert gather(data_dir, out) == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join([lines[0], lines[1][:40], *lines[2:]]) + "\n")
    capsys.readouterr()
    assert gather(data_dir, out) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert (
        len(err) == 1 and f"{out / 'results.jsonl'} line 2 is not a JSON record" in err[0] and "--overwrite" in err[0]
    )
    assert gather(data_dir, out, "--overwrite") == 0


def test_reader_ignores_only_a_cut_last_line(tmp_path, caplog):
    path = tmp_path / "r.jsonl"
    whole = json.dumps({"id": 2, "title": "Vitamin D – fracture risk"}, ensure_ascii=False).encode()
    path.write_bytes(b'{"id": 1}\n\n' + whole[:-6])
    with caplog.at_level(logging.WARNING, logger="deepresearch.programs.formats.jsonl"):
        assert read_jsonl(path) == [{"id": 1}]
    assert "line 3 is incomplete" in caplog.text
    path.write_bytes(b'{"id": 1}\n' + whole[: whole.index("–".encode()) + 1])  # cut inside a character's bytes
    assert read_jsonl(path) == [{"id": 1}]
    path.write_bytes(b'{"id": 1}\n{"id": 2\n{"id": 3}\n')
    with pytest.raises(JsonlError, match=re.escape(f"{path} line 2 is not a JSON record; fix or remove the line")):
        read_jsonl(path)
    path.write_bytes(b'{"id": 1}\n[1, 2]\n{"id": 3}\n')  # JSON, but not a record
    with pytest.raises(JsonlError, match="line 2"):
        read_jsonl(path)
    assert read_jsonl(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize(
    "tail,kept",
    [
        (b'{"id": 2, "x": [1, ', [{"id": 1}]),  # cut mid-record: dropped
        (b'{"id": 2}', [{"id": 1}, {"id": 2}]),  # only the newline cut: kept
        (b"", [{"id": 1}]),
    ],
)
def test_appender_starts_after_the_last_whole_record_and_fsyncs_each(tmp_path, monkeypatch, tail, kept):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"id": 1}\n' + tail)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    with JsonlAppender(path) as sink:
        before = len(synced)
        sink.append({"id": 9, "text": "é"})
        sink.append({"id": 10})
        assert len(synced) == before + 2  # one fsync per record, before append returns
    assert read_jsonl(path) == [*kept, {"id": 9, "text": "é"}, {"id": 10}]
    assert path.read_bytes().endswith(b'{"id": 10}\n')


def planner(messages):
    if len(json.loads(inputs_of(messages)["subquery_tree"])) > 1:
        return {"searches": [], "checklist_update": "c", "memory_update": "m", "is_complete": False}
    question = inputs_of(messages)["question"]
    return {
        "searches": [{"action": "derive", "source_id": 0, "text": f"{question[:50]} evidence", "target_k": 5}],
        "checklist_update": "on topic",
        "memory_update": "m",
        "is_complete": False,
    }


def keep_first(messages):
    papers = json.loads(inputs_of(messages)["candidates"])
    return {"relevance": {p["paper_id"]: "relevant" if i == 0 else "irrelevant" for i, p in enumerate(papers)}}


def test_concurrent_queries_count_lm_calls_and_frozen_candidates_replay(
    data_dir, scifact, scifact_bm25, tmp_path, make_lm, routed
):
    queries = load_queryset(data_dir / "scifact")[:3]
    lm = make_lm(routed({PlanSubqueries: planner, LabelCandidates: keep_first}), delay=0.01)
    path, done = tmp_path / "results.jsonl", []
    with dspy.context(lm=lm), JsonlAppender(path) as sink:
        errors = asyncio.run(run_queries(Gatherer(scifact_bm25), queries, 2, sink, done.append))
    assert errors == 0 and [r["status"] for r in done] == ["done"] * 3
    assert usage_totals(done) == {
        "calls": 9,
        "prompt_tokens": 90,
        "completion_tokens": 45,
    }  # 2 plans + 1 assessment each
    assert [r["query_id"] for r in read_jsonl(path)] == [r["query_id"] for r in done]
    cases = load_frozen_cases(path, scifact)
    assert len(cases) == 3 and all(len(c.hits) == 5 for c in cases)
    assert [c.labels[0] for c in cases] == ["relevant"] * 3 and cases[0].checklist == "on topic"
    replay = make_lm(routed({LabelCandidates: keep_first}))
    with dspy.context(lm=replay):
        out = asyncio.run(
            CandidateAssessor().acall(
                question=cases[0].question,
                subquery=cases[0].subquery,
                checklist=cases[0].checklist,
                hits=list(cases[0].hits),
            )
        )
    assert [j.label for j in out.judgements] == list(cases[0].labels) and replay.scripted.calls == 1


def test_summaries_name_their_protocol_and_a_rescore_reuses_the_runs(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert gather(data_dir, out) == 0
    official = json.loads((out / "summary.json").read_text())
    assert official["protocol"] == "official" and "f426fd1" in official["protocol_source"]
    assert json.loads((out / "run.json").read_text())["protocol"] == "official"
    markdown = (out / "summary.md").read_text()
    assert "Protocol official: ScholarGym's released scorer" in markdown and "| GT discard (fraction) |" in markdown
    lines = (out / "results.jsonl").read_text()
    capsys.readouterr()
    assert gather(data_dir, out, "--protocol", "spec") == 0  # the scoring is no setting of the runs: rescored
    assert "4 already done" in capsys.readouterr().err and (out / "results.jsonl").read_text() == lines
    spec = json.loads((out / "summary.json").read_text())
    assert spec["protocol"] == "spec" and "| GT discard (%) |" in (out / "summary.md").read_text()
    assert spec["final"]["recall"] == official["final"]["recall"]


def test_a_replayed_run_ending_in_empty_plans_is_failed_under_official_and_kept_under_spec(data_dir, tmp_path, capsys):
    # The offline planner declares completion once it has no page left (kept by both protocols); the same
    # runs, recorded as ending with an empty plan instead, are what the released workflow drops.
    out = tmp_path / "run"
    assert gather(data_dir, out, "--iterations", "5") == 0
    completed = json.loads((out / "summary.json").read_text())
    records = read_jsonl(out / "results.jsonl")
    assert {r["result"]["stop_reason"] for r in records} == {"complete"} and completed["evaluated"] == 4
    assert all(len(r["result"]["rounds"]) >= 1 for r in records)
    (out / "results.jsonl").write_text(
        "".join(
            json.dumps({**r, "result": {**r["result"], "stop_reason": "no_new_subqueries"}}) + "\n" for r in records
        )
    )
    capsys.readouterr()
    assert gather(data_dir, out, "--iterations", "5") == 0  # every query done: only rescored
    official = json.loads((out / "summary.json").read_text())
    assert (official["evaluated"], official["failed_by_stop"], official["final"]) == (0, {"no_new_subqueries": 4}, {})
    assert "every query with ground truth failed under --protocol official" in capsys.readouterr().err
    assert gather(data_dir, out, "--iterations", "5", "--protocol", "spec") == 0  # empty plan after round 1: kept
    spec = json.loads((out / "summary.json").read_text())
    assert (spec["evaluated"], spec["failed"]) == (4, 0) and spec["final"]["recall"] == completed["final"]["recall"]
    assert gather(data_dir, out, "--iterations", "5", "--failed", "included") == 0
    included = json.loads((out / "summary.json").read_text())
    assert (included["evaluated"], included["failed"]) == (4, 4)
    assert included["final"]["recall"] == completed["final"]["recall"]
    assert included["final"]["avg_distance"] == completed["final"]["avg_distance"]


def gather_lm_handler():
    """The scripted gathering LM (planner, assessor) behind real HTTP, so worker processes reach it too."""
    from tests.scripted import routed_handler

    def plan_then_stop(messages):  # one search, then the checklist is met
        if len(json.loads(inputs_of(messages)["subquery_tree"])) > 1:
            return {"searches": [], "checklist_update": "met", "memory_update": "m", "is_complete": True}
        return planner(messages)

    return routed_handler({PlanSubqueries: plan_then_stop, LabelCandidates: keep_first})


def records_without_timing(out: Path) -> dict[str, dict]:
    """query_id -> its record, without the seconds it and its stages took."""
    records = {}
    for r in read_jsonl(out / "results.jsonl"):
        usage = {stage: {k: v for k, v in u.items() if k != "seconds"} for stage, u in r["result"]["usage"].items()}
        records[r["query_id"]] = {
            **{k: v for k, v in r.items() if k != "seconds"},
            "result": {**r["result"], "usage": usage},
        }
    return records


def test_queries_on_worker_processes_give_the_in_process_results_and_resume_what_is_left(data_dir, tmp_path, capsys):
    from tests.integration.openai_server import LocalOpenAIServer

    with LocalOpenAIServer(gather_lm_handler()) as server:
        lm = ["--lm", "openai/scripted", "--api-base", server.base_url, "--no-cache"]
        assert gather(data_dir, tmp_path / "here", *lm, limit=3) == 0
        here = records_without_timing(tmp_path / "here")
        assert len(here) == 3 and all(r["status"] == "done" for r in here.values())
        assert usage_totals(here.values())["calls"] == 9  # the LM was asked: 2 plans + 1 assessment per query
        assert json.loads((tmp_path / "here" / "summary.json").read_text())["evaluated"] == 3

        pool = tmp_path / "pool"
        capsys.readouterr()
        assert gather(data_dir, pool, "--workers", "2", *lm, limit=3) == 0
        assert "queries on local (2 at once)" in capsys.readouterr().err
        assert records_without_timing(pool) == here
        assert summary_without_timing(pool) == summary_without_timing(tmp_path / "here")

        # resume on the pool: only the queries without a finished record run again
        lines = (pool / "results.jsonl").read_text().splitlines()
        (pool / "results.jsonl").write_text(lines[0] + "\n")
        capsys.readouterr()
        before = len(server.requests)
        assert gather(data_dir, pool, "--workers", "2", *lm, limit=3) == 0
        assert "3 queries · 1 already done" in capsys.readouterr().err
        redone = [q for q in here if q != json.loads(lines[0])["query_id"]]
        assert len(server.requests) - before == 1 + usage_totals(here[q] for q in redone)["calls"]  # + preflight
        assert (pool / "results.jsonl").read_text().splitlines()[0] == lines[0]
        assert records_without_timing(pool) == here


def test_a_dead_lm_fails_the_run_in_one_line_and_records_nothing(data_dir, tmp_path, capsys, monkeypatch):
    # every query ended `plan_failed` with no reply from the model and the command exited 0 with a summary of
    # nothing; a rerun then took those queries as done
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", "sk-dead-lm-0123456789abcdef")
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    out = tmp_path / "new" / "run"
    lm = ["--lm", "openai/scripted", "--api-base", base_url, "--no-preflight", "--no-cache"]
    assert gather(data_dir, out, *lm, limit=2) == 3
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if "error" in x]
    assert line.startswith("deepresearch eval gather: error: no query got an answer from the model: could not reach")
    assert base_url in line and "none answered" in line and "rerun the same command" in line
    assert "sk-dead-lm" not in err
    assert not (tmp_path / "new").exists()  # the folder this command made, and nothing in it


def test_queries_no_model_answered_are_taken_back_and_redone_by_the_next_run(data_dir, tmp_path, capsys):
    from tests.integration.openai_server import Error, LocalOpenAIServer

    out = tmp_path / "run"
    with LocalOpenAIServer(gather_lm_handler()) as server:
        lm = ["--lm", "openai/scripted", "--api-base", server.base_url, "--no-cache"]
        assert gather(data_dir, out, *lm, limit=1) == 0
    files = {name: (out / name).read_bytes() for name in ("results.jsonl", "run.json", "summary.json")}

    def not_found(messages):  # the model is gone from the server
        return "OK" if "Reply with the word OK" in messages[-1]["content"] else Error(404, "no such model")

    capsys.readouterr()
    with LocalOpenAIServer(not_found) as server:
        lm = ["--lm", "openai/scripted", "--api-base", server.base_url, "--no-cache"]
        assert gather(data_dir, out, *lm, limit=3) == 3
    assert "no query got an answer from the model: model 'openai/scripted' not found at" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in files} == files  # the first run's files, as they were

    with LocalOpenAIServer(gather_lm_handler()) as server:
        lm = ["--lm", "openai/scripted", "--api-base", server.base_url, "--no-cache"]
        assert gather(data_dir, out, *lm, limit=3) == 0
    assert "3 queries · 1 already done" in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text())["evaluated"] == 3
