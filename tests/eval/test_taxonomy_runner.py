"""TaxoBench loader, scorer command and runner, resumed after a kill too (offline; the LLM judge gets a
scripted LM)."""

from __future__ import annotations

import json

import pytest

from deepresearch.cli import main as cli_main
from deepresearch.eval.judges import JudgeTaxonomy
from deepresearch.eval.taxobench import TaxoBenchError, load_predictions, load_taxobench
from deepresearch.programs.formats.jsonl import read_jsonl
from tests.eval.test_gather_runner import kill_when
from tests.scripted import chat_format, inputs_of, scripted_lm


@pytest.fixture(scope="module")
def examples(data_dir):
    return data_dir / "taxobench_examples"


def test_loader_reads_folder_and_file(examples):
    surveys = load_taxobench(examples)
    assert [s.survey_id for s in surveys] == [1, 2]
    assert all(len(s.papers) == 38 and s.topic == s.gt["name"] for s in surveys)
    assert len(load_taxobench(examples / "outputs_examples.raw.jsonl", limit=1)) == 1


def test_loader_errors_name_the_problem(tmp_path):
    with pytest.raises(TaxoBenchError, match="not found"):
        load_taxobench(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "gt": {"name": "x"}}\nnot json\n')
    with pytest.raises(TaxoBenchError, match="line 2 is not JSON"):
        load_taxobench(bad)
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": 1}\n')
    with pytest.raises(TaxoBenchError, match="lacks id or hierarchy_tree"):
        load_predictions(preds)


def test_scorer_command_reproduces_the_spec_values(examples, tmp_path, capsys):
    preds = tmp_path / "pred.jsonl"
    with open(examples / "outputs_examples.raw.jsonl", encoding="utf-8") as f, preds.open("w") as out:
        for line in f:
            row = json.loads(line)
            out.write(json.dumps({"id": row["id"], "hierarchy_tree": row["hierarchy_tree"]}) + "\n")
    assert (
        cli_main(
            [
                "eval",
                "taxonomy-score",
                str(preds),
                "--data",
                str(examples),
                "--sim",
                "exact",
                "--out",
                str(tmp_path / "scores"),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "scores" / "summary.json").read_text())
    assert summary["ari"] == pytest.approx(100 * (0.1539 + 0.1822) / 2, abs=0.01)
    assert summary["us_nted"] == pytest.approx(100 * (0.8947 + 0.9048) / 2, abs=0.01)
    assert summary["sem_path"] == pytest.approx(100 * (0.2000 + 0.2031) / 2, abs=0.01)
    assert summary["recall"] == pytest.approx(100 * (37 / 38 + 1) / 2, abs=0.01) and summary["dropped"] == 1
    rows = [json.loads(x) for x in (tmp_path / "scores" / "scores.jsonl").read_text().splitlines()]
    assert rows[0]["unmatched_expert"] == ["Personalized Language Modeling from Personalized Human Feedback"]
    printed = capsys.readouterr().out
    assert "SEM-PATH" in printed and "title alignment --profile paper" in printed
    assert summary["profile"] == "paper" and summary["protocols"]["us_ted/us_nted"]["status"] == "differs"


def test_scorer_scores_a_missing_prediction_as_failed_and_uses_retrieved_papers(examples, tmp_path):
    surveys = load_taxobench(examples)
    titles = [p["title"] for p in surveys[0].papers]
    preds = tmp_path / "pred.jsonl"
    preds.write_text(
        json.dumps(
            {
                "id": 1,
                "hierarchy_tree": {"name": "x", "subtopics": [{"name": "all", "papers": titles[:10]}]},
                "retrieved_papers": titles[:20] + ["Unrelated paper"],
            }
        )
        + "\n"
    )
    assert (
        cli_main(
            [
                "eval",
                "taxonomy-score",
                str(preds),
                "--data",
                str(examples),
                "--sim",
                "exact",
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (tmp_path / "s" / "scores.jsonl").read_text().splitlines()]
    assert rows[0]["retrieval"]["recall"] == pytest.approx(20 / 38)
    assert rows[0]["retrieval"]["precision"] == pytest.approx(20 / 21)
    assert rows[1]["aligned"] == 0 and rows[1]["sem_path"] == 0.0  # survey 2 had no prediction


def test_scorer_rejects_unknown_survey_ids(examples, tmp_path, capsys):
    preds = tmp_path / "pred.jsonl"
    preds.write_text(json.dumps({"id": 99, "hierarchy_tree": {"name": "x", "papers": []}}) + "\n")
    assert cli_main(["eval", "taxonomy-score", str(preds), "--data", str(examples)]) == 2
    assert "surveys not in the data: [99]" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["bottom-up", "deep-research"])
def test_runner_writes_predictions_scores_and_summary(examples, tmp_path, mode):
    out = tmp_path / mode
    assert (
        cli_main(
            [
                "eval",
                "taxonomy",
                "--data",
                str(examples),
                "--mode",
                mode,
                "--lm",
                "offline",
                "--sim",
                "exact",
                "--limit",
                "1",
                "--depth",
                "1",
                "--breadth",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    pred = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    assert set(pred) >= {"id", "hierarchy_tree", "retrieved_papers", "repairs"}
    scores = json.loads((out / "scores.jsonl").read_text().splitlines()[0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["surveys"] == 1
    if mode == "bottom-up":
        assert scores["aligned"] == 38 and scores["retrieval"]["recall"] == 1.0
    else:
        assert 0 < scores["n_model"] < 76 and 0 < scores["aligned"] <= scores["n_model"]
        assert scores["dropped"] == 38 - scores["aligned"] and summary["dropped"] == scores["dropped"]
        assert scores["retrieval"]["recall"] == pytest.approx(scores["aligned"] / 38)


def taxonomy_argv(data, out, *extra):
    return [
        "eval",
        "taxonomy",
        "--data",
        str(data),
        "--mode",
        "deep-research",
        "--lm",
        "offline",
        "--sim",
        "exact",
        "--depth",
        "1",
        "--breadth",
        "2",
        "--out",
        str(out),
        *extra,
    ]


def test_a_killed_run_resumes_without_rebuilding_finished_surveys(examples, tmp_path, capsys):
    two = [json.loads(x) for x in (examples / "data_subset.jsonl").read_text().splitlines()]
    data = tmp_path / "three.jsonl"  # a third survey (the first one again) keeps the run going past the first
    data.write_text("".join(json.dumps(r) + "\n" for r in [*two, {**two[0], "id": 3}]))
    out = tmp_path / "killed"
    predictions = out / "predictions.jsonl"
    kill_when(predictions, 1, taxonomy_argv(data, out))
    finished = read_jsonl(predictions)
    assert finished and finished[0]["id"] == 1 and not (out / "summary.json").exists()
    with predictions.open("a") as f:  # and the line a kill mid-write leaves
        f.write(f'{{"id": {len(finished) + 1}, "hierarchy_tree": {{"name": "Personalized')

    assert cli_main(taxonomy_argv(data, out)) == 0
    err = capsys.readouterr().err
    assert f"3 surveys · {len(finished)} already done" in err
    assert [f"survey {i}:" in err for i in (1, 2, 3)] == [i > len(finished) for i in (1, 2, 3)]  # built once each
    rows = read_jsonl(predictions)
    assert rows[: len(finished)] == finished and [r["id"] for r in rows] == [1, 2, 3]

    assert cli_main(taxonomy_argv(data, tmp_path / "whole")) == 0  # never interrupted
    for name in ("summary.json", "scores.jsonl"):
        assert (out / name).read_text() == (tmp_path / "whole" / name).read_text()
    assert read_jsonl(predictions) == read_jsonl(tmp_path / "whole" / "predictions.jsonl")

    capsys.readouterr()
    assert cli_main(taxonomy_argv(data, out, "--breadth", "3")) == 2  # refused before building anything
    refused = f"error: {out} holds a run with different breadth; pass --overwrite or another --out"
    assert [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines() if "error" in line] == [refused]
    assert cli_main(taxonomy_argv(data, out, "--breadth", "3", "--limit", "1", "--overwrite")) == 0
    assert [r["id"] for r in read_jsonl(predictions)] == [1]


def test_judge_lm_adds_the_judge_averages_to_the_summary(examples, tmp_path, monkeypatch, routed, capsys):
    def verdict(messages):  # every dimension 4 for survey 1 (personalised alignment), 2 for survey 2
        score = 4 if "Personalized" in inputs_of(messages)["topic"] else 2
        return {d: {"reasoning": "r", "score": score} for d in JudgeTaxonomy.output_fields}

    lm = scripted_lm(routed({JudgeTaxonomy: verdict}))
    monkeypatch.setattr("deepresearch.eval.judges.judge_lm", lambda model, *a, **kw: lm)
    out = tmp_path / "run"
    args = [
        "eval",
        "taxonomy",
        "--data",
        str(examples),
        "--lm",
        "offline",
        "--sim",
        "exact",
        "--out",
        str(out),
        "--judge-lm",
        "fake/judge",
        "--no-preflight",
    ]  # a scripted engine takes no request timeout
    assert cli_main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_trees"] == 2 and summary["judge_failures"] == 0
    assert summary["judge_semantic_coverage"] == 3.0 and summary["judge_average"] == 3.0
    rows = [json.loads(x) for x in (out / "judgements.jsonl").read_text().splitlines()]
    assert [r["average"] for r in rows] == [4.0, 2.0]
    assert all(p[-1]["content"].count("├──") > 0 for p in lm.scripted.prompts)
    assert "Avg. 3.00" in capsys.readouterr().out
    assert cli_main(args) == 0 and lm.scripted.calls == 2  # re-judging is served by the cache under --out


def test_unusable_judge_answers_are_recorded_as_failures(examples, tmp_path, monkeypatch):
    lm = scripted_lm(lambda m: chat_format({"semantic_coverage": "fine"}))
    monkeypatch.setattr("deepresearch.eval.judges.judge_lm", lambda model, *a, **kw: lm)
    preds = tmp_path / "pred.jsonl"
    preds.write_text(json.dumps({"id": 1, "hierarchy_tree": {"name": "x", "papers": []}}) + "\n")
    assert (
        cli_main(
            [
                "eval",
                "taxonomy-score",
                str(preds),
                "--data",
                str(examples),
                "--sim",
                "exact",
                "--out",
                str(tmp_path / "s"),
                "--judge-lm",
                "fake/judge",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["judge_failures"] == 2 and summary["judge_trees"] == 0 and summary["judge_average"] == 0.0
    rows = [json.loads(x) for x in (tmp_path / "s" / "judgements.jsonl").read_text().splitlines()]
    assert all("could not be parsed" in r["error"] for r in rows)
