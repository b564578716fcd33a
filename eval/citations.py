"""Citation checks of a Markdown report: recall, graded precision, and ScholarQABench's Algorithm 1.

* DeepResearchGym style (spec 001 §6.1): citation recall is the share of claim sentences carrying at
  least one citation; citation precision is the mean support grade (1 / 0.5 / 0) of each cited claim
  by its cited sources. Grades come from an LLM judge (`eval.judges.CitationSupportJudge`) or from
  `lexical_support`, an offline lexical-entailment fallback that is not an entailment model.
* ScholarQABench style (spec 001 §6.2, Algorithm 1): `scholarqa_citation_scores` with a pluggable
  `entails(premise, hypothesis) -> bool`.

Claims are found deterministically: prose sentences of the report body (headings, tables, quotes,
paragraphs wholly in emphasis and the reference list left out) of at least `min_chars` characters once citation markers are removed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from eval.f1 import harmonic_mean
from eval.report import body_text
from programs.runtime.citations import CITATION, citation_labels

Entails = Callable[[str, str], bool]
Grader = Callable[[str, Sequence[str]], float]

# Citations written after the sentence's period ("Claim. [1]") are moved before it ("Claim [1].").
_TRAILING = re.compile(rf"([.!?])((?:\s?{CITATION.pattern})+)", re.I)
_SENTENCE_END = re.compile(r"(?<!\bal\.)(?<!e\.g\.)(?<!i\.e\.)(?<!\bvs\.)(?<!\bFig\.)(?<!\bca\.)(?<=[.!?])\s+"
                           r"(?=[A-Z0-9\[(*_\"'])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# A paragraph wholly in emphasis ("*Written offline...*") is an editorial note about the report, not a claim.
_NOTE = re.compile(r"^(?:\*[^*]+\*|_[^_]+_)$")
_MARKUP = re.compile(r"[*_`]+")

GRADES = (0.0, 0.5, 1.0)

_STOP = frozenset(
    "a an and are as at be been but by for from has have if in into is it its no not of on or such that the their "
    "then there these they this to was were will with which while than also can may more most other some".split())
_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Sentence:
    """A sentence of a report with its citation markers taken out.

    Attributes:
        text: The sentence without citation markers.
        citations: Citation labels in order of appearance ("3", "5a7b0fd1_1"), without repeats.
    """

    text: str
    citations: tuple[str, ...] = ()


def citations_in(text: str) -> list[str]:
    """Citation labels of `text` in order of appearance, without repeats."""
    labels = [label for m in CITATION.finditer(text) for label in citation_labels(m)]
    return list(dict.fromkeys(labels))


def strip_citations(text: str) -> str:
    return re.sub(r"\s+([.,;:!?])", r"\1", CITATION.sub("", text)).strip()


def split_sentences(markdown: str) -> list[Sentence]:
    """Prose sentences of the report body, each with its citations.

    Headings, table rows, block quotes and the trailing References/Sources section are left out;
    list items are read as prose.
    """
    sentences = []
    for block in _prose_blocks(body_text(markdown)):
        block = _TRAILING.sub(r"\2\1", block)
        for part in _SENTENCE_END.split(block):
            text = _MARKUP.sub("", strip_citations(part)).strip()
            if text:
                sentences.append(Sentence(text=text, citations=tuple(citations_in(part))))
    return sentences


def _prose_blocks(text: str) -> list[str]:
    """Paragraphs and list items with wrapped lines joined; headings, tables, quotes and notes dropped."""
    blocks: list[list[str]] = []
    is_open = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|", ">")):
            is_open = False
            continue
        if _LIST_MARK.match(line) or not is_open:
            blocks.append([_LIST_MARK.sub("", line).strip()])
            is_open = True
        else:
            blocks[-1].append(stripped)
    return [text for text in (" ".join(b) for b in blocks) if not _NOTE.match(text)]


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


def content_tokens(text: str) -> list[str]:
    """Lowercase words of three or more characters that are not stop words, crudely singularised."""
    out = []
    for t in _TOKEN.findall(text.lower()):
        if len(t) < 3 or t in _STOP:
            continue
        out.append(t[:-1] if len(t) > 4 and t.endswith("s") and not t.endswith("ss") else t)
    return out


def lexical_coverage(premise: str, hypothesis: str) -> float:
    """Share of the hypothesis's distinct content words that occur in the premise."""
    wanted = set(content_tokens(hypothesis))
    if not wanted:
        return 0.0
    return len(wanted & set(content_tokens(premise))) / len(wanted)


def lexical_support(claim: str, sources: Sequence[str], full: float = 0.75, partial: float = 0.4) -> float:
    """Offline lexical-entailment fallback for support grades; word overlap, not an entailment model.

    Returns 1 when at least `full` of the claim's content words occur in the cited sources, 0.5 when
    at least `partial` do, else 0.
    """
    coverage = lexical_coverage("\n".join(sources), claim)
    return 1.0 if coverage >= full else 0.5 if coverage >= partial else 0.0


def lexical_entails(premise: str, hypothesis: str, threshold: float = 0.75) -> bool:
    """Offline lexical-entailment fallback for Algorithm 1: coverage of the hypothesis's content words."""
    return bool(premise) and lexical_coverage(premise, hypothesis) >= threshold


def grade_claims(claims: Iterable[Sentence], passages: Mapping[str, str], grader: Grader = lexical_support,
                 max_citations: int = 3) -> list[float]:
    """Support grade of each cited claim by the texts of its first `max_citations` citations.

    A claim whose citations name no known passage gets 0 (nothing supports it).
    """
    grades = []
    for claim in claims:
        if not claim.citations:
            continue
        texts = [passages[c] for c in claim.citations[:max_citations] if c in passages]
        grades.append(grader(claim.text, texts) if texts else 0.0)
    return grades


@dataclass(frozen=True)
class CitationScores:
    """Counts of ScholarQABench's Algorithm 1 for one report (spec 001 §6.2)."""

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


def scholarqa_citation_scores(claims: Iterable[Sentence], passages: Mapping[str, str], entails: Entails,
                              max_citations: int = 3, printed_algorithm: bool = False) -> CitationScores:
    """ScholarQABench citation precision and recall of one report (spec 001 §6.2, Algorithm 1).

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


def dataset_citation_f1(reports: Sequence[CitationScores]) -> tuple[float, float, float]:
    """(mean precision, mean recall, F1 of the two means) over the reports of a dataset."""
    if not reports:
        return 0.0, 0.0, 0.0
    p = sum(r.precision for r in reports) / len(reports)
    r = sum(r.recall for r in reports) / len(reports)
    return p, r, harmonic_mean(p, r)


__all__ = ["CitationRecall", "CitationScores", "Sentence", "citation_precision", "citation_recall", "citations_in",
           "claim_sentences", "dataset_citation_f1", "grade_claims", "lexical_coverage", "lexical_entails",
           "lexical_support", "scholarqa_citation_scores", "split_sentences", "strip_citations"]
