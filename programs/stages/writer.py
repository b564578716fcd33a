import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.types import Finding
from deepresearch.signatures.write import WriteReport


class Writer(Stage):
    """Question + findings -> Markdown report citing source ids (renumbered later by the program)."""

    def __init__(self):
        super().__init__()
        self.write_report = dspy.Predict(WriteReport)

    async def aforward(self, question: str, findings: list[Finding], attempt: int = 0) -> dspy.Prediction:
        # a second attempt (the first draft cited nothing) samples anew: cached and greedy, it would repeat the first
        config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
        out = await call_predictor(
            STAGES.write.name, self.write_report, question=question, findings=findings, config=config
        )
        return dspy.Prediction(report=out.report.strip())
