import asyncio
import json

import pytest

from deepresearch import cli
from deepresearch.eval.judges import GradeCitationSupport, JudgeCache, JudgeKeyPoint, RateReport
from deepresearch.eval.protocols import protocol_for
from deepresearch.eval.questions import Question
from deepresearch.eval.run_report import Judges, evaluate
from deepresearch.eval.run_reports import group_summaries, heatmap_grid, score_folder
from deepresearch.programs.research.program import DeepResearch
from tests.scripted import inputs_of

PNG = b"\x89PNG"


def write_reports(folder):
    """Two questions x a 2 x 2 grid; d4_b4 reports list more sources than d1_b1 ones."""
    folder.mkdir()
    n_sources = {"d1_b1": 2, "d1_b4": 4, "d4_b1": 6, "d4_b4": 10}
    for q in (1, 2):
        for config, n in n_sources.items():
            urls = "\n".join(f"- https://s.org/{q}/{i}" for i in range(n + q))
            body = "Grazing and mowing drive succession in temperate grasslands. " * 5
            (folder / f"{q}_tiny-model_local_{config}.md").write_text(f"## Q{q}\n\n{body}\n\n## Sources\n\n{urls}\n")
    (folder / "notes.md").write_text("not a report of the grid")


def test_folder_is_grouped_by_configuration(tmp_path):
    write_reports(tmp_path / "reports")
    rows = score_folder(tmp_path / "reports")
    assert len(rows) == 8
    summaries = group_summaries(rows)
    assert list(summaries) == ["tiny-model_d1_b1", "tiny-model_d1_b4", "tiny-model_d4_b1", "tiny-model_d4_b4"]
    s = summaries["tiny-model_d4_b4"]["n_sources"]
    assert (s.n, s.mean, s.min, s.max) == (2, 11.5, 11, 12)
    assert s.sd == pytest.approx(0.7071, abs=1e-4)
    assert all(0 <= r["S_depth"] <= 1 and r["depth"] in (1, 4) for r in rows)
    depths, breadths, grid = heatmap_grid(rows, "n_sources", "tiny-model")
    assert (depths, breadths, grid) == ([1, 4], [1, 4], [[3.5, 5.5], [7.5, 11.5]])


def test_eval_reports_command_prints_the_table_and_writes_the_heatmap(tmp_path, capsys):
    write_reports(tmp_path / "reports")
    out = tmp_path / "out"
    assert cli.main(["eval", "reports", str(tmp_path / "reports"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "8 reports" in printed
    assert "tiny-model_d4_b4" in printed and "11.50" in printed
    assert "n_sources: differs (sciknoworg/deep-research@64293cd" in printed
    assert (out / "heatmap.png").read_bytes()[:4] == PNG
    assert (out / "scores.csv").read_text().count("\n") == 9


def test_eval_reports_command_on_the_published_reports(data_dir, tmp_path, capsys):
    folder = data_dir / "deepresearch_eco" / "reports_o3-mini"
    assert cli.main(["eval", "reports", str(folder), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    line = next(ln for ln in printed.splitlines() if "o3-mini_d4_b4" in ln)  # first table: n_sources
    assert line.split()[1:] == ["49", "171.31", "31.10", "95.00", "225.00"]
    assert (tmp_path / "heatmap.png").read_bytes()[:4] == PNG


def test_eval_reports_rejects_a_folder_without_grid_names(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "report.md").write_text("x")
    assert cli.main(["eval", "reports", str(tmp_path / "r"), "--out", str(tmp_path / "o")]) == 2
    assert "rename the files" in capsys.readouterr().err


def test_eval_report_command_runs_the_offline_program(tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps({"id": f"q{i}", "question": q})
            for i, q in enumerate(
                ["Does vitamin D reduce fracture risk?", "How does obesity affect insulin resistance?"]
            )
        )
    )
    out = tmp_path / "out"
    assert (
        cli.main(
            ["eval", "report", "--data", str(questions), "--lm", "offline", "--corpus", "scifact", "--out", str(out)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "citation_precision_lexical" in printed
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [r["qid"] for r in rows] == ["q0", "q1"]
    for r in rows:
        assert r["n_sources"] > 0 and r["n_visited_sources"] >= r["n_sources"]
        assert 0 < r["citation_recall"] <= 1
        assert 0 <= r["citation_precision_lexical"] <= 1
        assert "kpr" not in r and "criterion_depth" not in r  # no judge, no judged metrics
        assert r["n_url_sources"] <= r["n_sources"]
    # every averaged figure names the released scorer it was checked against, in the output and a file
    numeric = {k for r in rows for k, v in r.items() if isinstance(v, (int, float))}
    protocols = json.loads((out / "protocols.json").read_text())
    assert set(protocols) == numeric and {p["status"] for p in protocols.values()} <= {"matches", "differs", "ours"}
    assert "scholarqa_cite_recall_lexical: differs (AkariAsai/ScholarQABench@95e6fc5" in printed
    assert (out / "reports" / "q0.md").read_text().startswith("## Does vitamin D")


def judge_handler_routes(calls):
    def key_point(m):
        calls.append("kp")
        return {"label": "Supported" if "vitamin" in inputs_of(m)["key_point"].lower() else "Omitted"}

    return {
        JudgeKeyPoint: key_point,
        RateReport: lambda m: {"justification": "ok", "score": 7},
        GradeCitationSupport: lambda m: {"support": "full"},
    }


def test_evaluate_scores_with_scripted_judges(scifact, scifact_bm25, make_lm, routed, tmp_path):
    calls = []
    judge = make_lm(routed(judge_handler_routes(calls)))
    judges = Judges.build(judge, JudgeCache(tmp_path / "cache"))
    program = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2, offline=True)
    question = Question(
        qid="1",
        text="Does vitamin D reduce fracture risk?",
        key_points=("Vitamin D lowers fracture risk.", "Calcium intake matters."),
    )

    def text_of(doc_id):
        doc = scifact.get(doc_id)
        return doc.text if doc else None

    rows = asyncio.run(evaluate([question], program, text_of, judges))
    row = rows[0]
    assert calls == ["kp", "kp"]
    assert row["kpr"] == 0.5 and row["kpc"] == 0.0
    assert row["key_point_labels"] == ["Supported", "Omitted"]
    assert {k: v for k, v in row.items() if k.startswith("criterion_")} == {
        f"criterion_{c}": 7 for c in ("clarity", "depth", "balance", "breadth", "support", "insightfulness")
    }
    assert row["citation_precision"] == 1.0  # every cited claim resolves to a document the judge calls full
    numeric = [k for k, v in row.items() if isinstance(v, (int, float))]
    assert [k for k in numeric if protocol_for(k) is None] == []  # the judged metrics name theirs too
    assert protocol_for("kpr").status == "matches" and "eval_kpr_async.py" in protocol_for("kpr").code
    before = judge.scripted.calls
    again = asyncio.run(evaluate([question], program, text_of, judges))
    assert judge.scripted.calls == before  # the same reports are re-scored from the cache
    assert again[0]["kpr"] == row["kpr"]


def test_eval_report_on_worker_processes_scores_what_it_scores_in_process(tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps({"id": f"q{i}", "question": q})
            for i, q in enumerate(
                ["Does vitamin D reduce fracture risk?", "How does obesity affect insulin resistance?"]
            )
        )
    )
    common = ["eval", "report", "--data", str(questions), "--lm", "offline", "--corpus", "scifact", "--preset", "quick"]
    assert cli.main([*common, "--out", str(tmp_path / "here")]) == 0
    assert cli.main([*common, "--out", str(tmp_path / "pool"), "--workers", "2"]) == 0
    capsys.readouterr()
    here, pool = (
        [json.loads(line) for line in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
        for d in ("here", "pool")
    )
    assert [r["qid"] for r in pool] == ["q0", "q1"] and pool == here
    assert (tmp_path / "pool" / "reports" / "q1.md").read_text() == (
        tmp_path / "here" / "reports" / "q1.md"
    ).read_text()
