"""LLM judges of reports in the DeepResearchGym style, as DSPy programs.

* `KeyPointJudge`: labels each ground-truth key point Supported / Omitted / Contradicted; key-point
  recall (KPR) and contradiction (KPC) follow from the labels.
* `CriteriaJudge`: one call per quality criterion (clarity, depth, balance, breadth, support,
  insightfulness), an integer 0-10 with a justification.
* `CitationSupportJudge`: grades how well a claim's cited sources back it (1 / 0.5 / 0), the
  input of DeepResearchGym citation precision (`deepresearch.eval.citations.citation_precision`).
* `JudgeTaxonomy`: the signature of TaxoBench's taxonomy judge, run by
  `deepresearch.eval.taxonomy_judge.TaxonomyJudge`.

The signatures live here, not in `signatures/`, so no optimizer ever tunes the judge. Each judge
takes its own LM (`judge_lm` builds one at temperature 0) and an optional `JudgeCache`: verdicts are
stored on disk keyed by the judge's prompt, the LM and the inputs, so re-scoring costs nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import diskcache
import dspy
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from deepresearch.eval.citations import Sentence, citation_precision
from deepresearch.programs import environment
from deepresearch.programs.lm.models import make_lm, preflight
from deepresearch.programs.runtime.stage import run_sync

logger = logging.getLogger(__name__)

KeyPointLabel = Literal["Supported", "Omitted", "Contradicted"]
SupportLabel = Literal["full", "partial", "none"]
SUPPORT_GRADES: dict[str, float] = {"full": 1.0, "partial": 0.5, "none": 0.0}
JUDGE_CACHE_BYTES = 1 << 30  # 1 GiB of verdicts: hundreds of thousands of judgements


# Behaviour: DeepResearchGym's key-point judgement. Wording is ours.
class JudgeKeyPoint(dspy.Signature):
    """Decide how the report treats one key point that a good answer to the question should cover.
    Supported means the report states the point or something that clearly implies it.
    Contradicted means the report asserts the opposite of the point.
    Omitted means the report neither supports nor contradicts it."""

    question: str = dspy.InputField()
    report: str = dspy.InputField()
    key_point: str = dspy.InputField()
    label: KeyPointLabel = dspy.OutputField()


# Behaviour: DeepResearchGym's citation precision, graded support of a claim by its cited documents. Wording is ours.
class GradeCitationSupport(dspy.Signature):
    """Judge whether the cited sources back the claim, using only what the sources say.
    Full means every part of the claim is stated in or follows directly from the sources.
    Partial means some of the claim is backed and some is not. None means the sources do not back it."""

    claim: str = dspy.InputField()
    sources: list[str] = dspy.InputField(desc="texts of the documents the claim cites")
    support: SupportLabel = dspy.OutputField()


# Behaviour: DeepResearchGym's report rating (six 0-10 criteria, strict rubric, justification). Wording is ours.
class RateReport(dspy.Signature):
    """Rate the report on the single criterion named, following its rubric strictly.
    Justify the rating briefly with specific strengths and weaknesses, then give an integer from 0 to 10.
    Keep 9 and 10 for reports with no visible weakness on this criterion; judge only this criterion."""

    question: str = dspy.InputField()
    report: str = dspy.InputField()
    criterion: str = dspy.InputField()
    rubric: str = dspy.InputField()
    justification: str = dspy.OutputField()
    score: int = dspy.OutputField(desc="0 to 10")


# Rubrics in our own words; each is what a 10 looks like on that criterion.
CRITERIA: dict[str, str] = {
    "clarity": "Well organised and easy to follow: a clear structure, precise wording, no needless repetition, "
    "and a direct answer to the question early on.",
    "depth": "Explains mechanisms, causes and conditions rather than listing facts; gives concrete details, "
    "numbers and examples, and follows the question to its harder parts.",
    "balance": "Presents the competing views and evidence on the question fairly, including disagreements and "
    "limitations, without favouring one side beyond what the evidence warrants.",
    "breadth": "Covers the main aspects, subtopics and perspectives relevant to the question without large gaps.",
    "support": "Backs its claims with specific, credible, cited evidence; the citations fit the claims they follow.",
    "insightfulness": "Goes beyond summary: synthesises sources into new connections, implications or "
    "well-founded recommendations, and points out what remains open.",
}


def judge_lm(
    model: str, api_base: str | None = None, api_key: str | None = None, temperature: float = 0.0, **kwargs: Any
) -> dspy.LM:
    """A checked judge LM, temperature 0 by default.

    Raises:
        ValueError: for `offline`, which has no judge (use the lexical fallbacks of deepresearch.eval.citations).
    """
    lm = make_lm(model, api_base, api_key, temperature=temperature, **kwargs)
    if lm is None:
        raise ValueError("the judges need an LM; pass a model such as openai/gpt-4.1-mini, not 'offline'")
    return lm


def open_judge(args: Any, checked: str | None) -> dspy.LM:
    """The judge LM of a command's --judge-lm, on its --judge-api-base server (optimize) or else --api-base's;
    checked with one request unless --no-preflight, or it is the LM `checked` already was, on the same server."""
    own = getattr(args, "judge_api_base", None)
    key = environment.judge_api_key() if own else environment.api_key()
    lm = judge_lm(args.judge_lm, own or args.api_base, key, timeout_s=args.lm_timeout)
    if not args.no_preflight and (args.judge_lm != checked or own):
        preflight(lm, timeout_s=min(args.lm_timeout, 60.0))
    return lm


class JudgeCache:
    """Judge verdicts on disk, keyed by (judge prompt, LM, inputs): a diskcache folder of JSON text.

    diskcache writes each entry in one SQLite transaction (a crash never leaves half a verdict); past
    `size_limit` bytes, each new verdict drops the least recently stored one.

    Args:
        directory: Where verdicts are kept; created when missing.
        size_limit: Most bytes the folder holds.
    """

    def __init__(self, directory: str | Path, size_limit: int = JUDGE_CACHE_BYTES):
        self.directory = Path(directory)
        self._cache = diskcache.Cache(str(self.directory), size_limit=size_limit, cull_limit=1)

    def get(self, key: str) -> dict[str, Any] | None:
        text = self._cache.get(key)
        return None if text is None else json.loads(text)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._cache.set(key, json.dumps(value, ensure_ascii=False))  # JSON text, not a pickle


def cache_key(predictor: dspy.Predict, lm: Any, inputs: Mapping[str, Any]) -> str:
    """SHA-256 of the judge's instructions and fields, the LM's model and settings, and the inputs."""
    sig = predictor.signature
    payload = {
        "instructions": sig.instructions,
        "inputs": list(sig.input_fields),
        "outputs": list(sig.output_fields),
        "model": getattr(lm, "model", str(lm)),
        "temperature": getattr(lm, "kwargs", {}).get("temperature"),
        "values": dict(inputs),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()


async def cached_call(predictor: dspy.Predict, cache: JudgeCache | None, **inputs: Any) -> dict[str, Any]:
    """The predictor's outputs for `inputs` as JSON values, from the cache when it has them."""
    lm = predictor.lm or dspy.settings.lm
    if lm is None:
        raise ValueError(
            "no judge LM: pass lm= to the judge or build one with deepresearch.eval.judges.judge_lm(model)"
        )
    key = cache_key(predictor, lm, inputs) if cache is not None else ""
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit
    out = await predictor.acall(**inputs)
    # plain JSON values (pydantic outputs become dicts), so a fresh answer and a cached one look alike
    value = {name: to_jsonable_python(out[name]) for name in predictor.signature.output_fields}
    if cache is not None:
        cache.put(key, value)
    return value


def key_point_recall(labels: Sequence[str]) -> float:
    """KPR: share of key points the report supports (0 with no key points)."""
    return sum(label == "Supported" for label in labels) / len(labels) if labels else 0.0


def key_point_contradiction(labels: Sequence[str]) -> float:
    """KPC: share of key points the report contradicts (lower is better)."""
    return sum(label == "Contradicted" for label in labels) / len(labels) if labels else 0.0


class _Judge(dspy.Module):
    def __init__(self, lm: dspy.LM | None, cache: JudgeCache | None, max_concurrency: int):
        super().__init__()
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.cache = cache
        self.max_concurrency = max_concurrency

    async def _gather(self, predictor: dspy.Predict, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        slots = asyncio.Semaphore(self.max_concurrency)

        async def one(inputs):
            async with slots:
                return await cached_call(predictor, self.cache, **inputs)

        return list(await asyncio.gather(*[one(c) for c in calls]))

    def forward(self, *args: Any, **kwargs: Any) -> dspy.Prediction:
        return run_sync(self.aforward(*args, **kwargs))


class KeyPointJudge(_Judge):
    """Labels each key point against the report; returns verdicts (labels), KPR and KPC.

    Example:
        >>> judge = KeyPointJudge(lm=judge_lm("openai/gpt-4.1-mini"))                   # doctest: +SKIP
        >>> out = asyncio.run(judge.acall(question=q, report=md, key_points=points))    # doctest: +SKIP
        >>> out.kpr, out.kpc, out.verdicts                                                 # doctest: +SKIP
    """

    def __init__(self, lm: dspy.LM | None = None, cache: JudgeCache | None = None, max_concurrency: int = 8):
        super().__init__(lm, cache, max_concurrency)
        self.judge_key_point = dspy.Predict(JudgeKeyPoint)
        self.set_lm(lm)  # None: dspy.settings.lm, at call time

    async def aforward(self, question: str, report: str, key_points: Sequence[str]) -> dspy.Prediction:
        outs = await self._gather(
            self.judge_key_point, [{"question": question, "report": report, "key_point": kp} for kp in key_points]
        )
        labels = [o["label"] for o in outs]
        return dspy.Prediction(verdicts=labels, kpr=key_point_recall(labels), kpc=key_point_contradiction(labels))


class CriteriaJudge(_Judge):
    """Scores a report 0-10 on each criterion of `criteria` (default: the six of DeepResearchGym)."""

    def __init__(
        self,
        lm: dspy.LM | None = None,
        cache: JudgeCache | None = None,
        max_concurrency: int = 8,
        criteria: Mapping[str, str] | None = None,
    ):
        super().__init__(lm, cache, max_concurrency)
        self.criteria = dict(criteria or CRITERIA)
        if not self.criteria:
            raise ValueError(f"criteria is empty; pass a name -> rubric mapping such as: {', '.join(CRITERIA)}")
        self.rate_report = dspy.Predict(RateReport)
        self.set_lm(lm)  # None: dspy.settings.lm, at call time

    async def aforward(self, question: str, report: str) -> dspy.Prediction:
        outs = await self._gather(
            self.rate_report,
            [
                {"question": question, "report": report, "criterion": name, "rubric": rubric}
                for name, rubric in self.criteria.items()
            ],
        )
        scores, justifications = {}, {}
        for name, out in zip(self.criteria, outs):
            score = int(out["score"])
            if not 0 <= score <= 10:
                logger.warning("judge gave %s a score of %s, outside 0-10; clamped", name, score)
                score = min(max(score, 0), 10)
            scores[name], justifications[name] = score, out["justification"]
        return dspy.Prediction(scores=scores, justifications=justifications, mean=sum(scores.values()) / len(scores))


class CitationSupportJudge(_Judge):
    """Grades each cited claim by its cited passages; returns grades and DeepResearchGym citation precision."""

    def __init__(
        self,
        lm: dspy.LM | None = None,
        cache: JudgeCache | None = None,
        max_concurrency: int = 8,
        max_citations: int = 3,
    ):
        super().__init__(lm, cache, max_concurrency)
        self.max_citations = max_citations
        self.grade_citation_support = dspy.Predict(GradeCitationSupport)
        self.set_lm(lm)  # None: dspy.settings.lm, at call time

    async def aforward(self, claims: Sequence[Sentence], passages: Mapping[str, str]) -> dspy.Prediction:
        cited = [c for c in claims if c.citations]
        calls, slots = [], []
        for i, claim in enumerate(cited):
            texts = [passages[c] for c in claim.citations[: self.max_citations] if c in passages]
            if texts:  # a claim whose citations resolve to nothing is unsupported without asking
                calls.append({"claim": claim.text, "sources": texts})
                slots.append(i)
        outs = await self._gather(self.grade_citation_support, calls)
        grades = [0.0] * len(cited)
        for i, out in zip(slots, outs):
            grades[i] = SUPPORT_GRADES[out["support"]]
        return dspy.Prediction(grades=grades, precision=citation_precision(grades))


class DimensionScore(BaseModel):
    """The verdict on one dimension: the reasoning first, then the score it leads to."""

    reasoning: str = Field(description="the evidence from both trees and the gaps found, in two to four sentences")
    score: int = Field(description="an integer from 1 (worst) to 5 (best)")


# Behaviour: TaxoBench's judge (a rigorous, objective expert's view; evidence -> gap analysis -> score; the four
# rubrics). Wording is ours; the expert stance is stated as a standard to apply, not a role to play.
class JudgeTaxonomy(dspy.Signature):
    """Judge, with the rigour and objectivity of a specialist in the topic's field, how well a generated taxonomy matches one written by experts.
    For each dimension, first collect evidence by pointing to specific branches of both trees, then analyse the gaps between them, and only then give an integer score from 1 to 5 that follows the rubric.
    Judge the category names and their arrangement only; the trees list no papers, and the expert tree is the standard, not a template to be copied word for word."""

    topic: str = dspy.InputField()
    reference_tree: str = dspy.InputField(desc="the expert taxonomy as an indented text tree")
    model_tree: str = dspy.InputField(desc="the taxonomy to judge, in the same form")
    semantic_coverage: DimensionScore = dspy.OutputField(
        desc="how many of the expert tree's core concepts the model tree recalls. 1: more than half of the core "
        "first- and second-level branches are missing; 4: more than 90% of the core concepts are present; "
        "5: all of them are, possibly with useful branches the experts lacked"
    )
    sibling_organization: DimensionScore = dspy.OutputField(
        desc="whether the children of each node are mutually exclusive and jointly exhaustive. 1: siblings overlap "
        "by more than half, or follow no visible logic; 5: every level divides its parent along one strict "
        "criterion"
    )
    hierarchical_logic: DimensionScore = dspy.OutputField(
        desc="whether each child is truly a kind or a part of its parent. 1: many parent-child relations are "
        "inverted or invented; 5: every relation follows strict academic definitions at the depth the experts "
        "used"
    )
    structural_topology: DimensionScore = dspy.OutputField(
        desc="how closely the shape of the model tree matches the expert tree. 1: badly deformed, for example flat "
        "where the experts go deep; 5: it reproduces how the experts spread detail across levels and branches"
    )
