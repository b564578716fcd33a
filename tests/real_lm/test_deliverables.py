"""Answer and taxonomy modes against the real model (SmolLM2-135M-Instruct on llama-server).

Structure only: the run completes, the answer's citations resolve to the report's references, every
paper judged relevant sits in the taxonomy exactly once, and the two stages' calls are counted or
their failures recorded.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from deepresearch import cli
from deepresearch.programs.research.deliverables import NO_EVIDENCE_ANSWER
from deepresearch.programs.stages.answerer import NO_ANSWER
from tests.real_lm.test_pipelines import QUESTION, SMALL, check_run, kept_evidence, lm_args, nodes_of


def leaf_titles(tree) -> Counter:
    out = Counter(tree.get("papers", []))
    for child in tree.get("subtopics", []):
        out += leaf_titles(child)
    return out


def test_answer_and_taxonomy_modes_with_the_real_model(llama_server, scifact, tmp_path, capsys):
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
            "1",
            "--answer",
            "--taxonomy",
            "--out",
            str(out),
            *SMALL,
            *lm_args(llama_server),
        ]
    )
    printed = capsys.readouterr()
    trace = check_run(out, scifact)
    kept_evidence(code, trace, printed.err)
    failed_stages = {e["stage"] for e in trace["events"] if e["kind"] == "failure"}

    # the answer: written (or its failure recorded and replaced by quoted sentences), numbered like the report
    answer = (out / "answer.md").read_text()
    assert trace["answer"] and answer.startswith(f"# {QUESTION}\n\n{trace['answer']}")
    references = {r["number"] for r in trace["references"]}
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", trace["answer"])}
    assert cited <= references
    asked = {stage: u["calls"] + u["failed"] for stage, u in trace["usage"].items()}
    if NO_EVIDENCE_ANSWER in (out / "report.md").read_text():  # no finding (the 135M model often extracts none)
        assert trace["answer"] == NO_EVIDENCE_ANSWER and not asked.get("answer")  # said, not asked of the LM
    else:
        assert asked.get("answer", 0) >= 1
        if not trace["usage"]["answer"]["calls"]:  # never answered: the failure is in the trace
            assert "answer" in failed_stages
        # grounded: the model's answer cites, or the quoted fallback stands (citing, or saying it cannot answer)
        assert cited or NO_ANSWER in trace["answer"]

    # the taxonomy: every paper judged relevant exactly once, whatever the model answered
    taxonomy = json.loads((out / "taxonomy.json").read_text())
    relevant = {i for node in nodes_of(trace) for i in node["relevant_ids"]}
    titled = {i for i in relevant if scifact.get(i).title.strip()}
    assert {p["doc_id"] for p in taxonomy["papers"]} == titled
    assert leaf_titles(taxonomy["hierarchy_tree"]) == Counter(taxonomy["retrieved_papers"])
    if titled:
        assert "## Map of the literature" in (out / "report.md").read_text()
        assert asked.get("taxonomy", 0) >= 1
        if any(r["kind"] == "lm_failed" for r in taxonomy["repairs"]):
            assert "taxonomy" in failed_stages
