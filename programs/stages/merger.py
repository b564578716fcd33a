"""The `merge` stage: a node's learnings -> its summary, each sentence cited with its learning's sources."""

from __future__ import annotations

import logging

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.stages.lexical import key_terms
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.signatures.merge import MergeLearnings, NumberedLearning
from deepresearch.signatures.types import Learning, Task

NO_INFORMATION = "No information found."

logger = logging.getLogger(__name__)


def stated(learning: Learning) -> str:
    """A learning as a summary sentence: its text, then its sources' ids in brackets."""
    return f"{learning.text.rstrip('. ')} [{', '.join(dict.fromkeys(learning.source_ids))}]."


class Merger(Stage):
    """Task + learnings -> one summary with citations bound to claims. No LM call for no learnings.

    The LM reads the learnings numbered 1, 2, ... and lists their numbers in the order the summary states
    them, leaving out repeats; each is stated here with its own sources (`stated`), so the summary says only
    what the learnings say. A number not shown is left out (counted as `unknown`); learnings the LM left out
    are left to the citation check of the run, which appends those whose citations the summary lost.
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
        numbers = list(out.order or [])
        unknown = sum(not 1 <= n <= len(learnings) for n in numbers)
        order = dict.fromkeys(n for n in numbers if 1 <= n <= len(learnings))
        if unknown:
            logger.debug("merger: %d numbers named a learning not shown", unknown)
        summary = " ".join(stated(learnings[n - 1]) for n in order)
        return dspy.Prediction(summary=summary or NO_INFORMATION, unknown=unknown)


class OfflineMerger(Merger):
    """Keeps each learning once (term-set Jaccard below `max_overlap` with all kept ones), in their order."""

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
            self.merge_learnings, {"task": task, "learnings": self.numbered(learnings)}, order=[n for _, n, _ in kept]
        )
        return dspy.Prediction(summary=" ".join(stated(x) for _, _, x in kept), unknown=0)


SPEC = StageSpec(
    "merge",
    "merges a node's learnings into its summary",
    (MergeLearnings,),
    Merger,
    OfflineMerger,
    research_attr="merger",
    tuning=Tuning("merge", "recorded", "the node summary merged from its learnings"),
    max_output_tokens=256,
)
