"""The writing metrics (eval/quality.py), the stage log and the frozen pools built from it."""

from __future__ import annotations

import json

import dspy
import pytest

from deepresearch import cli
from deepresearch.eval.citations import Sentence, claim_sentences
from deepresearch.eval.judges import GradeCitationSupport, JudgeCache, JudgeKeyPoint
from deepresearch.eval.quality import Support, learning_claims, score_claims
from deepresearch.optimize.metrics import Judging, as_gepa_metric, metric_spec
from deepresearch.optimize.pools import stage_pool
from deepresearch.optimize.trainsets import TrainsetError
from deepresearch.programs.runtime.stage_log import STAGE_LOG, StageLog, read_log
from deepresearch.programs.stages.extractor import Extractor
from deepresearch.programs.stages.merger import Merger
from deepresearch.programs.stages.writer import Writer
from deepresearch.signatures.types import Learning, Source, Task
from tests.scripted import inputs_of

PASSAGES = {
    "aa11aa11_1": "Vitamin D supplementation lowered hip fracture rates in elderly women by 20 percent in a trial.",
    "bb22bb22_1": "Obesity raises the risk of type 2 diabetes through insulin resistance in adipose tissue.",
}
SUPPORTED = "Vitamin D supplementation lowered hip fracture rates in elderly women by 20 percent"
UNSUPPORTED = "Vitamin D supplementation cured every case of diabetes in the whole population studied"


def test_algorithm_1_scores_and_feedback_name_what_to_fix():
    claims = [
        Sentence(SUPPORTED, ("aa11aa11_1",)),
        Sentence(UNSUPPORTED, ("aa11aa11_1",)),
        Sentence("Obesity raises the risk of type 2 diabetes through insulin resistance", ()),
    ]
    q = score_claims(claims, PASSAGES, Support())
    # Algorithm 1: 1 of 3 claims supported; of the 2 resolvable citations, the supported claim's is necessary
    assert (q.citations.n_claims, q.citations.n_supported, q.citations.n_cites, q.citations.n_necessary) == (3, 1, 2, 1)
    assert q.citation_recall == pytest.approx(1 / 3) and q.citation_precision == pytest.approx(0.5)
    feedback = q.feedback()
    assert "cured every case" in feedback and "is not supported by aa11aa11_1" in feedback
    assert "cites nothing" in feedback and SUPPORTED[:40] not in feedback


def test_retention_counts_the_given_citations_the_output_still_cites():
    q = score_claims([Sentence(SUPPORTED, ("aa11aa11_1",))], PASSAGES, Support(), given=["aa11aa11_1", "bb22bb22_1"])
    assert q.retention == 0.5 and "bb22bb22_1" in q.feedback()
    assert q.composite == pytest.approx(0.5 * (0.5 * q.citation_f1 + 0.2 * q.integration) / 0.7)


def test_key_points_by_the_offline_rule_and_the_composite_weights():
    text = f"{SUPPORTED} [aa11aa11_1]."
    q = score_claims(
        claim_sentences(text),
        PASSAGES,
        Support(),
        text=text,
        key_points=["vitamin D lowered hip fracture rates", "obesity causes insulin resistance"],
    )
    assert q.kpr == 0.5 and "obesity causes insulin resistance" in q.feedback()
    assert q.citation_f1 == 1.0
    assert q.composite == pytest.approx(0.5 * 1.0 + 0.3 * 0.5 + 0.2 * q.integration)


def test_a_judge_lm_decides_support_and_its_verdicts_are_cached(make_lm, routed, tmp_path):
    routes = {
        GradeCitationSupport: lambda m: {"support": "full" if "lowered" in inputs_of(m)["claim"] else "none"},
        JudgeKeyPoint: {"label": "Supported"},
    }
    lm = make_lm(routed(routes))
    claims = [Sentence(SUPPORTED, ("aa11aa11_1",)), Sentence(UNSUPPORTED, ("aa11aa11_1",))]
    first = score_claims(claims, PASSAGES, Support(lm, JudgeCache(tmp_path)))
    assert first.citations.n_supported == 1 and lm.scripted.calls == 2  # one verdict per claim, asked once
    again = score_claims(claims, PASSAGES, Support(lm, JudgeCache(tmp_path)))  # a new process: the disk cache
    assert again.citations == first.citations and lm.scripted.calls == 2
    with dspy.context(lm=None):  # the judge answers with its own LM, not the tuned program's
        assert Support(lm).entails(PASSAGES["aa11aa11_1"], SUPPORTED)


def test_extractor_metric_scores_learnings_by_their_cited_sources():
    sources = [Source(source_id=k, title="", text=v) for k, v in PASSAGES.items()]
    example = dspy.Example(question="q", task=Task(query="vitamin d", goal="g"), sources=sources)
    good = dspy.Prediction(learnings=[Learning(text=SUPPORTED, source_ids=["aa11aa11_1"])])
    bad = dspy.Prediction(learnings=[Learning(text=UNSUPPORTED, source_ids=["aa11aa11_1"])])
    spec = metric_spec("extract", "citation_f1", Judging())
    assert spec.score(example, good) == 1.0 and spec.score(example, bad) == 0.0
    gepa = as_gepa_metric(spec)(example, bad)
    assert gepa.score == 0.0 and "not supported" in gepa.feedback
    assert learning_claims(good.learnings)[0].citations == ("aa11aa11_1",)


def test_unknown_metric_lists_the_writing_metrics():
    with pytest.raises(ValueError, match="quality"):
        metric_spec("write", "bleu")


def test_stage_log_writes_each_passage_once_and_reads_calls_back(tmp_path):
    log = StageLog(tmp_path / STAGE_LOG)
    source = Source(source_id="aa11aa11_1", title="T", text=PASSAGES["aa11aa11_1"])
    task = Task(query="vitamin d", goal="g")
    for node in ("1", "2"):
        log.record(
            "extract",
            node,
            {"question": "q", "task": task, "sources": [source]},
            dspy.Prediction(learnings=[]),
            seconds=0.1,
        )
    log.record("merge", "1", {"task": task, "learnings": []}, None, seconds=0.0, error="TimeoutError")
    log.close()
    lines = (tmp_path / STAGE_LOG).read_text().splitlines()
    assert sum('"passage":' in line for line in lines) == 1 and len(lines) == 4
    calls, passages = read_log(tmp_path / STAGE_LOG)
    assert [c["ok"] for c in calls] == [True, True, False] and calls[2]["error"] == "TimeoutError"
    assert calls[1]["inputs"]["sources"] == [source.model_dump()] and set(passages) == {"aa11aa11_1"}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("runs") / "q"
    assert (
        cli.main(
            [
                "run",
                "Does obesity increase the risk of type 2 diabetes?",
                "--corpus",
                str(data_dir / "scifact"),
                "--depth",
                "2",
                "--breadth",
                "2",
                "--lm",
                "offline",
                "--stage-log",
                "--out",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    return out


def test_a_run_records_pools_with_typed_inputs_and_the_run_passages(run_folder):
    extract = stage_pool(run_folder.parent, "extract", Extractor())
    assert extract and all(
        isinstance(ex.task, Task) and all(isinstance(s, Source) for s in ex.sources) for ex in extract
    )
    assert set(extract[0].inputs().keys()) == {"question", "task", "sources"}
    merge = stage_pool(run_folder, "merge", Merger())
    assert merge and all(ex.learnings for ex in merge)  # calls with nothing to merge never reach the LM
    cited = {sid for ex in merge for lr in ex.learnings for sid in lr.source_ids}
    assert cited <= set(merge[0].passages)  # every cited id resolves to its recorded passage
    (write,) = stage_pool(run_folder, "write", Writer())
    assert write.question.startswith("Does obesity") and write.findings


def test_pools_refuse_folders_without_logs_or_calls(run_folder, tmp_path):
    with pytest.raises(TrainsetError, match="no stages.jsonl under"):
        stage_pool(tmp_path, "merge", Merger())
    with pytest.raises(TrainsetError, match="recorded no successful enrich_write call"):
        stage_pool(run_folder, "enrich_write", Merger())


def test_from_runs_with_a_stage_it_cannot_replay_is_refused_before_any_lm_request(run_folder, tmp_path, capsys):
    code = cli.main(
        [
            "optimize",
            "--stage",
            "plan",
            "--from-runs",
            str(run_folder),
            "--metric",
            "quality",
            "--out",
            str(tmp_path / "c.json"),
            "--lm",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:9/v1",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--from-runs tunes one stage of the research program" in err and len(err.splitlines()) == 1


def test_the_stage_may_be_named_by_its_module(run_folder, tmp_path, capsys):
    code = cli.main(
        [
            "optimize",
            "--stage",
            "writer",
            "--from-runs",
            str(run_folder),
            "--metric",
            "bleu",
            "--out",
            str(tmp_path / "c.json"),
            "--lm",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:9/v1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "unknown metric 'bleu' for write" in err  # `writer` was read as the stage `write`
    assert not json.dumps(err).count("Traceback")


def test_offline_runs_keep_no_stage_log_unless_asked(data_dir, tmp_path):
    # an offline tree can grow to thousands of nodes; its calls are worth recording only on request
    assert (
        cli.main(
            [
                "run",
                "Does obesity increase the risk of type 2 diabetes?",
                "--corpus",
                str(data_dir / "scifact"),
                "--depth",
                "1",
                "--breadth",
                "1",
                "--lm",
                "offline",
                "--out",
                str(tmp_path / "q"),
                "-q",
            ]
        )
        == 0
    )
    assert (tmp_path / "q" / "report.md").exists() and not (tmp_path / "q" / STAGE_LOG).exists()


def test_a_run_with_an_lm_keeps_its_stage_log(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", "sk-test-secret-4711")
    from tests.integration.openai_server import LocalOpenAIServer
    from tests.research_lm import research_handler

    with LocalOpenAIServer(research_handler()) as server:
        assert (
            cli.main(
                [
                    "run",
                    "omega-3 and heart disease",
                    "--corpus",
                    str(data_dir / "scifact"),
                    "--depth",
                    "1",
                    "--breadth",
                    "1",
                    "--lm",
                    "openai/local-model",
                    "--api-base",
                    server.base_url,
                    "--no-cache",
                    "--out",
                    str(tmp_path / "q"),
                    "-q",
                ]
            )
            == 0
        )
    calls, _ = read_log(tmp_path / "q" / STAGE_LOG)
    assert {"plan", "assess", "extract", "merge", "write"} <= {c["stage"] for c in calls}
    assert "4711" not in (tmp_path / "q" / STAGE_LOG).read_text()
