"""The `plan` stage: a question and what is known -> the search tasks of a research tree's level."""

from __future__ import annotations

from typing import Any

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Shared, Stage, teach
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.clarifier import plain_brief
from deepresearch.programs.stages.lexical import feedback_terms, goal_for, key_terms
from deepresearch.programs.stages.spec import StageSpec, Tuning
from deepresearch.retrievers.types import Retriever, search_async
from deepresearch.signatures.plan import PlanQueries
from deepresearch.signatures.types import Source, Task


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
        out = await call_predictor(SPEC, self.plan_queries, question=question, known=known, max_tasks=max_tasks)
        return dspy.Prediction(tasks=clean_tasks(out.tasks, max_tasks))


class OfflinePlanner(Planner):
    """Task 1 searches the question's key terms; each further task adds two feedback terms: words that the
    top papers for the question share and the lower-ranked ones rarely use."""

    is_offline = True

    def __init__(self, retriever: Retriever, feedback_docs: int = 10, background_docs: int = 40):
        super().__init__()
        self._retriever = Shared(retriever)  # optimizers deep-copy programs: every copy searches the same index
        self.feedback_docs, self.background_docs = feedback_docs, background_docs

    @property
    def retriever(self) -> Retriever:
        return self._retriever.obj

    @classmethod
    def from_config(cls, config: Any, retriever: Retriever) -> OfflinePlanner:
        return cls(retriever)

    async def aforward(self, question: str, known: list[str], max_tasks: int) -> dspy.Prediction:
        asked = plain_brief(question)  # a clarified brief: its question and answers, not its labels
        terms = key_terms(asked, min_len=1)[:12] or asked.split()[:12]
        hits = await search_async(self.retriever, asked, self.feedback_docs + self.background_docs)
        sources = [Source(source_id=h.doc.doc_id, title=h.doc.title, text=h.doc.text) for h in hits]
        exclude = set(terms) | set(key_terms(" ".join(known)))
        expansion = feedback_terms(
            sources[: self.feedback_docs], exclude, 2 * max(max_tasks - 1, 0), background=sources[self.feedback_docs :]
        )
        base = " ".join(terms)
        tasks = [Task(query=base, goal=goal_for(asked, base))]
        for i in range(0, len(expansion), 2):
            query = f"{base} {' '.join(expansion[i : i + 2])}"
            tasks.append(Task(query=query, goal=goal_for(asked, query)))
        tasks = tasks[:max_tasks]
        reasoning = (
            "The first task searches the question's key terms; each further task adds terms that the top papers share."
        )
        teach(
            self.plan_queries,
            {"question": question, "known": known, "max_tasks": max_tasks},
            reasoning=reasoning,
            tasks=tasks,
        )
        return dspy.Prediction(tasks=tasks)


SPEC = StageSpec(
    "plan",
    "plans the search tasks of a question",
    (PlanQueries,),
    Planner,
    OfflinePlanner,
    research_attr="planner",
    tuning=Tuning("planner", "frozen", "the ranks of the relevant papers its queries retrieve"),
    max_output_tokens=1024,
)
