import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.extract import ExtractLearnings
from deepresearch.signatures.types import Learning, Source, Task


def keep_cited(learnings: list[Learning], known: set[str], limit: int) -> tuple[list[Learning], int]:
    """Strips unknown source ids from each learning and drops learnings left with none.

    Returns the kept learnings (at most `limit`) and the number of invented citations removed.
    """
    kept, invented = [], 0
    for x in learnings:
        ids = [i for i in dict.fromkeys(x.source_ids) if i in known]
        invented += len(set(x.source_ids)) - len(ids)
        if ids and x.text.strip():
            kept.append(Learning(text=x.text.strip(), source_ids=ids))
    return kept[:limit], invented


class Extractor(Stage):
    """Task + passages -> cited learnings and follow-up questions."""

    def __init__(self, max_learnings: int = 5):
        super().__init__()
        self.extract_learnings = dspy.ChainOfThought(ExtractLearnings)
        self.max_learnings = max_learnings

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        if not sources:
            return dspy.Prediction(learnings=[], follow_ups=[], invented=0)
        out = await call_predictor(
            STAGES.extract.name, self.extract_learnings, question=question, task=task, passages=sources
        )
        learnings, invented = keep_cited(out.learnings, {s.source_id for s in sources}, self.max_learnings)
        return dspy.Prediction(learnings=learnings, follow_ups=list(out.follow_up_questions)[:3], invented=invented)
