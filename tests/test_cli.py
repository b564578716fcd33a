import json

import pytest

import cli

QUESTION = "Does vitamin D supplementation reduce fracture risk?"


def test_run_offline_writes_report_and_trace(tmp_path, data_dir, monkeypatch, capsys):
    monkeypatch.delenv("DEEPRESEARCH_LM", raising=False)
    out = tmp_path / "vitd"
    code = cli.main(["run", QUESTION, "--corpus", str(data_dir / "scifact"), "--depth", "2", "--breadth", "2",
                     "--out", str(out), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr()
    assert "offline extractive baseline" in printed.err and printed.err.count("offline") == 1
    assert f"report: {out / 'report.md'}" in printed.out and "searches 4" in printed.out
    report = (out / "report.md").read_text()
    trace = json.loads((out / "trace.json").read_text())
    assert report == trace["markdown"] and "## References" in report
    assert trace["status"] == "done" and trace["stats"]["searches"] == 4 and len(trace["tree"]) == 2
    assert trace["models"] == {"default": "offline"} and trace["config"]["depth"] == 2
    node = trace["tree"][0]
    assert {"query", "goal", "retrieved_ids", "relevant_ids", "learnings", "children", "status", "error"} <= set(node)


@pytest.mark.parametrize("argv,message", [
    (["run", " ", "--corpus", "scifact"], "question is empty"),
    (["run", QUESTION, "--corpus", "/no/such/corpus.jsonl"], "corpus not found"),
    (["run", QUESTION, "--corpus", "scifact", "--depth", "0"], "depth and breadth must be >= 1"),
    (["run", QUESTION, "--corpus", "scifact", "--lm", "nosuchprovider/model"], "unknown LM provider"),
    (["run", QUESTION, "--corpus", "scifact", "--lm", "openai/gpt-4.1-mini"], "needs OPENAI_API_KEY"),
    (["run", QUESTION, "--corpus", "scifact", "--stage-lm", "judge=openai/x"], "--stage-lm"),
    (["nosuchcommand"], "unknown command"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line or "unknown" in line]
    assert len(err) == 1 and message in err[0]


def test_a_bad_corpus_line_is_named(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "1", "title": "A", "text": "ok"}\n{"_id": "2", "title": \n')
    assert cli.main(["run", QUESTION, "--corpus", str(corpus), "--out", str(tmp_path / "o")]) == 2
    assert f"{corpus}:2" in capsys.readouterr().err
