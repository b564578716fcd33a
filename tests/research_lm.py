"""A scripted LM for the whole research program: every stage answers in DSPy's real format.

It reads what each stage was asked (the rendered inputs) and answers deterministically from it:
the planner and the enricher return exactly `max_tasks` tasks, the assessor judges every paper
relevant, the extractor quotes the first sentence of the first two passages, the merger and the writer name every learning they read, and
the verifier finds every sentence supported.
The writer also types an id that names no retrieved document into a sentence, which must not become a citation.
"""

from __future__ import annotations

import json
import re

from deepresearch.signatures import (
    AssessRelevance,
    ExtractLearnings,
    FindGaps,
    MergeLearnings,
    PlanQueries,
    WriteReport,
)
from deepresearch.signatures.verify import VerifyClaims
from tests.scripted import inputs_of, routed_handler

INVENTED_ID = "deadbeef_9"


def _plan(messages):
    asked = inputs_of(messages)
    n = int(asked["max_tasks"])
    topic = asked["question"].rstrip("?")
    return {"tasks": [{"query": f"{topic} aspect {i + 1}", "goal": f"establish aspect {i + 1}"} for i in range(n)]}


def _gaps(messages):
    asked = inputs_of(messages)
    n = int(asked["max_tasks"])
    return {"tasks": [{"query": f"{asked['focus']} gap {i + 1}", "goal": "fill the gap"} for i in range(n)]}


def _assess(messages):
    papers = json.loads(inputs_of(messages)["papers"])
    return {"relevance": {p["paper_id"]: "relevant" for p in papers}}


def first_sentences(passages: list[dict]) -> list[int]:
    """The number of each passage's first sentence, as the extractor's passages show them."""
    return [int(next(iter(p["sentences"]))) for p in passages if p["sentences"]]


def _extract(messages):
    passages = json.loads(inputs_of(messages)["passages"])
    return {"quotes": first_sentences(passages[:2]), "follow_up_questions": ["What remains unclear?"]}


def _merge(messages):
    return {"order": [x["number"] for x in json.loads(inputs_of(messages)["learnings"])]}


def _write(messages):
    learnings = json.loads(inputs_of(messages)["learnings"])
    answer = {"heading": "Answer", "sentences": [{"text": f"The evidence is mixed [{INVENTED_ID}].", "learnings": []}]}
    themes = [
        {
            "heading": topic,
            "sentences": [{"text": x["text"], "learnings": [x["number"]]} for x in learnings if x["topic"] == topic],
        }
        for topic in dict.fromkeys(x["topic"] for x in learnings)
    ]
    return {"sections": [answer, *themes]}


def reworded_write(messages):
    """The writer saying each learning in other words, as a model's writer may ("Reportedly, ..."): the verify
    stage's judge is asked about such sentences, never about a quote of the passage a sentence cites."""
    out = _write(messages)
    for section in out["sections"][1:]:
        for x in section["sentences"]:
            x["text"] = f"Reportedly, {x['text']}"
    return out


def _verify(messages):
    claims = json.loads(inputs_of(messages)["claims"])
    return {"verdicts": {c["claim_id"]: "supported" for c in claims}}


def research_handler(overrides: dict | None = None):
    routes = {
        PlanQueries: _plan,
        AssessRelevance: _assess,
        ExtractLearnings: _extract,
        MergeLearnings: _merge,
        FindGaps: _gaps,
        WriteReport: _write,
        VerifyClaims: _verify,
    }
    routes.update(overrides or {})
    return routed_handler(routes)


CITATION_NUMBER = re.compile(r"\[(\d+)\]")
