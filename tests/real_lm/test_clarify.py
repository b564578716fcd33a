"""Clarifying questions against a real model (SmolLM2-135M-Instruct behind llama-server).

A 135M model proves the plumbing: the step completes, asks at most three questions (or none, recorded
when its reply did not parse), the run researches the brief and the report and usage record it all.
Nothing here depends on the model's wording.
"""

from __future__ import annotations

import dspy

from deepresearch.programs.config import ResearchConfig
from deepresearch.programs.lm.models import SchemaAdapter, make_lm
from deepresearch.programs.lm.usage import output_limits
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.runtime.scheduler import CostMeter
from deepresearch.programs.stages.clarifier import research_brief

QUESTION = "Does omega-3 fatty acid supplementation reduce cardiovascular events?"
CAP = 256  # questions are short; a reply cut here is a parse failure the step must survive


def real_lm(server) -> dspy.LM:
    return make_lm("openai/smollm2", api_base=server.base_url, num_retries=0, cache=False)


def check_clarify_usage(meter: CostMeter, questions: list[str]) -> None:
    usage = meter.snapshot()["clarify"]
    assert 1 <= usage.calls + usage.failed <= 2  # one request, and the JSON retry of the text format
    assert len(questions) <= 3 and all(isinstance(q, str) and q.strip() for q in questions)
    noted = any("clarify: no reply parsed" in n for n in meter.notes("root"))
    assert noted == bool(usage.parse_failures)  # a reply that did not parse is recorded, never silent
    if usage.parse_failures:
        assert questions == []


def test_clarify_then_research_on_the_brief(llama_server, scifact_bm25):
    # no verify stage: whether a 135M model's report keeps a cited sentence is chance (see SMALL in test_pipelines)
    config = ResearchConfig(depth=1, breadth=1, hits_per_query=3, verify="off")
    program = DeepResearch(retriever=scifact_bm25, config=config)
    meter = CostMeter()
    with dspy.context(lm=real_lm(llama_server), adapter=SchemaAdapter()), output_limits({"clarify": CAP}, every=1024):
        questions = program.clarify(QUESTION, meter=meter)
        check_clarify_usage(meter, questions)
        # answer what was asked; when nothing was, answer a question of our own so the brief is exercised
        answers = [{"question": q, "answer": "adults with heart disease"} for q in questions] or [
            {"question": "Which population?", "answer": "adults with heart disease"}
        ]
        answers.append({"question": "Anything else?", "answer": ""})
        out = program(question=QUESTION, clarifications=answers, meter=meter)
    report = out.report
    assert report.question == QUESTION and report.clarifications == tuple(answers)
    assert out.brief == research_brief(QUESTION, answers) and "Anything else?" not in out.brief
    # the 135M model's report may end partial, saying why (it kept nothing, its writer failed, or its one cited
    # sentence was removed as instruction-like): this test is about the clarify plumbing, not the report
    assert report.status in ("done", "failed") or (report.status == "partial" and report.error), report.error
    assert "clarify" in report.usage
    assert report.stats.lm_calls == sum(u.calls + u.failed for u in report.usage.values())
    assert report.usage["clarify"] == meter.snapshot()["clarify"]


def test_clarify_in_the_text_format_completes_or_records_the_parse_failure(llama_server, scifact_bm25):
    program = DeepResearch(retriever=scifact_bm25, config=ResearchConfig(depth=1, breadth=1))  # structured: None
    meter = CostMeter()
    with dspy.context(lm=real_lm(llama_server)), output_limits({"clarify": CAP}):
        questions = program.clarify(QUESTION, meter=meter)
    check_clarify_usage(meter, questions)
