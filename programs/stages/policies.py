"""The `parallel` strategy's own stages (spec 002): breadth and depth policies, and the progress scorer."""

from __future__ import annotations

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.registry import STAGES
from deepresearch.signatures.orchestrate import DecideDeepen, EvaluateProgress, PlanBreadth


class BreadthPolicy(Stage):
    """Query + the tree's findings -> 0..max_breadth subqueries (spec 002 π_b)."""

    def __init__(self):
        super().__init__()
        self.plan_breadth = dspy.Predict(PlanBreadth)

    async def aforward(
        self, query: str, accumulated_findings: list[str], user_constraints: str, max_breadth: int
    ) -> dspy.Prediction:
        out = await call_predictor(
            STAGES.breadth.name,
            self.plan_breadth,
            query=query,
            accumulated_findings=accumulated_findings,
            user_constraints=user_constraints,
            max_breadth=max_breadth,
        )
        seen, kept = set(), []
        for q in out.subqueries:
            key = norm_text(q)
            if key and key not in seen:
                seen.add(key)
                kept.append(q.strip())
        return dspy.Prediction(subqueries=kept[:max_breadth])


class DepthPolicy(Stage):
    """Query + its findings -> go one level deeper or not (spec 002 π_d, direct mode)."""

    def __init__(self):
        super().__init__()
        self.decide_deepen = dspy.Predict(DecideDeepen)

    async def aforward(
        self, query: str, local_findings: list[str], user_constraints: str, depth: int, max_depth: int
    ) -> dspy.Prediction:
        if depth >= max_depth:  # never beyond the maximum: decided here, without an LM call
            return dspy.Prediction(deepen=False, rationale="maximum depth reached")
        out = await call_predictor(
            STAGES.deepen.name,
            self.decide_deepen,
            query=query,
            local_findings=local_findings,
            user_constraints=user_constraints,
            depth=depth,
            max_depth=max_depth,
        )
        return dspy.Prediction(deepen=bool(out.deepen), rationale=out.rationale)


class ProgressScorer(Stage):
    """A running node's goal, sources and findings -> goal satisfaction and quality in [0, 1] (spec 002 π_o)."""

    def __init__(self):
        super().__init__()
        self.evaluate_progress = dspy.Predict(EvaluateProgress)

    async def aforward(
        self, goal: str, user_constraints: str, context_summary: str, findings: list[str]
    ) -> dspy.Prediction:
        out = await call_predictor(
            STAGES.orchestrate.name,
            self.evaluate_progress,
            goal=goal,
            user_constraints=user_constraints,
            context_summary=context_summary,
            findings=findings,
        )
        clamp = lambda x: min(1.0, max(0.0, float(x)))  # noqa: E731
        return dspy.Prediction(
            goal_satisfaction=clamp(out.goal_satisfaction), quality=clamp(out.quality), rationale=out.rationale
        )
