"""The `enrich` stage: a node's summary -> follow-up tasks for its children."""

from __future__ import annotations

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.lexical import goal_for, key_terms
from deepresearch.programs.stages.planner import clean_tasks
from deepresearch.programs.stages.spec import StageSpec, Tuning
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
            SPEC,
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


class OfflineEnricher(Enricher):
    """One follow-up task per open-question term not yet covered by the summary, focus or sibling queries."""

    is_offline = True

    async def aforward(
        self,
        question: str,
        focus: str,
        summary: str,
        open_questions: list[str],
        sibling_queries: list[str],
        max_tasks: int,
    ) -> dspy.Prediction:
        focus_terms = key_terms(focus, min_len=1)
        taken = set(focus_terms) | set(key_terms(summary)) | set(key_terms(" ".join(sibling_queries)))
        fresh = [t for t in key_terms(" ".join(open_questions)) if t not in taken]
        base = " ".join(focus_terms[:8])
        tasks = [Task(query=f"{base} {t}", goal=goal_for(question, f"{base} {t}")) for t in fresh[:max_tasks]]
        teach(
            self.find_gaps,
            {
                "question": question,
                "focus": focus,
                "summary": summary,
                "open_questions": open_questions,
                "sibling_queries": sibling_queries,
                "max_tasks": max_tasks,
            },
            reasoning="Each task adds to the focus one term the open questions raise and nothing found so far covers.",
            tasks=tasks,
        )
        return dspy.Prediction(tasks=tasks)


SPEC = StageSpec(
    "enrich",
    "proposes follow-up tasks for a node's gaps",
    (FindGaps,),
    Enricher,
    OfflineEnricher,
    research_attr="enricher",
    tuning=Tuning("enrich", "recorded", "follow-up tasks proposed for a node's gaps"),
    max_output_tokens=1024,
)
