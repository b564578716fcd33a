"""The `merge` stage: a node's learnings -> its summary, each sentence cited with its learning's sources."""

from __future__ import annotations

import logging

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import strip_label
from deepresearch.programs.stages.lexical import key_terms
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.signatures.merge import MergeLearnings, NumberedLearning, SummarySentence
from deepresearch.signatures.types import Learning, Task

NO_INFORMATION = "No information found."

logger = logging.getLogger(__name__)


class Merger(Stage):
    """Task + learnings -> one dense summary with citations bound to claims. No LM call for no learnings.

    The LM reads the learnings numbered 1, 2, ... and writes sentences, each naming the learning it restates;
    each sentence is cited here with that learning's source ids. A sentence naming a number not shown is left
    out (counted as `unknown`); learnings no sentence names are left to the citation check of the run, which
    appends them with their citations.
    """

    def __init__(self):
        super().__init__()
        self.merge_learnings = dspy.Predict(MergeLearnings)

    @staticmethod
    def numbered(learnings: list[Learning]) -> list[NumberedLearning]:
        """The learnings as the LM reads them, numbered 1, 2, ... in their order."""
        return [NumberedLearning(number=n, text=x.text) for n, x in enumerate(learnings, start=1)]

    async def aforward(self, task: Task, learnings: list[Learning]) -> dspy.Prediction:
        if not learnings:
            return dspy.Prediction(summary=NO_INFORMATION, unknown=0)
        out = await call_predictor(SPEC, self.merge_learnings, task=task, learnings=self.numbered(learnings))
        parts, unknown = [], 0
        for sentence in out.sentences or []:
            text = strip_label(sentence.text.strip()).rstrip(".").strip()
            if not 1 <= sentence.learning <= len(learnings):
                unknown += 1
                continue
            if text:
                parts.append(f"{text} [{', '.join(dict.fromkeys(learnings[sentence.learning - 1].source_ids))}].")
        if unknown:
            logger.debug("merger: %d sentences named a learning not shown", unknown)
        return dspy.Prediction(summary=" ".join(parts) or NO_INFORMATION, unknown=unknown)


class OfflineMerger(Merger):
    """Keeps each learning once (term-set Jaccard below `max_overlap` with all kept ones), citation after each."""

    is_offline = True

    def __init__(self, max_overlap: float = 0.6):
        super().__init__()
        self.max_overlap = max_overlap

    async def aforward(self, task: Task, learnings: list[Learning]) -> dspy.Prediction:
        kept: list[tuple[set[str], int, Learning]] = []
        for n, x in enumerate(learnings, start=1):
            terms = set(key_terms(x.text))
            if all(len(terms & t) / max(len(terms | t), 1) < self.max_overlap for t, _, _ in kept):
                kept.append((terms, n, x))
        if not kept:
            return dspy.Prediction(summary=NO_INFORMATION, unknown=0)
        teach(
            self.merge_learnings,
            {"task": task, "learnings": self.numbered(learnings)},
            sentences=[SummarySentence(learning=n, text=x.text) for _, n, x in kept],
        )
        parts = [f"{x.text.rstrip('. ')} {''.join(f'[{i}]' for i in x.source_ids)}." for _, _, x in kept]
        return dspy.Prediction(summary=" ".join(parts), unknown=0)


SPEC = StageSpec(
    "merge",
    "merges a node's learnings into its summary",
    (MergeLearnings,),
    Merger,
    OfflineMerger,
    research_attr="merger",
    tuning=Tuning("merge", "recorded", "the node summary merged from its learnings"),
    max_output_tokens=1536,
)
