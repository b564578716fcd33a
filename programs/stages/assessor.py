"""The `assess` stage: a task and its retrieved papers -> one relevance label per paper."""

from __future__ import annotations

import logging
from typing import Any

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.stages.lexical import best_sentences, evidence, evidence_reason, key_terms, stem
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.retrievers.passages import sentences as split_sentences
from deepresearch.signatures.assess import AssessRelevance
from deepresearch.signatures.gather import PaperPreview
from deepresearch.signatures.types import Judgement, Label, Source, Task

logger = logging.getLogger(__name__)


def task_view(source: Source, task: Task, n: int) -> Source:
    """`source` cut to the `n` sentences sharing the most key terms with the task (query and goal), kept in
    their order; the first sentences when none shares a term, the whole text when it has at most `n`."""
    parts = split_sentences(source.text)
    if n <= 0 or len(parts) <= n:
        return source
    best = best_sentences(parts, f"{task.query} {task.goal}", n)
    return Source(source_id=source.source_id, title=source.title, text=" ".join(parts[i] for i in best))


class Assessor(Stage):
    """Task + candidate sources -> one judgement per source, and the sources worth reading.

    The LM reads the sources numbered 1, 2, ... (`shown`) and writes one label per number, nothing else. A
    source the LM did not label is treated as `uncertain`; labels for numbers not shown are ignored; both
    are counted (`unlabelled`, `unknown`).
    """

    def __init__(self, keep_uncertain: bool = True):
        super().__init__()
        self.assess_relevance = dspy.Predict(AssessRelevance)
        self.keep_uncertain = keep_uncertain

    @classmethod
    def from_config(cls, config: Any, retriever: Any) -> Assessor:
        return cls(keep_uncertain=config.keep_uncertain)

    @staticmethod
    def shown(task: Task, sources: list[Source], sentences: int = 0) -> list[PaperPreview]:
        """The sources as the LM reads them: numbered in their order, each cut to its `sentences` sentences
        that bear most on the task (`task_view`) when `sentences` > 0."""
        views = [task_view(s, task, sentences) for s in sources] if sentences > 0 else sources
        return [PaperPreview(paper_id=str(n), title=v.title, text=v.text) for n, v in enumerate(views, start=1)]

    async def aforward(
        self, task: Task, sources: list[Source], scores: list[float] | None = None, sentences: int = 0
    ) -> dspy.Prediction:
        """`sentences` > 0: the LM sees each paper's title and its `sentences` sentences that bear most on the
        task (`task_view`) rather than the whole passage; `kept` holds the sources as given, uncut."""
        # Retrieval scores are not shown to the LM (a Source is its view of a hit); offline assessment uses them.
        if not sources:
            return dspy.Prediction(judgements=[], kept=[], unlabelled=0, unknown=0)
        papers = self.shown(task, sources, sentences)
        out = await call_predictor(SPEC, self.assess_relevance, task=task, papers=papers)
        keys = [p.paper_id for p in papers]
        labels = {str(k).strip(): v for k, v in dict(out.relevance or {}).items()}
        judgements = [
            Judgement(source_id=s.source_id, label=labels[k], reason="labelled by the LM")
            if k in labels
            else Judgement(source_id=s.source_id, label="uncertain", reason="not judged")
            for s, k in zip(sources, keys)
        ]
        unlabelled, unknown = sum(k not in labels for k in keys), sum(k not in keys for k in labels)
        keep = {"relevant", "uncertain"} if self.keep_uncertain else {"relevant"}
        kept = [s for s, j in zip(sources, judgements) if j.label in keep]
        logger.debug(
            "assessor kept %d of %d sources for %r (%d unlabelled, %d labels for numbers not shown)",
            len(kept),
            len(sources),
            task.query,
            unlabelled,
            unknown,
        )
        return dspy.Prediction(judgements=judgements, kept=kept, unlabelled=unlabelled, unknown=unknown)


class OfflineAssessor(Assessor):
    """The offline relevance rule (`EVIDENCE_RULE`, shared with the gathering loop's offline assessor): a
    source is relevant when its retrieval score is at least `relevant_ratio` of the task's best score and it
    contains at least `min_coverage` of the task query's key terms; uncertain when it has the coverage and a
    score down to `uncertain_ratio`; irrelevant otherwise. Each judgement's reason names the rule and its figures.
    """

    is_offline = True

    # relevant_ratio and min_coverage are the gathering loop's thresholds, tuned on SciFact's train claims
    # (the gathering twin in programs/stages/gathering.py); uncertain_ratio is a band below them, kept only with keep_uncertain.
    def __init__(
        self,
        keep_uncertain: bool = True,
        relevant_ratio: float = 0.9,
        uncertain_ratio: float = 0.75,
        min_coverage: float = 0.2,
    ):
        super().__init__(keep_uncertain=keep_uncertain)
        if not 0 <= uncertain_ratio <= relevant_ratio <= 1 or not 0 <= min_coverage <= 1:
            raise ValueError(
                f"need 0 <= uncertain_ratio <= relevant_ratio <= 1 and min_coverage in [0, 1], got "
                f"{uncertain_ratio}, {relevant_ratio} and {min_coverage}"
            )
        self.relevant_ratio, self.uncertain_ratio, self.min_coverage = relevant_ratio, uncertain_ratio, min_coverage

    async def aforward(
        self, task: Task, sources: list[Source], scores: list[float] | None = None, sentences: int = 0
    ) -> dspy.Prediction:
        """The rule reads each paper's whole text; `sentences` cuts only the view recorded for the LM assessor."""
        if not sources:
            return dspy.Prediction(judgements=[], kept=[])
        scores = scores or [1.0] * len(sources)
        best = max(scores)
        wanted = {stem(t) for t in key_terms(task.query, min_len=1)}
        judgements = []
        for s, score in zip(sources, scores):
            ratio, coverage = evidence(wanted, s.title, s.text, score, best)
            covered = coverage >= self.min_coverage
            label: Label = (
                "relevant"
                if covered and ratio >= self.relevant_ratio
                else "uncertain"
                if covered and ratio >= self.uncertain_ratio
                else "irrelevant"
            )
            judgements.append(
                Judgement(
                    source_id=s.source_id,
                    label=label,
                    reason=evidence_reason(ratio, coverage, self.relevant_ratio, self.min_coverage),
                )
            )
        papers = self.shown(task, sources, sentences)
        teach(
            self.assess_relevance,
            {"task": task, "papers": papers},
            relevance={p.paper_id: j.label for p, j in zip(papers, judgements)},
        )
        keep = {"relevant", "uncertain"} if self.keep_uncertain else {"relevant"}
        kept = [s for s, j in zip(sources, judgements) if j.label in keep]
        return dspy.Prediction(judgements=judgements, kept=kept, unlabelled=0, unknown=0)


SPEC = StageSpec(
    "assess",
    "judges which retrieved papers are relevant to a task",
    (AssessRelevance,),
    Assessor,
    OfflineAssessor,
    research_attr="assessor",
    tuning=Tuning("assessor", "frozen", "kept vs relevant papers of recorded candidates"),
    max_output_tokens=1536,
)
