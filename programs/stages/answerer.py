import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.answer import WriteAnswer
from deepresearch.signatures.types import Finding


class Answerer(Stage):
    """Question + findings -> a short answer citing source ids (renumbered with the report by the program)."""

    def __init__(self):
        super().__init__()
        self.write_answer = dspy.Predict(WriteAnswer)

    async def aforward(self, question: str, findings: list[Finding]) -> dspy.Prediction:
        out = await call_predictor(STAGES.answer.name, self.write_answer, question=question, findings=findings)
        return dspy.Prediction(answer=out.answer.strip())
