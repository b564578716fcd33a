import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.planner import clean_tasks
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.enrich import FindGaps
from deepresearch.signatures.types import Task


class Enricher(Stage):
    """A node's summary -> follow-up tasks for its children (none means the branch stops)."""

    def __init__(self):
        super().__init__()
        self.find_gaps = dspy.ChainOfThought(FindGaps)

    async def aforward(
        self,
        question: str,
        focus: str,
        summary: str,
        open_questions: list[str],
        sibling_queries: list[str],
        max_tasks: int,
    ) -> dspy.Prediction:
        out = await call_predictor(
            STAGES.enrich.name,
            self.find_gaps,
            question=question,
            focus=focus,
            summary=summary,
            open_questions=open_questions,
            sibling_queries=sibling_queries,
            max_tasks=max_tasks,
        )
        taken = {norm_text(q) for q in [focus, *sibling_queries]}
        fresh = [t for t in out.tasks if norm_text(t.query) not in taken]
        return dspy.Prediction(tasks=clean_tasks(fresh, max_tasks))


__all__ = ["Enricher", "Task"]
