"""A research run that cannot use the model's answer still works: a stage whose reply does not parse, even
after the retry, is answered by its offline twin for that call, counted per stage and named in the last line."""

import dspy

from deepresearch.cli.research_run import summary_line
from deepresearch.programs.artifacts import RunStats
from deepresearch.programs.research.program import DeepResearch
from deepresearch.programs.stages.planner import OfflinePlanner
from deepresearch.programs.stages.writer import OFFLINE_HEADER, TWIN_HEADER
from deepresearch.signatures import PlanQueries, WriteReport
from tests.research_lm import research_handler

QUESTION = "Does obesity increase the risk of type 2 diabetes?"


def test_a_stage_whose_reply_never_parses_is_answered_by_its_offline_twin(make_lm, scifact_bm25):
    lm = make_lm(research_handler({PlanQueries: {"reasoning": "I will not plan."}}))  # never holds `tasks`
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)(question=QUESTION)
    assert out.status == "done" and out.stats.twin_answers == {"plan": 1}
    assert not out.stats.plan_fallback  # the twin planned: the question itself was not needed
    # the first reply and the one re-ask (parse_retries=1) both failed to parse, then the twin answered
    assert out.stats.parse_failures == 2 and out.stats.retries["parse"] == 1
    assert sum("plan: no reply parsed" in n for n in out.stats.root_notes) == 2
    twin_plan = OfflinePlanner(scifact_bm25)(question=QUESTION, known=[], max_tasks=2).tasks
    assert [n.query for n in out.tree] == [t.query for t in twin_plan]
    fallbacks = [e for e in out.events if e.kind == "fallback" and e.stage == "plan"]
    assert len(fallbacks) == 1 and "did not parse into reasoning, tasks" in fallbacks[0].message
    assert out.stats.lm_calls > 0 and "write" in out.usage  # the LM went on with every other stage


def test_a_writer_whose_draft_never_parses_gets_the_extractive_report_not_a_list_of_findings(make_lm, scifact_bm25):
    lm = make_lm(research_handler({WriteReport: {}}))
    with dspy.context(lm=lm):
        out = DeepResearch(retriever=scifact_bm25, depth=1, breadth=2)(question=QUESTION)
    assert out.stats.twin_answers == {"write": 1}
    # extractive, and honest about whose findings it lists: the model's, not quotes of the abstracts
    assert TWIN_HEADER in out.markdown and OFFLINE_HEADER not in out.markdown
    assert "The writer failed" not in out.markdown


def test_the_last_line_names_the_stages_the_twins_answered_for():
    report = type("Report", (), {"stats": RunStats(lm_calls=9, tokens=1200, twin_answers={"plan": 1, "write": 2})})
    line = summary_line(report())
    assert "failed branches 0 · offline twin answered plan 1, write 2 · LM requests 9" in line
    assert "offline twin" not in summary_line(type("Report", (), {"stats": RunStats(lm_calls=9)})())
