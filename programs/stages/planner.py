import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.plan import PlanQueries
from deepresearch.signatures.types import Task


def clean_tasks(tasks: list[Task], limit: int) -> list[Task]:
    """Drops empty and repeated queries (case-insensitive) and keeps at most `limit`."""
    seen, kept = set(), []
    for t in tasks:
        key = norm_text(t.query)
        if key and key not in seen:
            seen.add(key)
            kept.append(t)
    return kept[:limit]


class Planner(Stage):
    """Question + what is known -> at most `max_tasks` research tasks."""

    def __init__(self):
        super().__init__()
        self.plan_queries = dspy.ChainOfThought(PlanQueries)

    async def aforward(self, question: str, known: list[str], max_tasks: int) -> dspy.Prediction:
        out = await call_predictor(
            STAGES.plan.name, self.plan_queries, question=question, known=known, max_tasks=max_tasks
        )
        return dspy.Prediction(tasks=clean_tasks(out.tasks, max_tasks))
