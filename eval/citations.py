"""Citation checks of a Markdown report: recall, graded precision, and ScholarQABench's Algorithm 1.

* DeepResearchGym style: citation recall is the share of claim sentences carrying at
  least one citation; citation precision is the mean support grade (1 / 0.5 / 0) of each cited claim
  by its cited sources. Grades come from an LLM judge (`deepresearch.eval.judges.CitationSupportJudge`) or from
  `lexical_support`, an offline lexical-entailment fallback that is not an entailment model.
* ScholarQABench style (its Algorithm 1): `scholarqa_citation_scores` with a pluggable
  `entails(premise, hypothesis) -> bool`, as the paper states it; `scholarqa_official_scores` applies the
  citation rules of the released scorer instead (AkariAsai/ScholarQABench scripts/citation_correctness_eval.py,
  `compute_autoais`): inherited citations, out-of-range citations, the first number of a group, the length
  of a sentence with its markers, and answers without a sentence left out of the means.

Claims are found deterministically: prose sentences of the report body (headings, tables, quotes,
paragraphs wholly in emphasis and the reference list left out) of at least `min_chars` characters once citation markers are removed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from deepresearch.eval.f1 import harmonic_mean
from deepresearch.programs.citing.entailment import (
    Sentence,
    body_sentences,
    citations_in,
    lexical_coverage,
    lexical_entails,
    lexical_support,
    plain_sentence,
    prose_blocks,
    split_block,
    strip_citations,
)
from deepresearch.programs.citing.provenance import body_of

Entails = Callable[[str, str], bool]
Grader = Callable[[str, Sequence[str]], float]

GRADES = (0.0, 0.5, 1.0)


def split_sentences(markdown: str) -> list[Sentence]:
    """Prose sentences of the report body, each with its citations.

    Headings, table rows, block quotes and the trailing References/Sources section are left out;
    list items are read as prose.
    """
    return body_sentences(body_of(markdown))


def claim_sentences(markdown: str, min_chars: int = 50) -> list[Sentence]:
    """Sentences long enough to carry a claim (ScholarQABench's >= 50 characters rule)."""
    return [s for s in split_sentences(markdown) if len(s.text) >= min_chars]


@dataclass(frozen=True)
class CitationRecall:
    n_claims: int
    n_cited: int

    @property
    def recall(self) -> float:
        """Share of claims with at least one citation; 0 when there are no claims."""
        return self.n_cited / self.n_claims if self.n_claims else 0.0


def citation_recall(claims: Iterable[Sentence]) -> CitationRecall:
    """DeepResearchGym citation recall: the share of claim sentences carrying >= 1 citation."""
    claims = list(claims)
    return CitationRecall(n_claims=len(claims), n_cited=sum(1 for c in claims if c.citations))


def citation_precision(grades: Sequence[float]) -> float:
    """DeepResearchGym citation precision: the mean support grade (each 0, 0.5 or 1) of the cited claims.

    Raises:
        ValueError: on a grade outside {0, 0.5, 1}.
    """
    bad = [g for g in grades if g not in GRADES]
    if bad:
        raise ValueError(f"support grades must be 0, 0.5 or 1, got {bad[0]!r}")
    return sum(grades) / len(grades) if grades else 0.0


def grade_claims(
    claims: Iterable[Sentence], passages: Mapping[str, str], grader: Grader = lexical_support, max_citations: int = 3
) -> list[float]:
    """Support grade of each cited claim by the texts of its first `max_citations` citations.

    A claim whose citations name no known passage gets 0 (nothing supports it).
    """
    cited = [claim for claim in claims if claim.citations]
    texts = [[passages[c] for c in claim.citations[:max_citations] if c in passages] for claim in cited]
    return [grader(claim.text, t) if t else 0.0 for claim, t in zip(cited, texts)]


@dataclass(frozen=True)
class CitationScores:
    """Counts of ScholarQABench's Algorithm 1 for one report."""

    n_claims: int
    n_supported: int
    n_cites: int
    n_necessary: int

    @property
    def precision(self) -> float:
        return self.n_necessary / self.n_cites if self.n_cites else 0.0

    @property
    def recall(self) -> float:
        return self.n_supported / self.n_claims if self.n_claims else 0.0

    @property
    def f1(self) -> float:
        return harmonic_mean(self.precision, self.recall)


def scholarqa_citation_scores(
    claims: Iterable[Sentence],
    passages: Mapping[str, str],
    entails: Entails,
    max_citations: int = 3,
    printed_algorithm: bool = False,
) -> CitationScores:
    """ScholarQABench citation precision and recall of one report, by its Algorithm 1.

    Args:
        claims: The evaluated sentences (see `claim_sentences`), citation markers already removed.
        passages: Text of each citation label.
        entails: `entails(premise, hypothesis) -> bool`, an NLI model or `lexical_entails`.
        max_citations: Only the first citations of a sentence are scored.
        printed_algorithm: Count citations only of supported sentences, as the paper prints it;
            by default every resolvable citation of every evaluated sentence counts.

    Citations naming no known passage are dropped; a sentence left with none is unsupported and
    adds nothing to N_cites.
    """
    n_claims = n_supported = n_cites = n_necessary = 0
    for claim in claims:
        n_claims += 1
        cited = [c for c in claim.citations[:max_citations] if c in passages]
        if not cited:
            continue
        supported = entails("\n".join(passages[c] for c in cited), claim.text)
        if not printed_algorithm:
            n_cites += len(cited)
        if not supported:
            continue
        n_supported += 1
        if printed_algorithm:
            n_cites += len(cited)
        for c in cited:
            rest = [passages[o] for o in cited if o != c]
            if entails(passages[c], claim.text) or not (rest and entails("\n".join(rest), claim.text)):
                n_necessary += 1
    return CitationScores(n_claims=n_claims, n_supported=n_supported, n_cites=n_cites, n_necessary=n_necessary)


# The released scorer reads a citation as "[" and digits: "[1, 2]" gives 1 only, "[3][4]" gives 3 and 4.
RELEASED_CITATION = re.compile(r"\[(\d+)")


def answer_sentences(markdown: str) -> list[str]:
    """The raw sentences of a report body, citation markers kept (the released scorer's unit of evaluation,
    split by our splitter over the prose: headings, tables and the reference list are not part of the answer)."""
    return [part for block in prose_blocks(body_of(markdown)) for part in split_block(block)]


def scholarqa_official_scores(
    sentences: Sequence[str], passages: Mapping[str, str], entails: Entails, max_citations: int = 3, min_chars: int = 50
) -> CitationScores | None:
    """ScholarQABench citation precision and recall of one answer under the released scorer's rules.

    Those of `compute_autoais` (AkariAsai/ScholarQABench@95e6fc5 scripts/citation_correctness_eval.py) where
    they differ from `scholarqa_citation_scores`:
    * a sentence is evaluated when it has `min_chars` characters counting its citation markers;
    * a citation is "[" followed by digits, so a group "[1, 2]" cites 1 only;
    * an evaluated sentence without citations inherits those of the last evaluated sentence whose citations
      all resolved;
    * a sentence citing any label without a passage is unsupported and none of its citations counts;
    * the first `max_citations` citations are scored once all of them resolved;
    * an answer without any sentence has no scores (None), so it leaves the means, while one whose sentences
      are all short scores 0 and 0.

    Args:
        sentences: The answer's raw sentences with their markers (see `answer_sentences`).
        passages: Text of each citation number.
        entails: `entails(premise, hypothesis) -> bool`; the released scorer uses an NLI model.
    """
    if not sentences:
        return None
    n_claims = n_supported = n_cites = n_necessary = 0
    previous: list[str] | None = None
    for raw in sentences:
        if len(raw) < min_chars:
            continue
        n_claims += 1
        text = plain_sentence(raw)
        refs = [str(int(x)) for x in RELEASED_CITATION.findall(raw)] or (previous or [])
        if not refs or any(r not in passages for r in refs):
            continue  # uncited, or a citation out of range: unsupported, nothing counted
        previous = refs
        refs = refs[:max_citations]
        n_cites += len(refs)
        if not entails("\n".join(passages[r] for r in refs), text):
            continue
        n_supported += 1
        if len(refs) == 1:
            n_necessary += 1
            continue
        for r in refs:  # necessary: it entails alone, or the others (this occurrence left out) do not
            rest = list(refs)
            rest.remove(r)
            if entails(passages[r], text) or not entails("\n".join(passages[o] for o in rest), text):
                n_necessary += 1
    return CitationScores(n_claims=n_claims, n_supported=n_supported, n_cites=n_cites, n_necessary=n_necessary)


def dataset_citation_f1(reports: Sequence[CitationScores]) -> tuple[float, float, float]:
    """(mean precision, mean recall, F1 of the two means) over the reports of a dataset."""
    if not reports:
        return 0.0, 0.0, 0.0
    p = sum(r.precision for r in reports) / len(reports)
    r = sum(r.recall for r in reports) / len(reports)
    return p, r, harmonic_mean(p, r)


__all__ = [
    "CitationRecall",
    "CitationScores",
    "Sentence",
    "answer_sentences",
    "citation_precision",
    "citation_recall",
    "citations_in",
    "claim_sentences",
    "dataset_citation_f1",
    "grade_claims",
    "lexical_coverage",
    "lexical_entails",
    "lexical_support",
    "scholarqa_citation_scores",
    "scholarqa_official_scores",
    "split_sentences",
    "strip_citations",
]
