"""The offline floor of the gathering loop: a deterministic planner and assessor, no LM.

The planner derives a key-term query from the question and widens it with pseudo-relevance feedback
terms, then keeps paging the subqueries whose last page still yielded selections; the assessor keeps
a candidate when its title and abstract cover enough of the question's key terms. Both share the LM
stages' interfaces, so the loop, the trace and the metrics are the same code.
"""

from __future__ import annotations

import dspy

from programs.gather.artifacts import feedback_text
from programs.runtime.stage import Stage
from programs.stages.clarifier import plain_brief
from programs.stages.offline import feedback_terms, key_terms
from retrievers.types import Hit, Retriever, search_async
from signatures.gather import Feedback, PlannedSearch, RoundResult, SubqueryNode
from signatures.types import Judgement, Source


def _stem(word: str) -> str:
    """A crude prefix stem, so `fractures` meets `fracture` and `supplementation` meets `supplements`."""
    return word[:6]


class OfflineSubqueryPlanner(Stage):
    """Round 1: one derived key-term query plus `expansions` derived variants with two feedback terms each.
    Later rounds: continue every subquery whose last page had a selection; nothing left ends the loop.

    The feedback terms come from a search of `retriever`, the one given to the constructor or, when built
    without one (as a research strategy's stage is), the one each call passes.
    """

    def __init__(self, retriever: Retriever | None = None, expansions: int = 2, feedback_docs: int = 10,
                 background_docs: int = 40, max_terms: int = 12):
        super().__init__()
        self.retriever = retriever
        self.expansions, self.feedback_docs, self.background_docs = expansions, feedback_docs, background_docs
        self.max_terms = max_terms

    async def aforward(self, question: str, date_constraint: str, subquery_tree: list[SubqueryNode],
                       last_round: list[RoundResult], checklist: str, memory: str,
                       retriever: Retriever | None = None) -> dspy.Prediction:
        retriever = retriever or self.retriever
        if retriever is None and self.expansions:
            raise ValueError("the offline subquery planner needs a retriever for its feedback terms; pass one "
                             "to the constructor or the call")
        question = plain_brief(question)  # a clarified brief: its question and answers, not its labels
        terms = key_terms(question, min_len=1)[:self.max_terms] or question.split()[:self.max_terms]
        base = " ".join(terms)
        if len(subquery_tree) == 1:
            searches = [PlannedSearch(action="derive", source_id=0, text=base)]
            if self.expansions:
                hits = await search_async(retriever, question, self.feedback_docs + self.background_docs,
                                     before=date_constraint or None)
                sources = [Source(source_id=h.doc.doc_id, title=h.doc.title, text=h.doc.text) for h in hits]
                extra = feedback_terms(sources[:self.feedback_docs], set(terms), 2 * self.expansions,
                                       background=sources[self.feedback_docs:])
                searches += [PlannedSearch(action="derive", source_id=0, text=f"{base} {' '.join(extra[i:i + 2])}")
                             for i in range(0, len(extra), 2)]
        else:
            pages = {n.node_id: n.pages for n in subquery_tree}
            searches = [PlannedSearch(action="continue", source_id=r.node_id) for r in last_round
                        if r.selected and r.retrieved and pages.get(r.node_id, 0) > 0]
        checklist = f"the paper addresses: {base}"
        return dspy.Prediction(searches=searches, checklist=checklist, memory=memory, is_complete=False)


class OfflineCandidateAssessor(Stage):
    """Relevant when the title and abstract contain at least `min_coverage` of the question's key terms
    (prefix-stemmed), otherwise irrelevant."""

    # 0.6 had the best F1 on SciFact's train claims (0.357; 0.5 gave 0.323, 0.7 gave 0.286), chosen there only.
    def __init__(self, min_coverage: float = 0.6):
        super().__init__()
        if not 0 < min_coverage <= 1:
            raise ValueError(f"min_coverage must be in (0, 1], got {min_coverage}")
        self.min_coverage = min_coverage

    async def aforward(self, question: str, subquery: str, checklist: str, hits: list[Hit],
                       preview_chars: int | None = None, second_look: bool | None = None) -> dspy.Prediction:
        # preview_chars and second_look are the LM assessor's settings: this one reads the whole text once
        wanted = {_stem(t) for t in key_terms(plain_brief(question), min_len=1)}
        judgements = []
        for h in hits:
            present = {_stem(t) for t in key_terms(f"{h.doc.title} {h.doc.text}", min_len=1)}
            coverage = len(wanted & present) / max(len(wanted), 1)
            label = "relevant" if coverage >= self.min_coverage else "irrelevant"
            judgements.append(Judgement(source_id=h.doc.doc_id, label=label,
                                        reason=f"covers {coverage:.0%} of the question's key terms"))
        kept = sum(j.label == "relevant" for j in judgements)
        feedback = Feedback(covered_topics=" ".join(sorted(wanted))[:200], relevant=f"{kept} of {len(hits)} kept",
                            irrelevant=f"{len(hits) - kept} below {self.min_coverage:.0%} term coverage",
                            suggestions="page on" if kept else "stop this subquery")
        return dspy.Prediction(judgements=judgements, feedback=feedback_text(feedback), rechecked=0)
