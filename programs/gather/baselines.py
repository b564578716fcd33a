"""Single-search baselines for the gathering loop, with the Gatherer's result shape.

`DirectQuery` asks the LM for one keyword query (offline: the question's key terms), runs it once and
keeps every result: no planning rounds, no assessment. `DirectQuery(raw=True)` searches the question
as written, with no LM at all. Every retrieved paper counts as selected, so R = Ret.R and P = Ret.P.
"""

from __future__ import annotations

import dspy

from deepresearch.programs.gather.artifacts import Candidate, GatherResult, Round, Search, Selection, Subquery
from deepresearch.programs.lm.usage import UsageMeter, call_predictor, metered
from deepresearch.programs.runtime.stage import Shared, run_sync
from deepresearch.programs.runtime.text import collapse_whitespace
from deepresearch.programs.stages.lexical import key_terms
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.retrievers.types import Retriever, search_async
from deepresearch.signatures.gather import WriteSearchQuery


class DirectQuery(dspy.Module):
    """One search for the question and no assessment.

    Args:
        retriever: Any `Retriever`; the date constraint is applied as in the loop.
        k: Results kept.
        raw: Search the question as written (no LM); otherwise an LM writes the query.
        offline: Without an LM, write the query from the question's key terms.
        ranking_depth: Ids of the top positions recorded, for Avg.Distance (0 records none).
    """

    def __init__(
        self, retriever: Retriever, k: int = 10, *, raw: bool = False, offline: bool = False, ranking_depth: int = 0
    ):
        super().__init__()
        if k < 1 or ranking_depth < 0:
            raise ValueError(f"k must be >= 1 and ranking_depth >= 0, got k={k}, ranking_depth={ranking_depth}")
        self._retriever = Shared(retriever)
        self.k, self.is_raw, self.is_offline, self.ranking_depth = k, raw, offline, ranking_depth
        self.write_search_query = dspy.Predict(WriteSearchQuery)

    def forward(self, question: str, date_constraint: str | None = None) -> dspy.Prediction:
        return run_sync(self.aforward(question=question, date_constraint=date_constraint))

    async def aforward(self, question: str, date_constraint: str | None = None) -> dspy.Prediction:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question is empty; pass the research question as a non-empty string")
        question = question.strip()
        meter = UsageMeter()
        with metered(meter):
            if self.is_raw:
                query, link = question, "raw"
            elif self.is_offline:
                query, link = " ".join(key_terms(question, min_len=1)) or question, "derive"
            else:
                out = await call_predictor(SPEC, self.write_search_query, question=question)
                query, link = collapse_whitespace(out.query) or question, "derive"
        top = await search_async(
            self._retriever.obj, query, max(self.k, self.ranking_depth), before=date_constraint or None
        )
        hits = top[: self.k]
        search = Search(
            node_id=1,
            action=link,
            text=query,
            k=self.k,
            offset=0,
            candidates=tuple(
                Candidate(doc_id=h.doc.doc_id, rank=h.rank, score=h.score, label="relevant", reason="no assessment")
                for h in hits
            ),
            ranking=tuple(h.doc.doc_id for h in top[: self.ranking_depth]),
        )
        tree = (
            Subquery(node_id=0, parent_id=None, link="root", text=question, iteration=0),
            Subquery(node_id=1, parent_id=0, link="derive", text=query, iteration=1),
        )
        result = GatherResult(
            question=question,
            date_constraint=date_constraint or None,
            tree=tree,
            rounds=(Round(iteration=1, searches=(search,)),),
            selected=tuple(Selection(doc_id=h.doc.doc_id, iteration=1, node_id=1) for h in hits),
            stop_reason="single_search",
            usage=meter.snapshot(),
        )
        return dspy.Prediction(
            result=result,
            selected=[x.doc_id for x in result.selected],
            candidates=result.candidates(),
            tree=result.tree,
        )


SPEC = StageSpec(
    "direct_query",
    "writes one search query for a question (the gathering baseline)",
    (WriteSearchQuery,),
    DirectQuery,
    kind="baseline",
    max_output_tokens=256,
    reserve=0,
)
