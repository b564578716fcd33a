"""The gathering loop's LM stages: the subquery planner and the candidate assessor (spec 004 §1.3, §1.5)."""

from __future__ import annotations

import asyncio

import dspy

from deepresearch.programs.gather.artifacts import feedback_text
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.runtime.text import collapse_whitespace
from deepresearch.programs.runtime.usage import call_predictor
from deepresearch.retrievers.types import Hit
from deepresearch.signatures.gather import (
    AssessCandidates,
    CandidatePaper,
    PlanSubqueries,
    RecheckCandidate,
    RoundResult,
    SubqueryNode,
)
from deepresearch.signatures.types import Judgement


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary: keeps the planner's memory bounded."""
    text = collapse_whitespace(text)
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def candidate_paper(hit: Hit, chars: int | None) -> CandidatePaper:
    text = hit.doc.text if chars is None else hit.doc.text[:chars]
    return CandidatePaper(paper_id=hit.doc.doc_id, year=hit.doc.year, score=round(hit.score, 3),
                          title=hit.doc.title, abstract=text)


class SubqueryPlanner(Stage):
    """Tree, memory, checklist and last round's notes -> actions, a new checklist and memory, a completion flag."""

    def __init__(self):
        super().__init__()
        self.plan_subqueries = dspy.ChainOfThought(PlanSubqueries)

    async def aforward(self, question: str, date_constraint: str, subquery_tree: list[SubqueryNode],
                       last_round: list[RoundResult], checklist: str, memory: str) -> dspy.Prediction:
        out = await call_predictor("gather_plan", self.plan_subqueries, question=question,
                                   date_constraint=date_constraint, subquery_tree=subquery_tree,
                                   last_round=last_round, checklist=checklist, memory=memory)
        return dspy.Prediction(searches=list(out.searches), checklist=out.checklist_update, memory=out.memory_update,
                               is_complete=bool(out.is_complete))


class CandidateAssessor(Stage):
    """Labels each candidate of one search relevant or irrelevant and writes notes for the planner.

    A candidate the LM did not judge counts as irrelevant (the reference keeps only ids it names);
    `uncertain` ones get a second look at their full text when `second_look` is on, else are dropped.
    A call may set `preview_chars` and `second_look` for itself (the loop passes its run's settings).
    """

    def __init__(self, second_look: bool = True, preview_chars: int = 1000):
        super().__init__()
        self.assess_candidates = dspy.Predict(AssessCandidates)
        self.recheck_candidate = dspy.Predict(RecheckCandidate)
        self.second_look, self.preview_chars = second_look, preview_chars

    async def aforward(self, question: str, subquery: str, checklist: str, hits: list[Hit],
                       preview_chars: int | None = None, second_look: bool | None = None) -> dspy.Prediction:
        if not hits:
            return dspy.Prediction(judgements=[], feedback="no results", rechecked=0)
        preview_chars = self.preview_chars if preview_chars is None else preview_chars
        second_look = self.second_look if second_look is None else second_look
        papers = [candidate_paper(h, preview_chars) for h in hits]
        out = await call_predictor("gather_assess", self.assess_candidates, question=question, subquery=subquery,
                                   checklist=checklist, candidates=papers)
        by_id = {j.source_id: j for j in out.judgements}
        judgements = [by_id.get(h.doc.doc_id) or Judgement(source_id=h.doc.doc_id, label="irrelevant",
                                                           reason="not judged") for h in hits]
        rechecked = 0
        if second_look:
            uncertain = [i for i, j in enumerate(judgements) if j.label == "uncertain"]
            answers = await asyncio.gather(*[
                call_predictor("gather_recheck", self.recheck_candidate, question=question, checklist=checklist,
                               paper=candidate_paper(hits[i], None)) for i in uncertain])
            for i, answer in zip(uncertain, answers):
                judgements[i] = Judgement(source_id=hits[i].doc.doc_id,
                                          label="relevant" if answer.is_relevant else "irrelevant",
                                          reason=clip(answer.evidence, 300))
            rechecked = len(uncertain)
        return dspy.Prediction(judgements=judgements, feedback=feedback_text(out.feedback), rechecked=rechecked)
