import logging

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.merge import MergeLearnings, NumberedLearning
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

    async def aforward(self, task: Task, learnings: list[Learning]) -> dspy.Prediction:
        if not learnings:
            return dspy.Prediction(summary=NO_INFORMATION, unknown=0)
        numbered = [NumberedLearning(number=n, text=x.text) for n, x in enumerate(learnings, start=1)]
        out = await call_predictor(STAGES.merge.name, self.merge_learnings, task=task, learnings=numbered)
        parts, unknown = [], 0
        for sentence in out.sentences or []:
            text = sentence.text.strip().rstrip(".").strip()
            if not 1 <= sentence.learning <= len(learnings):
                unknown += 1
                continue
            if text:
                parts.append(f"{text} [{', '.join(dict.fromkeys(learnings[sentence.learning - 1].source_ids))}].")
        if unknown:
            logger.debug("merger: %d sentences named a learning not shown", unknown)
        return dspy.Prediction(summary=" ".join(parts) or NO_INFORMATION, unknown=unknown)
