import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.extract import ExtractLearnings, NumberedPassage, PassageLearning
from deepresearch.signatures.types import Learning, Source, Task


def keep_cited(learnings: list[PassageLearning], sources: list[Source], limit: int) -> tuple[list[Learning], int]:
    """Cites each learning with the source of the passage it names; drops learnings naming no shown passage.

    A learning whose text repeats an earlier one (same words, any case) is kept once. Returns the kept
    learnings (at most `limit`) and the number of learnings that named a passage not shown.
    """
    kept, invented, seen = [], 0, set()
    for x in learnings:
        if not 1 <= x.passage <= len(sources):
            invented += 1
            continue
        text = x.text.strip()
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            kept.append(Learning(text=text, source_ids=[sources[x.passage - 1].source_id]))
    return kept[:limit], invented


class Extractor(Stage):
    """Task + passages -> cited learnings and follow-up questions.

    The LM reads the passages numbered 1, 2, ... and names, for each learning, the one passage that states
    it; the learning is cited here with that passage's source id. A learning naming a number not shown is
    dropped and counted as `invented`.
    """

    def __init__(self, max_learnings: int = 5):
        super().__init__()
        self.extract_learnings = dspy.ChainOfThought(ExtractLearnings)
        self.max_learnings = max_learnings

    async def aforward(self, question: str, task: Task, sources: list[Source]) -> dspy.Prediction:
        if not sources:
            return dspy.Prediction(learnings=[], follow_ups=[], invented=0)
        numbered = [NumberedPassage(number=n, title=s.title, text=s.text) for n, s in enumerate(sources, start=1)]
        out = await call_predictor(
            STAGES.extract.name, self.extract_learnings, question=question, task=task, passages=numbered
        )
        learnings, invented = keep_cited(out.learnings, sources, self.max_learnings)
        return dspy.Prediction(learnings=learnings, follow_ups=list(out.follow_up_questions)[:3], invented=invented)
