"""The three defects left from the last reliability round (issue 30, item 7): hero's --breadth, a runaway
writer against the verify stage's context, and a resumed run that called the writer again."""

from __future__ import annotations

import json

import dspy

from deepresearch.programs.config import ResearchConfig, preset
from deepresearch.programs.lm.models import make_lm
from deepresearch.programs.research import DeepResearch
from deepresearch.signatures import WriteReport
from tests.integration.openai_server import Error, LocalOpenAIServer
from tests.programs.test_presets import QUESTION, hero_handler
from tests.research_lm import research_handler
from tests.scripted import inputs_of, scripted_lm


def test_hero_takes_breadth_as_the_tasks_it_keeps_per_turn(scifact_bm25):
    config = preset("hero", breadth=2, max_lm_calls=None)
    assert config.hero.tasks_per_turn == 2 and preset("hero").hero.tasks_per_turn == 3
    events = []
    with dspy.context(lm=scripted_lm(hero_handler())):
        out = DeepResearch(retriever=scifact_bm25, config=config, on_event=events.append)(question=QUESTION)
    selected = [e.counts["selected"] for e in events if e.kind == "stage_end" and e.stage == "select"]
    assert selected and max(selected) == 2
    assert len(out.report.tree) == sum(selected)


def _runaway_writer(messages):
    learnings = json.loads(inputs_of(messages)["learnings"])
    # distinct sentences, each restating a learning: the writer keeps a sentence the report already said once,
    # and cites a sentence by the learning whose words it states
    said = [
        {"text": f"{x['text'].rstrip('.')}, as finding {i} of the cohort put it.", "learnings": [x["number"]]}
        for i in range(120)
        for x in [learnings[i % len(learnings)]]
    ]
    return {"sections": [{"heading": "Answer", "sentences": said}]}


def test_a_runaway_draft_is_verified_in_requests_sized_to_the_context(scifact_bm25):
    sizes, refused = [], []
    routed = research_handler({WriteReport: _runaway_writer})

    def handler(messages):
        asked = inputs_of(messages) if messages[-1]["role"] == "user" else {}
        if "claims" in asked:
            claims = json.loads(asked["claims"])
            sizes.append(len(asked["claims"]))
            if len(claims) > 2:  # what llama.cpp answers to a prompt over its context
                refused.append(len(claims))
                return Error(400, "the request exceeds the available context size, try increasing it")
        return routed(messages)

    with LocalOpenAIServer(handler) as server:
        lm = make_lm("openai/local", api_base=server.base_url, cache=False, num_retries=0)
        config = ResearchConfig(depth=1, breadth=2, verify="mark", verify_batch=6, verify_chars=6000, passage_chars=800)
        with dspy.context(lm=lm):
            out = DeepResearch(retriever=scifact_bm25, config=config)(question="aspirin and colorectal cancer")
    assert out.status == "done", out.error
    assert sizes and max(sizes) <= 6000 + 2000  # the claims' JSON within the budget (plus field names)
    checks = out.verdicts
    assert len(checks) >= 100  # the runaway draft was judged sentence by sentence
    # the refused batches were split and asked again: the LM judged (and the lexical floor checked) every
    # sentence; none was left to the lexical rule alone
    assert refused and all(c["judge"] in ("lm", "floor") for c in checks)


def test_a_resumed_run_does_not_call_the_writer_again(scifact_bm25, tmp_path):
    journal = tmp_path / "journal.jsonl"
    config = ResearchConfig(depth=1, breadth=2)
    first = scripted_lm(research_handler())
    with dspy.context(lm=first):
        done = DeepResearch(retriever=scifact_bm25, config=config)(question=QUESTION, journal=journal)
    again = scripted_lm(research_handler())
    with dspy.context(lm=again):
        resumed = DeepResearch(retriever=scifact_bm25, config=config)(question=QUESTION, journal=journal, resume=True)
    assert first.scripted.calls > 0 and "write" in done.usage
    assert "write" not in resumed.usage  # no request of the writer's: its draft came from the journal
    assert resumed.stats.resumed_nodes == done.stats.nodes
    assert resumed.markdown == done.markdown
