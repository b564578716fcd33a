"""Quality of what the writing stages produce: citation support, key points, source integration.

One scorer for every stage that writes cited text, from a node's learnings to the final report:
* citation precision and recall by ScholarQABench's Algorithm 1 (`deepresearch.eval.citations`), the
  entailment judged by a judge LM (`Support.from_lm`, verdicts cached on disk) or, without one, by the
  named offline rule `lexical_entails`;
* DeepResearchGym's key-point recall against a question's reference key points, when it has them;
* DeepResearch-Eco's source integration: distinct cited sources per 1,000 words, scaled as S_density;
* retention: the share of the citations a stage was given that its output still cites (a merger or
  writer that drops sources loses them for the rest of the run);
* a composite of these for tuning a whole program.
Every score comes with feedback: sentences that say what to fix, for GEPA's reflection.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dspy

from deepresearch.eval.citations import CitationScores, Sentence, lexical_coverage, lexical_entails
from deepresearch.eval.citations import scholarqa_citation_scores as algorithm_1
from deepresearch.eval.eco import density_score
from deepresearch.eval.judges import GradeCitationSupport, JudgeCache, JudgeKeyPoint, cached_call
from deepresearch.programs.runtime.stage import run_sync

# Composite weights: support of what is claimed first, then coverage of what should be claimed, then
# how densely sources are woven in. Renormalised over the parts an example has (key points are optional).
COMPOSITE_WEIGHTS: dict[str, float] = {"citation_f1": 0.5, "kpr": 0.3, "integration": 0.2}
KEY_POINT_COVERAGE = 0.6  # the offline rule's share of a key point's content words the text must contain


class Support:
    """Decides whether passages entail a claim: a judge LM with cached verdicts, or the lexical rule.

    Args:
        lm: The judge LM (kept apart from the LM being tuned); None for the offline rule.
        cache: Where the judge's verdicts are kept, so repeated metric calls cost no LM call.
    """

    def __init__(self, lm: dspy.LM | None = None, cache: JudgeCache | None = None):
        self.lm, self.cache = lm, cache
        self._memo: dict[tuple[str, ...], bool] = {}  # this process's verdicts (the cache keeps them across runs)
        self._lock = threading.Lock()
        self.grade = dspy.Predict(GradeCitationSupport)
        self.key_point = dspy.Predict(JudgeKeyPoint)
        if lm is not None:
            self.grade.lm = lm
            self.key_point.lm = lm

    @property
    def name(self) -> str:
        return getattr(self.lm, "model", "judge") if self.lm is not None else "lexical_entails"

    def _ask(self, key: tuple[str, ...], ask) -> bool:
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        verdict = ask()
        with self._lock:
            self._memo[key] = verdict
        return verdict

    def entails(self, premise: str, hypothesis: str) -> bool:
        if self.lm is None:
            return lexical_entails(premise, hypothesis)
        return self._ask(
            ("entails", premise, hypothesis),
            lambda: (
                run_sync(cached_call(self.grade, self.cache, claim=hypothesis, sources=[premise]))["support"] == "full"
            ),
        )

    def covers(self, question: str, text: str, key_point: str) -> bool:
        """Whether `text` states `key_point` (the judge's "Supported", or the offline word-coverage rule)."""
        if self.lm is None:
            return lexical_coverage(text, key_point) >= KEY_POINT_COVERAGE
        return self._ask(
            ("covers", question, text, key_point),
            lambda: (
                run_sync(cached_call(self.key_point, self.cache, question=question, report=text, key_point=key_point))[
                    "label"
                ]
                == "Supported"
            ),
        )


@dataclass(frozen=True)
class Quality:
    """The scores of one piece of cited text, and what to fix."""

    citations: CitationScores
    kpr: float | None = None  # None: the example has no key points
    integration: float | None = 0.0  # None: not scored (lists of findings are not prose)
    retention: float | None = None  # None: nothing was given to retain
    problems: tuple[str, ...] = field(default=())

    @property
    def citation_precision(self) -> float:
        return self.citations.precision

    @property
    def citation_recall(self) -> float:
        return self.citations.recall

    @property
    def citation_f1(self) -> float:
        return self.citations.f1

    @property
    def composite(self) -> float:
        parts = {"citation_f1": self.citation_f1, "kpr": self.kpr, "integration": self.integration}
        present = {k: v for k, v in parts.items() if v is not None}
        weights = {k: w for k, w in COMPOSITE_WEIGHTS.items() if parts[k] is not None}
        score = sum(w * present[k] for k, w in weights.items()) / sum(weights.values())
        return score * self.retention if self.retention is not None else score

    def feedback(self, limit: int = 4) -> str:
        head = (
            f"Citation precision {self.citation_precision:.2f}, recall {self.citation_recall:.2f} "
            f"({self.citations.n_supported} of {self.citations.n_claims} claims supported by what they cite)"
        )
        if self.kpr is not None:
            head += f", key-point recall {self.kpr:.2f}"
        if self.retention is not None:
            head += f", {self.retention:.0%} of the given sources still cited"
        shown = list(self.problems[:limit])
        if len(self.problems) > limit:
            shown.append(f"({len(self.problems) - limit} more like these)")
        return " ".join([head + ".", *shown]) if shown else head + ". Every claim is supported; keep this behaviour."


def _short(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def score_claims(
    claims: Sequence[Sentence],
    passages: Mapping[str, str],
    support: Support,
    *,
    text: str = "",
    question: str = "",
    key_points: Sequence[str] = (),
    given: Sequence[str] = (),
    integration: bool = True,
) -> Quality:
    """Scores cited claims against the passages their citations name.

    Args:
        claims: The claim sentences with their citation labels.
        passages: Label -> the cited passage's text.
        support: The entailment judge.
        text: The whole text, for key points and source integration (default: the claims joined).
        question: The question the text answers (for the key-point judge).
        key_points: Reference key points; none means KPR is not scored.
        given: Citation labels the stage was given; retention is the share still cited.
        integration: Score source integration (not for lists of findings, which are not prose).
    """
    scores = algorithm_1(claims, passages, support.entails)
    problems = []
    for claim in claims:
        cited = [c for c in claim.citations[:3] if c in passages]
        if not claim.citations:
            problems.append(f'"{_short(claim.text)}" cites nothing: cite the passage that states it or drop it.')
        elif not cited:
            problems.append(
                f'"{_short(claim.text)}" cites {", ".join(claim.citations)}, which name no given '
                f"source: copy source ids exactly."
            )
        elif not support.entails("\n".join(passages[c] for c in cited), claim.text):
            problems.append(
                f'"{_short(claim.text)}" is not supported by {", ".join(cited)}: state only what '
                f"the cited passages say, or cite the one that says it."
            )
    body = text or " ".join(c.text for c in claims)
    kpr = None
    if key_points:
        missed = [kp for kp in key_points if not support.covers(question, body, kp)]
        kpr = 1 - len(missed) / len(key_points)
        problems += [f'The text omits this key point: "{_short(kp)}".' for kp in missed]
    cited_all = {c for claim in claims for c in claim.citations}
    words = len(body.split())
    density = (density_score(len(cited_all), words) if words else 0.0) if integration else None
    retention = None
    if given:
        kept = set(given) & cited_all
        retention = len(kept) / len(set(given))
        if retention < 1:
            lost = sorted(set(given) - kept)
            problems.append(
                f"Sources given but no longer cited: {', '.join(lost[:6])}"
                f"{' and more' if len(lost) > 6 else ''}; keep every source's findings with its id."
            )
    return Quality(citations=scores, kpr=kpr, integration=density, retention=retention, problems=tuple(problems))


def learning_claims(learnings: Sequence) -> list[Sentence]:
    """Learnings as claims: each learning's text with its source ids as citations."""
    return [Sentence(text=x.text, citations=tuple(dict.fromkeys(s.lower() for s in x.source_ids))) for x in learnings]
