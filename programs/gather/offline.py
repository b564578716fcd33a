"""The offline floor of the gathering loop: a deterministic planner and assessor, no LM.

The planner derives a key-term query from the question and widens it with pseudo-relevance feedback
terms, then keeps paging the subqueries whose last page still yielded selections; the assessor keeps
a candidate only when its score is close to its subquery's best and its text covers some of the question's
key terms. Both share the LM
stages' interfaces, so the loop, the trace and the metrics are the same code.
"""

from __future__ import annotations

import dspy

from deepresearch.programs.gather.artifacts import feedback_text
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.programs.stages.offline import (
    EVIDENCE_RULE,
    evidence,
    evidence_reason,
    feedback_terms,
    key_terms,
    stem,
)
from deepresearch.retrievers.types import Hit, Retriever, search_async
from deepresearch.signatures.gather import Feedback, PlannedSearch, RoundResult, SubqueryNode
from deepresearch.signatures.types import Judgement, Source


class OfflineSubqueryPlanner(Stage):
    """Round 1: one derived key-term query plus `expansions` derived variants with two feedback terms each.
    Later rounds: continue every subquery whose last page had a selection; with nothing left to page, the
    planner declares the search complete (an empty plan would mark the query failed under ScholarGym's
    released rules, spec 004 §4.4, which is not what running out of pages means).

    The feedback terms come from a search of `retriever`, the one given to the constructor or, when built
    without one (as a research strategy's stage is), the one each call passes.
    """

    def __init__(
        self,
        retriever: Retriever | None = None,
        expansions: int = 2,
        feedback_docs: int = 10,
        background_docs: int = 40,
        max_terms: int = 12,
    ):
        super().__init__()
        self.retriever = retriever
        self.expansions, self.feedback_docs, self.background_docs = expansions, feedback_docs, background_docs
        self.max_terms = max_terms

    async def aforward(
        self,
        question: str,
        date_constraint: str,
        subquery_tree: list[SubqueryNode],
        last_round: list[RoundResult],
        checklist: str,
        memory: str,
        retriever: Retriever | None = None,
    ) -> dspy.Prediction:
        retriever = retriever or self.retriever
        if retriever is None and self.expansions:
            raise ValueError(
                "the offline subquery planner needs a retriever for its feedback terms; pass one "
                "to the constructor or the call"
            )
        question = plain_brief(question)  # a clarified brief: its question and answers, not its labels
        terms = key_terms(question, min_len=1)[: self.max_terms] or question.split()[: self.max_terms]
        base = " ".join(terms)
        if len(subquery_tree) == 1:
            searches = [PlannedSearch(action="derive", source_id=0, text=base)]
            if self.expansions:
                hits = await search_async(
                    retriever, question, self.feedback_docs + self.background_docs, before=date_constraint or None
                )
                sources = [Source(source_id=h.doc.doc_id, title=h.doc.title, text=h.doc.text) for h in hits]
                extra = feedback_terms(
                    sources[: self.feedback_docs],
                    set(terms),
                    2 * self.expansions,
                    background=sources[self.feedback_docs :],
                )
                searches += [
                    PlannedSearch(action="derive", source_id=0, text=f"{base} {' '.join(extra[i : i + 2])}")
                    for i in range(0, len(extra), 2)
                ]
        else:
            pages = {n.node_id: n.pages for n in subquery_tree}
            searches = [
                PlannedSearch(action="continue", source_id=r.node_id)
                for r in last_round
                if r.selected and r.retrieved and pages.get(r.node_id, 0) > 0
            ]
        checklist = f"the paper addresses: {base}"
        is_complete = len(subquery_tree) > 1 and not searches
        return dspy.Prediction(searches=searches, checklist=checklist, memory=memory, is_complete=is_complete)


class OfflineCandidateAssessor(Stage):
    """Keeps a candidate only on evidence, by the offline rule `EVIDENCE_RULE` ("score and coverage"): its
    retrieval score is at least `min_ratio` of the best score its subquery returned (the first page's top hit,
    remembered for later pages), and its title and abstract hold at least `min_coverage` of the question's key terms (prefix-stemmed).
    The research program's `OfflineAssessor` applies the same rule to a task's search.

    Every judgement's reason names the rule and both figures, kept or not.
    """

    # Tuned on SciFact's 809 train claims only (offline loop, T=5, BM25; test claims not looked at): F1 there
    # 0.592 at (0.9, 0.2), against 0.351 for the coverage-only rule it replaces (0.6 coverage, no score test);
    # (0.8, 0.6) gave 0.425, (0.9, 0.4) 0.563, (0.85, 0.3) 0.568, (1.0, 0.2) 0.574, (0.9, 0.0) 0.597.
    # The coverage floor is kept though it barely moves F1 on SciFact: it stops a feedback-expanded subquery
    # whose best hit has drifted away from the question.
    def __init__(self, min_ratio: float = 0.9, min_coverage: float = 0.2):
        super().__init__()
        if not 0 <= min_ratio <= 1:
            raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
        if not 0 <= min_coverage <= 1:
            raise ValueError(f"min_coverage must be in [0, 1], got {min_coverage}")
        self.min_ratio, self.min_coverage = min_ratio, min_coverage
        self._best: dict[tuple[str, str], float] = {}  # (question, subquery) -> its first page's top score

    async def aforward(
        self,
        question: str,
        subquery: str,
        checklist: str,
        hits: list[Hit],
        preview_chars: int | None = None,
        second_look: bool | None = None,
    ) -> dspy.Prediction:
        # preview_chars and second_look are the LM assessor's settings: this one reads the whole text once
        wanted = {stem(t) for t in key_terms(plain_brief(question), min_len=1)}
        key = (question, subquery)
        if hits and (hits[0].rank == 1 or key not in self._best):
            self._best[key] = max(h.score for h in hits)
        best = self._best.get(key, 0.0)
        judgements = []
        for h in hits:
            ratio, coverage = evidence(wanted, h.doc.title, h.doc.text, h.score, best)
            keep = ratio >= self.min_ratio and coverage >= self.min_coverage
            judgements.append(
                Judgement(
                    source_id=h.doc.doc_id,
                    label="relevant" if keep else "irrelevant",
                    reason=evidence_reason(ratio, coverage, self.min_ratio, self.min_coverage),
                )
            )
        kept = sum(j.label == "relevant" for j in judgements)
        feedback = Feedback(
            covered_topics=" ".join(sorted(wanted))[:200],
            relevant=f"{kept} of {len(hits)} kept",
            irrelevant=f"{len(hits) - kept} fail the {EVIDENCE_RULE} rule",
            suggestions="page on" if kept else "stop this subquery",
        )
        return dspy.Prediction(
            judgements=judgements, feedback=feedback_text(feedback), rechecked=0, browsed=0, unread=0
        )
