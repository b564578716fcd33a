import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.merge import MergeLearnings
from deepresearch.signatures.types import Learning, Task

NO_INFORMATION = "No information found."


class Merger(Stage):
    """Task + learnings -> one dense summary with citations bound to claims. No LM call for no learnings."""

    def __init__(self):
        super().__init__()
        self.merge_learnings = dspy.Predict(MergeLearnings)

    async def aforward(self, task: Task, learnings: list[Learning]) -> dspy.Prediction:
        if not learnings:
            return dspy.Prediction(summary=NO_INFORMATION)
        out = await call_predictor(STAGES.merge.name, self.merge_learnings, task=task, learnings=learnings)
        return dspy.Prediction(summary=out.summary.strip() or NO_INFORMATION)
