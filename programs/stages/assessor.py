import logging

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.offline import key_terms, stem
from deepresearch.programs.stages.registry import STAGES
from deepresearch.retrievers.passages import sentences as split_sentences
from deepresearch.signatures.assess import AssessRelevance
from deepresearch.signatures.gather import PaperPreview
from deepresearch.signatures.types import Judgement, Source, Task

logger = logging.getLogger(__name__)


def task_view(source: Source, task: Task, n: int) -> Source:
    """`source` cut to the `n` sentences sharing the most key terms with the task (query and goal), kept in
    their order; the first sentences when none shares a term, the whole text when it has at most `n`."""
    parts = split_sentences(source.text)
    if n <= 0 or len(parts) <= n:
        return source
    wanted = {stem(t) for t in key_terms(f"{task.query} {task.goal}")}
    hits = [len(wanted & {stem(t) for t in key_terms(p)}) for p in parts]
    best = sorted(range(len(parts)), key=lambda i: (-hits[i], i))[:n]
    return Source(source_id=source.source_id, title=source.title, text=" ".join(parts[i] for i in sorted(best)))


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
        out = await call_predictor(STAGES.assess.name, self.assess_relevance, task=task, papers=papers)
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
