"""The `parallel` strategy's own stages (from ParallelResearch): breadth and depth policies, and the progress scorer."""

from __future__ import annotations

import dspy

from deepresearch.programs.lm.usage import call_predictor
from deepresearch.programs.runtime.stage import Stage, teach
from deepresearch.programs.runtime.text import norm_text
from deepresearch.programs.stages.lexical import feedback_terms, key_terms
from deepresearch.programs.stages.spec import StageSpec
from deepresearch.signatures.orchestrate import DecideDeepen, EvaluateProgress, PlanBreadth
from deepresearch.signatures.types import Source


class BreadthPolicy(Stage):
    """Query + the tree's findings -> 0..max_breadth subqueries (the breadth policy π_b)."""

    def __init__(self):
        super().__init__()
        self.plan_breadth = dspy.Predict(PlanBreadth)

    async def aforward(
        self, query: str, accumulated_findings: list[str], user_constraints: str, max_breadth: int
    ) -> dspy.Prediction:
        out = await call_predictor(
            BREADTH,
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
    """Query + its findings -> go one level deeper or not (the depth policy π_d, direct mode)."""

    def __init__(self):
        super().__init__()
        self.decide_deepen = dspy.Predict(DecideDeepen)

    async def aforward(
        self, query: str, local_findings: list[str], user_constraints: str, depth: int, max_depth: int
    ) -> dspy.Prediction:
        if depth >= max_depth:  # never beyond the maximum: decided here, without an LM call
            return dspy.Prediction(deepen=False, rationale="maximum depth reached")
        out = await call_predictor(
            DEEPEN,
            self.decide_deepen,
            query=query,
            local_findings=local_findings,
            user_constraints=user_constraints,
            depth=depth,
            max_depth=max_depth,
        )
        return dspy.Prediction(deepen=bool(out.deepen), rationale=out.rationale)


class ProgressScorer(Stage):
    """A running node's goal, sources and findings -> goal satisfaction and quality in [0, 1] (the policy π_o)."""

    def __init__(self):
        super().__init__()
        self.evaluate_progress = dspy.Predict(EvaluateProgress)

    async def aforward(
        self, goal: str, user_constraints: str, context_summary: str, findings: list[str]
    ) -> dspy.Prediction:
        out = await call_predictor(
            ORCHESTRATE,
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


class OfflineBreadthPolicy(BreadthPolicy):
    """Splits a query by the feedback terms of the findings it does not mention yet (parallel strategy).

    Returns no subqueries when the findings offer no new term, so the branch stops.
    """

    is_offline = True

    async def aforward(
        self, query: str, accumulated_findings: list[str], user_constraints: str, max_breadth: int
    ) -> dspy.Prediction:
        base = key_terms(query, min_len=1)[:8]
        sources = [Source(source_id=str(i), title="", text=f) for i, f in enumerate(accumulated_findings)]
        if sources:
            subqueries = [f"{' '.join(base)} {t}" for t in feedback_terms(sources, set(base), max_breadth)]
        else:
            subqueries = [" ".join(base)] if base else []
        inputs = {
            "query": query,
            "accumulated_findings": accumulated_findings,
            "user_constraints": user_constraints,
            "max_breadth": max_breadth,
        }
        teach(self.plan_breadth, inputs, subqueries=subqueries)
        return dspy.Prediction(subqueries=subqueries)


class OfflineDepthPolicy(DepthPolicy):
    """Deepens while the node found learnings and the maximum depth is not reached (parallel strategy)."""

    is_offline = True

    async def aforward(
        self, query: str, local_findings: list[str], user_constraints: str, depth: int, max_depth: int
    ) -> dspy.Prediction:
        deepen = bool(local_findings) and depth < max_depth
        rationale = "findings to follow up" if deepen else "nothing to follow up"
        if depth < max_depth:  # the LM module decides the maximum depth without a call
            inputs = {
                "query": query,
                "local_findings": local_findings,
                "user_constraints": user_constraints,
                "depth": depth,
                "max_depth": max_depth,
            }
            teach(self.decide_deepen, inputs, deepen=deepen, rationale=rationale)
        return dspy.Prediction(deepen=deepen, rationale=rationale)


class OfflineProgressScorer(ProgressScorer):
    """Goal satisfaction as the share of the goal's key terms the findings cover; quality as the share of
    findings that mention any of them (parallel strategy)."""

    is_offline = True

    async def aforward(
        self, goal: str, user_constraints: str, context_summary: str, findings: list[str]
    ) -> dspy.Prediction:
        wanted = set(key_terms(goal))
        found = [set(key_terms(f)) for f in findings]
        covered = set().union(*found) & wanted if found else set()
        satisfaction = len(covered) / len(wanted) if wanted else 0.0
        quality = sum(bool(f & wanted) for f in found) / len(found) if found else 0.0
        rationale = f"{len(covered)} of {len(wanted)} goal terms covered"
        inputs = {
            "goal": goal,
            "user_constraints": user_constraints,
            "context_summary": context_summary,
            "findings": findings,
        }
        teach(self.evaluate_progress, inputs, goal_satisfaction=satisfaction, quality=quality, rationale=rationale)
        return dspy.Prediction(goal_satisfaction=satisfaction, quality=quality, rationale=rationale)


BREADTH = StageSpec(
    "breadth",
    "picks the subqueries of a planning node (parallel's breadth policy)",
    (PlanBreadth,),
    BreadthPolicy,
    OfflineBreadthPolicy,
    research_attr="breadth_policy",
    strategy="parallel",
    max_output_tokens=1024,
)
DEEPEN = StageSpec(
    "deepen",
    "decides whether a node goes one level deeper (parallel's depth policy)",
    (DecideDeepen,),
    DepthPolicy,
    OfflineDepthPolicy,
    research_attr="depth_policy",
    strategy="parallel",
    max_output_tokens=512,
)
ORCHESTRATE = StageSpec(
    "orchestrate",
    "scores a running node's progress to prune its subtree (parallel's progress scorer)",
    (EvaluateProgress,),
    ProgressScorer,
    OfflineProgressScorer,
    research_attr="progress_scorer",
    strategy="parallel",
    max_output_tokens=512,
)
