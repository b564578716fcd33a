"""The gathering loop's LM stages: the subquery planner and the candidate assessor (spec 004 §1.3, §1.5).

Adaptive browsing (spec 004 §1.5-1.6): a candidate the assessor labels `uncertain` gets a second look.
When the loop reads full text (`reading_full_text`, set by the loop around each assessment when the run
has `--full-text`), that look reads the paper's open-access PDF through the same `FullTextRetriever` and
on-disk `FullTextCache` as `--full-text` everywhere else: the passages that best match the question and
checklist, at most `FULL_TEXT_CHARS` characters, take the abstract's place in what `RecheckCandidate`
is shown. A paper without a link, or whose PDF cannot be fetched or read, is judged on its stored text
as before, and the judgement's reason says the full text was not available (spec 004's "no evidence").
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import dspy

from deepresearch.programs.gather.artifacts import feedback_text
from deepresearch.programs.lm.secrets import redact
from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.runtime.text import collapse_whitespace
from deepresearch.programs.stages.offline import key_terms, stem
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.passages import sentences as split_sentences
from deepresearch.retrievers.types import Hit
from deepresearch.signatures.gather import (
    CandidatePaper,
    Feedback,
    LabelCandidates,
    PaperPreview,
    PlanSubqueries,
    RecheckCandidate,
    RoundResult,
    SubqueryNode,
)
from deepresearch.signatures.types import Judgement

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from deepresearch.retrievers.fulltext import FullTextRetriever

FULL_TEXT_CHARS = 4000  # of full-text passages shown at a second look: three default passages, about 900 words

# The reader of the run the current assessment belongs to; a context variable, not an input, so the stage
# log (which records inputs as JSON) and concurrent runs sharing one assessor are unaffected.
_full_text: contextvars.ContextVar[FullTextRetriever | None] = contextvars.ContextVar(
    "deepresearch_gather_full_text", default=None
)


@contextmanager
def reading_full_text(reader: FullTextRetriever | None) -> Iterator[None]:
    """Within the block, second looks read a paper's full text with `reader` (None: its stored text)."""
    token = _full_text.set(reader)
    try:
        yield
    finally:
        _full_text.reset(token)


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary: keeps the planner's memory bounded."""
    text = collapse_whitespace(text)
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def candidate_paper(hit: Hit, chars: int | None) -> CandidatePaper:
    text = hit.doc.text if chars is None else hit.doc.text[:chars]
    return CandidatePaper(
        paper_id=hit.doc.doc_id, year=hit.doc.year, score=round(hit.score, 3), title=hit.doc.title, abstract=text
    )


class SubqueryPlanner(Stage):
    """Tree, memory, checklist and last round's notes -> actions, a new checklist and memory, a completion flag."""

    def __init__(self):
        super().__init__()
        self.plan_subqueries = dspy.ChainOfThought(PlanSubqueries)

    async def aforward(
        self,
        question: str,
        date_constraint: str,
        subquery_tree: list[SubqueryNode],
        last_round: list[RoundResult],
        checklist: str,
        memory: str,
    ) -> dspy.Prediction:
        out = await call_predictor(
            STAGES.gather_plan.name,
            self.plan_subqueries,
            question=question,
            date_constraint=date_constraint,
            subquery_tree=subquery_tree,
            last_round=last_round,
            checklist=checklist,
            memory=memory,
        )
        return dspy.Prediction(
            searches=list(out.searches),
            checklist=out.checklist_update,
            memory=out.memory_update,
            is_complete=bool(out.is_complete),
        )


def preview(hit: Hit, key: str, wanted: set[str], sentences: int, chars: int | None) -> PaperPreview:
    """What the assessor reads of a candidate, shown under `key`: its title and the `sentences` sentences of its
    text that share the most key terms (prefix-stemmed) with the question and subquery (`wanted`), kept in their
    order, at most `chars` characters; the whole text (cut at `chars`) when `sentences` is 0 or it has no more."""
    text = hit.doc.text
    parts = split_sentences(text) if sentences > 0 else []
    if len(parts) > sentences > 0:
        hits = [len(wanted & {stem(t) for t in key_terms(p)}) for p in parts]
        best = sorted(range(len(parts)), key=lambda i: (-hits[i], i))[:sentences]
        text = " ".join(parts[i] for i in sorted(best))
    return PaperPreview(paper_id=key, title=hit.doc.title, text=text if chars is None else clip(text, chars))


def labels_feedback(hits: list[Hit], judgements: list[Judgement], unlabelled: int) -> str:
    """The planner's notes on one search, composed from the labels (the LM writes labels only)."""
    kept = [h.doc.title for h, j in zip(hits, judgements) if j.label == "relevant"]
    titles = "; ".join(clip(t, 80) for t in kept[:3]) or "none"
    return feedback_text(
        Feedback(
            covered_topics=clip(" / ".join(h.doc.title for h in hits[:3]), 240),
            relevant=f"{len(kept)} of {len(hits)} kept: {titles}",
            irrelevant=f"{len(hits) - len(kept)} set aside" + (f" ({unlabelled} not labelled)" if unlabelled else ""),
            suggestions="page on or narrow this search" if kept else "rephrase this search",
        )
    )


class CandidateAssessor(Stage):
    """Labels each candidate of one search relevant, irrelevant or uncertain; notes for the planner follow.

    The LM writes one label per candidate and nothing else (`LabelCandidates`), keyed by the candidate's
    number in the list (1, 2, ...; a paper id costs a small model a token a digit), reading each paper's title
    and the `sentences` sentences of its text that bear most on the question and subquery (`preview`), at
    most `preview_chars` characters. A candidate the LM did not label counts as irrelevant (the reference
    keeps only ids it names) and labels for ids not shown are ignored; both are counted (`unlabelled`,
    `unknown`). `uncertain` ones get a second look when `second_look` is on, else are dropped. The second
    look reads the paper's full text inside `reading_full_text(reader)` (see the module's docstring), else
    its stored text. A call may set `preview_chars` and `second_look` for itself (the loop passes its run's
    settings). The notes for the planner are composed from the labels (`labels_feedback`).

    The Prediction has `judgements`, `feedback`, and counts: `rechecked` (second looks), `browsed` (of
    them, read from the full text), `unread` (of them, full text wanted but not available), `unlabelled`
    and `unknown`.
    """

    def __init__(self, second_look: bool = True, preview_chars: int = 1000, sentences: int = 2):
        super().__init__()
        self.label_candidates = dspy.Predict(LabelCandidates)
        self.recheck_candidate = dspy.Predict(RecheckCandidate)
        self.second_look, self.preview_chars, self.sentences = second_look, preview_chars, sentences

    def shown(
        self, question: str, subquery: str, hits: list[Hit], preview_chars: int | None = None
    ) -> list[PaperPreview]:
        """The candidates as the LM reads them, numbered 1, 2, ... in the order of `hits`."""
        wanted = {stem(t) for t in key_terms(f"{question} {subquery}")}
        chars = self.preview_chars if preview_chars is None else preview_chars
        # short keys: a small model copies digits one by one
        return [preview(h, str(n), wanted, self.sentences, chars) for n, h in enumerate(hits, start=1)]

    async def aforward(
        self,
        question: str,
        subquery: str,
        checklist: str,
        hits: list[Hit],
        preview_chars: int | None = None,
        second_look: bool | None = None,
    ) -> dspy.Prediction:
        if not hits:
            return dspy.Prediction(
                judgements=[], feedback="no results", rechecked=0, browsed=0, unread=0, unlabelled=0, unknown=0
            )
        preview_chars = self.preview_chars if preview_chars is None else preview_chars
        second_look = self.second_look if second_look is None else second_look
        papers = self.shown(question, subquery, hits, preview_chars)
        keys = [p.paper_id for p in papers]
        out = await call_predictor(
            STAGES.gather_assess.name,
            self.label_candidates,
            question=question,
            subquery=subquery,
            checklist=checklist,
            candidates=papers,
        )
        labels = {str(k).strip(): v for k, v in dict(out.relevance or {}).items()}
        unknown = sum(k not in keys for k in labels)
        judgements = [
            Judgement(source_id=h.doc.doc_id, label=labels[k], reason="labelled by the LM")
            if k in labels
            else Judgement(source_id=h.doc.doc_id, label="irrelevant", reason="not judged")
            for h, k in zip(hits, keys)
        ]
        unlabelled = sum(k not in labels for k in keys)
        if unlabelled or unknown:
            logger.debug("assessor: %d candidates unlabelled, %d labels for ids not shown", unlabelled, unknown)
        uncertain = [i for i, j in enumerate(judgements) if j.label == "uncertain"] if second_look else []
        reader = _full_text.get()
        looks = await asyncio.gather(*[self._second_look(question, checklist, hits[i], reader) for i in uncertain])
        for i, (judgement, _) in zip(uncertain, looks):
            judgements[i] = judgement
        read = [state for _, state in looks]
        return dspy.Prediction(
            judgements=judgements,
            feedback=labels_feedback(hits, judgements, unlabelled),
            rechecked=len(uncertain),
            browsed=read.count("read"),
            unread=read.count("unread"),
            unlabelled=unlabelled,
            unknown=unknown,
        )

    async def _second_look(
        self, question: str, checklist: str, hit: Hit, reader: FullTextRetriever | None
    ) -> tuple[Judgement, str]:
        """Re-judges one uncertain candidate on its full text when `reader` can read it, else on its stored
        text; also says which it was: `read`, `unread` (full text wanted, not had) or `stored` (not wanted)."""
        paper, note, state = candidate_paper(hit, None), "", "stored"
        if reader is not None:
            try:  # fetching and reading a PDF blocks: off the event loop
                read = await asyncio.to_thread(reader.read, hit, f"{question} {checklist}")
                why = reader.unread(hit.doc) if read is hit else ""
            except Exception as err:  # a reader's own bug or an unexpected PDF error: this paper goes unread
                read, why = hit, f"{type(err).__name__}: {err}"
            if read is hit:
                note, state = f"{NOT_READ} ({clip(redact(why), 160)}); judged on the abstract. ", "unread"
            else:
                paper, note, state = candidate_paper(read, None), READ_FULL_TEXT + " ", "read"
                paper = paper.model_copy(update={"abstract": clip(paper.abstract, FULL_TEXT_CHARS)})
        answer = await call_predictor(
            STAGES.gather_recheck.name, self.recheck_candidate, question=question, checklist=checklist, paper=paper
        )
        return Judgement(
            source_id=hit.doc.doc_id,
            label="relevant" if answer.is_relevant else "irrelevant",
            reason=note + clip(answer.evidence, 300),
        ), state


READ_FULL_TEXT = "[full text]"  # starts the reason of a judgement made on the paper's full text
NOT_READ = "[full text not available]"  # ... of one whose full text was wanted but could not be had
