"""TaxoBench's LLM judge of taxonomies: four 1-5 scores of a model tree against the expert tree.

Both trees reach the judge as indented text trees of category labels, papers left out. The average
of a judgement is the mean of its four scores; `summarize_judgements` macro-averages many of them,
as in the paper's Table 7. Verdicts can be cached on disk with `deepresearch.eval.judges.JudgeCache`, so
re-judging a tree costs no LM call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from deepresearch.eval.judges import JudgeCache, JudgeTaxonomy, cached_call
from deepresearch.eval.taxonomy_tree import Tree, coerce_tree, render_tree
from deepresearch.programs.runtime.stage import run_sync

logger = logging.getLogger(__name__)

DIMENSIONS = ("semantic_coverage", "sibling_organization", "hierarchical_logic", "structural_topology")
SCORE_RANGE = (1, 5)


class JudgeAnswerError(ValueError):
    """The judge LM's answer could not be read as four 1-5 scores."""


@dataclass(frozen=True)
class TaxonomyJudgement:
    """One tree's verdict: a 1-5 score and the judge's reasoning per dimension (keys: `DIMENSIONS`)."""

    scores: dict[str, int]
    reasoning: dict[str, str]

    @property
    def average(self) -> float:
        return judgement_average(self.scores)

    def to_dict(self) -> dict[str, Any]:
        return {"scores": dict(self.scores), "reasoning": dict(self.reasoning), "average": self.average}


def judgement_average(scores: Mapping[str, float]) -> float:
    """The judge's Avg: the mean of the four dimension scores.

    Raises:
        KeyError: when a dimension is missing.
    """
    return sum(scores[d] for d in DIMENSIONS) / len(DIMENSIONS)


def summarize_judgements(judgements: Sequence[Mapping[str, float] | TaxonomyJudgement]) -> dict[str, float]:
    """Per-dimension means over trees, plus `average` (the mean of the four means, which equals the
    mean of the per-tree averages) and `trees`; all zeros for no trees.

    Accepts judgements or plain dimension -> score mappings (for example a system's published row).
    """
    rows = [j.scores if isinstance(j, TaxonomyJudgement) else j for j in judgements]
    if not rows:
        return {d: 0.0 for d in DIMENSIONS} | {"average": 0.0, "trees": 0}
    means = {d: sum(float(r[d]) for r in rows) / len(rows) for d in DIMENSIONS}
    return means | {"average": judgement_average(means), "trees": len(rows)}


def parse_judgement(answer: Mapping[str, Any]) -> TaxonomyJudgement:
    """A judgement from the judge's outputs (each dimension a {reasoning, score} mapping); scores outside
    1-5 are clamped with a warning.

    Raises:
        JudgeAnswerError: when a dimension is missing or its score is not an integer.
    """
    low, high = SCORE_RANGE
    scores, reasoning = {}, {}
    for dim in DIMENSIONS:
        verdict = answer.get(dim)
        given: Mapping[str, Any] = verdict if isinstance(verdict, Mapping) else {}
        score = given.get("score")
        if isinstance(score, bool) or not isinstance(score, int):
            raise JudgeAnswerError(f"the judge gave no integer score for {dim}: {verdict!r}")
        if not low <= score <= high:
            logger.warning("judge gave %s a score of %s, outside %s-%s; clamped", dim, score, low, high)
            score = min(max(score, low), high)
        scores[dim], reasoning[dim] = score, str(given.get("reasoning", ""))
    return TaxonomyJudgement(scores=scores, reasoning=reasoning)


class TaxonomyJudge(dspy.Module):
    """Scores a model taxonomy against the expert taxonomy of the same topic on the four dimensions.

    Args:
        lm: The judge LM (the paper used GPT-4o at temperature 0; see `deepresearch.eval.judges.judge_lm`).
            Without one, the LM of the current DSPy context is used.
        cache: Optional verdict cache; a tree judged before costs no LM call.

    Example:
        >>> judge = TaxonomyJudge(lm=judge_lm("openai/gpt-4o"), cache=JudgeCache("runs/judge"))  # doctest: +SKIP
        >>> out = judge(topic=survey.topic, reference=survey.gt, tree=prediction.tree)           # doctest: +SKIP
        >>> out.scores, out.average                                                              # doctest: +SKIP
    """

    def __init__(self, lm: dspy.LM | None = None, cache: JudgeCache | None = None):
        super().__init__()
        self.cache = cache
        self.judge_taxonomy = dspy.Predict(JudgeTaxonomy)
        if lm is not None:
            self.set_lm(lm)

    async def aforward(self, topic: str, reference: Tree, tree: Any) -> dspy.Prediction:
        """Returns a Prediction with `judgement` (TaxonomyJudgement), `scores`, `reasoning` and `average`.

        Raises:
            JudgeAnswerError: when the judge's answer cannot be parsed into four integer scores.
        """
        inputs = {
            "topic": topic,
            "reference_tree": render_tree(coerce_tree(reference, topic)),
            "model_tree": render_tree(coerce_tree(tree, topic)),
        }
        try:
            answer = await cached_call(self.judge_taxonomy, self.cache, **inputs)
        except AdapterParseError as e:
            raise JudgeAnswerError(f"the judge's answer for topic {topic!r} could not be parsed: {e}") from e
        judgement = parse_judgement(answer)
        return dspy.Prediction(
            judgement=judgement, scores=judgement.scores, reasoning=judgement.reasoning, average=judgement.average
        )

    def forward(self, topic: str, reference: Tree, tree: Any) -> dspy.Prediction:
        return run_sync(self.aforward(topic=topic, reference=reference, tree=tree))
