"""`deepresearch batch`: many questions, one resumable run folder each, on a local process pool.

Offline runs (the extractive baseline, no LM) over the real SciFact corpus; the Ray executor is tested
on a real local cluster in tests/integration/test_batch_ray.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepresearch import cli
from deepresearch.cli.batch import read_questions

QUESTIONS = [
    {"id": "obesity", "question": "Does obesity increase the risk of type 2 diabetes?"},
    {"question": "Do statins reduce cardiovascular mortality?"},
    {"id": "vitd", "question": "Does vitamin D prevent fractures?"},
]
RUN = ["--corpus", "scifact", "--lm", "offline", "--preset", "quick"]


def write_questions(path: Path, questions=QUESTIONS) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in questions))
    return path


@pytest.fixture(autouse=True)
def _env(monkeypatch, data_dir):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)


def test_question_files_give_unique_folder_ids_and_bad_lines_name_their_number(tmp_path):
    ids = [q["id"] for q in read_questions(write_questions(tmp_path / "q.jsonl"))]
    assert ids == ["obesity", "0002-Do-statins-reduce-cardiovascular-mortality", "vitd"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a"}\n{"text": "b"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: no \"question\""):
        read_questions(bad)
    bad.write_text('{"question": "a", "id": "x"}\n{"question": "b", "id": "x"}\n')
    with pytest.raises(ValueError, match="used twice"):
        read_questions(bad)
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: not JSON"):
        read_questions(bad)


def test_a_batch_writes_a_run_per_question_a_summary_and_resumes_only_what_is_unfinished(tmp_path, capsys):
    questions, out = write_questions(tmp_path / "q.jsonl"), tmp_path / "runs"
    assert cli.main(["batch", str(questions), "--out", str(out), "--workers", "2", "--", *RUN]) == 0
    printed = capsys.readouterr()
    assert "[3/3]" in printed.err and "batch: 3 of 3 questions done" in printed.err
    summary = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert [r["id"] for r in summary] == [q["id"] for q in read_questions(questions)]
    for record, question in zip(summary, QUESTIONS):
        folder = Path(record["folder"])
        assert record["status"] == "done" and record["references"] >= 1 and record["lm_calls"] == 0
        assert json.loads((folder / "run.json").read_text())["question"] == question["question"]
        assert question["question"] in (folder / "report.md").read_text().splitlines()[0]
    table = (out / "summary.md").read_text().splitlines()
    assert table[0].startswith("| id | status") and len(table) == 2 + 3 and "| obesity | done |" in table[2]
    assert table == printed.out.strip().splitlines()

    # again: the finished questions are not run again; one made unfinished is run (resumed) alone
    report = (out / "vitd" / "report.md").read_text()
    record = json.loads((out / "vitd" / "run.json").read_text())
    (out / "vitd" / "run.json").write_text(json.dumps({**record, "status": "interrupted"}))
    assert cli.main(["batch", str(questions), "--out", str(out), "--", *RUN]) == 0
    again = {r["id"]: r for r in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert again["obesity"]["skipped"] and not again["vitd"].get("skipped")
    assert again["vitd"]["status"] == "done" and (out / "vitd" / "report.md").read_text() == report


def test_a_question_that_fails_is_reported_and_the_others_finish(tmp_path, capsys):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS[:2])
    out = tmp_path / "runs"
    # a folder holding another question's run: that run refuses it, the other question goes on
    (out / "obesity").mkdir(parents=True)
    (out / "obesity" / "run.json").write_text(json.dumps({"question": "something else", "status": "done"}))
    code = cli.main(["batch", str(questions), "--out", str(out), "--workers", "1", "--", *RUN])
    assert code == 3
    summary = {r["id"]: r for r in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert summary["0002-Do-statins-reduce-cardiovascular-mortality"]["status"] == "done"
    assert summary["obesity"]["status"] == "not started" and "another question" in summary["obesity"]["error"]
    assert "[2/2]" in capsys.readouterr().err
