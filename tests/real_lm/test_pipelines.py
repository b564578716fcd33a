"""Every LM path of the program against a real model: SmolLM2-135M-Instruct served by llama-server.

A 135M model proves the plumbing, not research quality: these tests assert structure (runs complete,
citations resolve, failures are recorded where they happened), never wording. Settings are small
(few hits, capped replies) so that the whole folder takes a few minutes on two cores.
"""

from __future__ import annotations

import json

import dspy
import pytest

from deepresearch import cli
from deepresearch.eval.taxobench import load_taxobench
from deepresearch.programs.config import HeroConfig, preset
from deepresearch.programs.lm.models import SchemaAdapter, make_lm
from deepresearch.programs.lm.usage import output_limits
from deepresearch.programs.research.deliverables import NO_EVIDENCE_ANSWER
from deepresearch.programs.research.finish import NOTHING_FOUND
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.lexical import key_terms
from deepresearch.programs.taxonomy.builder import TaxonomyBuilder
from tests.research_lm import CITATION_NUMBER

QUESTION = "Does omega-3 fatty acid supplementation reduce cardiovascular events?"
# 1024 output tokens fit every structured reply under the schema's bounds, and keep the free-form
# ones (report, taxonomy) from running on for minutes
CAP = 1024
# a 135M model on one shared core can take minutes per request under load: the default 120 s timeout would
# turn a slow reply into a stage failure, and these tests are about what the run does, not about its speed.
# No verify stage: a run whose report keeps no cited sentence is partial, and whether a 135M model's report
# keeps one is chance (tests/real_lm/test_verify.py runs the stage with the real model)
SMALL = ["--hits", "3", "--max-output-tokens", str(CAP), "--lm-timeout", "600", "--verify", "off", "--no-cache", "-q"]


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch, data_dir):
    monkeypatch.setenv("DEEPRESEARCH_DATA", str(data_dir))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPRESEARCH_LM"):
        monkeypatch.delenv(var, raising=False)


def lm_args(server) -> list[str]:
    return ["--lm", "openai/smollm2", "--api-base", server.base_url, "--structured", "schema"]


def nodes_of(trace: dict) -> list[dict]:
    out, stack = [], list(trace["tree"])
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node["children"])
    return out


def check_run(out, scifact) -> dict:
    """Structure every finished run must have: resolving citations, recorded failures and notes."""
    trace = json.loads((out / "trace.json").read_text())
    report = (out / "report.md").read_text()
    numbers = {int(n) for n in CITATION_NUMBER.findall(report.split("## References")[0])}
    references = {r["number"]: r for r in trace["references"]}
    assert numbers <= set(references), f"citations without a reference: {numbers - set(references)}"
    assert all(r["doc_id"] in scifact for r in references.values())
    for node in nodes_of(trace):
        assert node["status"] in ("done", "failed", "skipped", "cancelled", "pruned")
        if node["status"] == "failed":
            assert node["error"]["stage"] and node["error"]["cause"]
    parse_failures = sum(u["parse_failures"] for u in trace["usage"].values())
    recorded = sum("no reply parsed" in n for node in nodes_of(trace) for n in node["notes"])
    recorded += sum("no reply parsed" in n for n in trace["stats"]["root_notes"])
    assert parse_failures == recorded, "every failed parse is recorded where it happened"
    assert trace["stats"]["lm_calls"] == sum(u["calls"] + u["failed"] for u in trace["usage"].values())
    return trace


def writer_failed(status: str, error: str | None) -> bool:
    """Whether the run is `partial` because its writer failed (the small model's drafts cited nothing, or its
    requests failed): the report then lists the merged findings, and the run says so instead of `done`."""
    return status == "partial" and (error or "").startswith("the writer")


def kept_evidence(code: int, trace: dict, err: str = "") -> bool:
    """Whether the run kept evidence. When it did, it is `done` and exits 0, or `partial` with exit 3 when the
    small model's writer failed; when the model kept none, the run is `partial` with the line saying so and
    exits 3: no success over an empty run."""
    if NO_EVIDENCE_ANSWER in trace["markdown"]:
        assert code == 3 and trace["status"] == "partial" and trace["error"] == NOTHING_FOUND, err[-2000:]
        return False
    if writer_failed(trace["status"], trace.get("error")):
        assert code == 3, err[-2000:]
        return True
    assert code == 0 and trace["status"] == "done", err[-2000:] or trace.get("error")
    return True


def test_run_depth_1_breadth_2_researches_and_cites(llama_server, scifact, tmp_path, capsys):
    out = tmp_path / "run"
    code = cli.main(
        [
            "run",
            QUESTION,
            "--corpus",
            "scifact",
            "--depth",
            "1",
            "--breadth",
            "2",
            "--out",
            str(out),
            *SMALL,
            *lm_args(llama_server),
        ]
    )
    printed = capsys.readouterr()
    trace = check_run(out, scifact)
    assert kept_evidence(code, trace, printed.err) and trace["stats"]["searches"] >= 2
    learnings = [x for node in nodes_of(trace) for x in node["learnings"]]
    assert learnings and all(x["source_ids"] for x in learnings)
    # every request carried the cap: no stage got more completion tokens than that per answered request
    assert all(u["completion_tokens"] <= CAP * u["calls"] for u in trace["usage"].values())
    # the server says it answers one request at a time (--parallel 1), so the run sent one at a time
    stats = trace["stats"]
    assert stats["limits"]["lm"] == 1
    assert 0 < stats["lm_busy_s"] <= stats["total_s"]


def test_a_run_with_the_offline_planner_and_the_real_model_for_the_rest(llama_server, scifact, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", QUESTION, "--corpus", "scifact", "--depth", "1", "--breadth", "1", "--out", str(out)]
    code = cli.main([*args, *SMALL, *lm_args(llama_server), "--stage-lm", "plan=offline"])
    printed = capsys.readouterr()
    trace = check_run(out, scifact)
    kept_evidence(code, trace, printed.err)
    assert trace["models"]["plan"] == "offline"
    assert "plan" not in trace["usage"] and trace["usage"]["assess"]["calls"] >= 1  # the model ran the node
    # the offline planner's first query is the question's own key terms, whatever the model would have planned
    assert trace["tree"][0]["query"] == " ".join(key_terms(QUESTION, min_len=1)[:12])


def test_hero_preset_completes_with_the_real_model(llama_server, scifact_bm25):
    # the hero preset's strategy at a size a 135M model on two cores runs in a minute or two
    hero = HeroConfig(
        turns=1, tasks_per_turn=2, multiplier=2, enrichments=1, deep_depth=3, shallow_depth=2, batch_size=3
    )
    config = preset("hero", hero=hero, passage_chars=600, max_lm_calls=16, verify="off")  # see SMALL
    lm = make_lm("openai/smollm2", api_base=llama_server.base_url, num_retries=0, cache=False)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), output_limits(every=CAP):
        out = DeepResearch(retriever=scifact_bm25, config=config)(question=QUESTION)
    assert out.stats.strategy == "hero" and out.stats.searches >= 1 and out.stats.lm_calls <= 16
    nothing_kept = (out.report.status, out.report.error) == ("partial", NOTHING_FOUND)
    assert out.report.status in ("done", "failed") or nothing_kept or writer_failed(out.report.status, out.report.error)
    if out.report.status == "failed":  # a failed run says why, in its first line
        assert out.report.error and out.markdown.startswith("# Research failed")
    for node in out.report.nodes():
        assert node.status != "failed" or (node.error and node.error.cause)
    assert all(r.doc_id in scifact_bm25.corpus for r in out.references)
    # llama-server keeps the last prompt of its slot and reads a request's shared prefix from it
    usage = out.report.usage.values()
    assert 0 < sum(u.cached_tokens for u in usage) < sum(u.prompt_tokens for u in usage)


def test_gathering_loop_on_three_scifact_claims(llama_server, data_dir, tmp_path, capsys):
    out = tmp_path / "gather"
    code = cli.main(
        [
            "eval",
            "gather",
            "--data",
            str(data_dir / "scifact"),
            "--limit",
            "3",
            "--iterations",
            "1",
            "--out",
            str(out),
            "--max-output-tokens",
            str(CAP),
            "--no-cache",
            *lm_args(llama_server),
        ]
    )
    printed = capsys.readouterr()
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 and {r["status"] for r in records} <= {"done", "error"}
    assert any(r["status"] == "done" for r in records), printed.err[-2000:]
    assert all(r["error"] for r in records if r["status"] == "error")  # each failure kept with its reason
    assert code == (0 if all(r["status"] == "done" for r in records) else 1)  # never success over failures


def test_taxonomy_of_ten_papers_places_every_paper_once(llama_server, data_dir):
    survey = load_taxobench(data_dir / "taxobench_examples", limit=1)[0]
    papers = list(survey.papers[:10])
    lm = make_lm("openai/smollm2", api_base=llama_server.base_url, num_retries=0, cache=False)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), output_limits(every=CAP):
        out = TaxonomyBuilder(abstract_chars=300)(topic=survey.topic, papers=papers)
    placed = []

    def walk(node):
        placed.extend(node.get("papers", []))
        for child in node.get("subtopics", []):
            walk(child)

    walk(out.tree)
    assert sorted(placed) == sorted(p["title"] for p in papers)  # repairs guarantee each exactly once


def test_optimize_with_a_tiny_budget_compiles_and_saves(llama_server, data_dir, tmp_path, capsys):
    out = tmp_path / "compiled.json"
    code = cli.main(
        [
            "optimize",
            "--program",
            "research",
            "--stage",
            "assess",
            "--metric",
            "f1",
            "--optimizer",
            "bootstrap-rs",
            "--data",
            str(data_dir / "scifact"),
            "--limit",
            "3",
            "--budget",
            "4",
            "--depth",
            "1",
            "--breadth",
            "1",
            "--hits",
            "3",
            "--workers",
            "1",
            "--out",
            str(out),
            "--max-output-tokens",
            str(CAP),
            "--no-cache",
            *lm_args(llama_server),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    state = json.loads(out.read_text())
    assert "assessor.assess_relevance" in state
    meta = json.loads((tmp_path / "compiled.meta.json").read_text())
    assert meta["lm_calls"] > 0 and "api_key" not in out.read_text()
