"""DeepResearch-Eco's six heuristic quality scores of an ecology report, and their weighted overall quality.

Detection is case-insensitive substring matching against the vocabularies in `eco_vocab.json`, plus
regular expressions for temporal references, formal citations and italicised binomials. Each count
is normalised by a saturation cap, min(count / cap, 1), and the parts are combined by fixed weights.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from deepresearch.eval.report import source_stats

VOCAB_PATH = Path(__file__).with_name("eco_vocab.json")
REQUIRED_LISTS = (
    "mechanistic",
    "causal",
    "temporal_vague",
    "regions",
    "interventions",
    "biodiversity_dimensions",
    "ecosystem_services",
    "spatial_scales",
    "conservation",
    "climate",
    "complexity",
    "statistical",
    "uncertainty",
    "speculation",
    "novelty",
    "research_gaps",
)

# Overall quality: the six scores weighted by the reference repository's weights, which sum to 1.00.
OVERALL_WEIGHTS: dict[str, float] = {
    "depth": 0.22,
    "breadth": 0.20,
    "rigor": 0.18,
    "innovation": 0.15,
    "ecological": 0.12,
    "density": 0.08,
    "taxonomic": 0.05,
}
DENSITY_CAP = 50.0  # sources per 1,000 words at which S_density saturates
TAXONOMIC_CAP = 10

# Temporal precision, by regex: quantified durations and ranges ("5–10 years",
# "≥10 years", "a 3-year study") and year ranges ("1990–2010").
SPECIFIC_DURATION = re.compile(
    r"(?:[≥≤><]\s*)?\b\d+(?:\.\d+)?(?:\s*(?:[–-]|to)\s*\d+(?:\.\d+)?)?[\s-]*(?:day|week|month|year|decade)s?\b", re.I
)
YEAR_RANGE = re.compile(r"\b(?:1[89]|20)\d\d\s*[–-]\s*(?:1[89]|20)\d\d\b")

# Formal citations: "(Smith et al., 2021)", "(Smith and Jones 2019; Lee, 2020a)" and "Smith et al. (2021)".
_NAME = r"[A-Z][A-Za-z'’\-]+(?:\s+et\s+al\.?|\s+(?:and|&)\s+[A-Z][A-Za-z'’\-]+)?"
_YEAR = r"(?:19|20)\d\d[a-z]?"
PARENTHETICAL = re.compile(r"\(([^()]*)\)")
CITED_IN_PARENS = re.compile(rf"{_NAME},?\s+{_YEAR}\b")
NARRATIVE = re.compile(rf"{_NAME}\s+\({_YEAR}\)")

# Italicised binomial: *Genus species* or _Genus species_, not bold (**...**).
BINOMIAL = re.compile(r"(?<![*_\w])([*_])[A-Z][a-z]+ [a-z]{2,}(?:-[a-z]+)?\1(?![*_\w])")


@lru_cache(maxsize=4)
def load_vocab(path: str | Path = VOCAB_PATH) -> dict[str, tuple[str, ...]]:
    """The vocabularies, each a tuple of lowercase terms.

    Raises:
        ValueError: when a list the metrics need is missing from the file.
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    vocab = {k: tuple(t.lower() for t in v) for k, v in raw.items() if isinstance(v, list)}
    missing = [k for k in REQUIRED_LISTS if k not in vocab]
    if missing:
        raise ValueError(f"vocabulary {path} lacks the lists {', '.join(missing)}; add them as JSON arrays of terms")
    return vocab


def capped(count: float, cap: float) -> float:
    """min(count / cap, 1): the saturation every component uses."""
    return min(count / cap, 1.0) if cap > 0 else 0.0


def occurrences(text: str, terms: Iterable[str]) -> int:
    """Non-overlapping occurrences of every term in `text`, summed (case-insensitive substrings)."""
    low = text.lower()
    return sum(low.count(t) for t in terms)


def distinct(text: str, terms: Iterable[str]) -> int:
    """How many of the terms occur in `text` at least once (case-insensitive substrings)."""
    low = text.lower()
    return sum(1 for t in terms if t in low)


def temporal_precision(text: str, vague_terms: Iterable[str]) -> float:
    """specific / (specific + vague) temporal references; 0 when there are none."""
    specific = len(SPECIFIC_DURATION.findall(text)) + len(YEAR_RANGE.findall(text))
    vague = occurrences(text, vague_terms)
    return specific / (specific + vague) if specific + vague else 0.0


def formal_citations(text: str) -> int:
    """Author-year citations, parenthetical (each author-year inside the parentheses) and narrative."""
    parenthetical = sum(len(CITED_IN_PARENS.findall(group)) for group in PARENTHETICAL.findall(text))
    return parenthetical + len(NARRATIVE.findall(text))


def binomials(text: str) -> int:
    return len(BINOMIAL.findall(text))


# Component formulas. Each takes raw counts and returns a score in [0, 1].
def depth_score(mechanistic: float, causal: float, temporal: float) -> float:
    return 0.4 * capped(mechanistic, 20) + 0.3 * capped(causal, 10) + 0.3 * min(max(temporal, 0.0), 1.0)


def breadth_score(regions: float, interventions: float, dimensions: float, services: float, scales: float) -> float:
    return (
        0.25 * capped(regions, 8)
        + 0.25 * capped(interventions, 12)
        + 0.25 * capped(dimensions, 8)
        + 0.15 * capped(services, 10)
        + 0.10 * capped(scales, 6)
    )


def ecological_score(conservation: float, climate: float, complexity: float) -> float:
    return 0.4 * capped(conservation, 8) + 0.3 * capped(climate, 6) + 0.3 * capped(complexity, 5)


def rigor_score(statistical: float, citations: float, uncertainty: float) -> float:
    return 0.4 * capped(statistical, 5) + 0.4 * capped(citations, 20) + 0.2 * capped(uncertainty, 5)


def innovation_score(speculation: float, novelty: float, gaps: float) -> float:
    return 0.4 * capped(speculation, 3) + 0.3 * capped(novelty, 3) + 0.3 * capped(gaps, 3)


def density_score(sources: int, words: int) -> float:
    """min(sources per 1,000 words / 50, 1); 0 for an empty file."""
    return capped(sources / (words / 1000), DENSITY_CAP) if words else 0.0


def taxonomic_score(n_binomials: float) -> float:
    return capped(n_binomials, TAXONOMIC_CAP)


def overall_quality(components: Mapping[str, float], weights: Mapping[str, float] = OVERALL_WEIGHTS) -> float:
    """Weighted sum of the component scores.

    Raises:
        ValueError: when a weighted component is missing.
    """
    missing = [k for k in weights if k not in components]
    if missing:
        raise ValueError(f"components {', '.join(missing)} missing; pass all of: {', '.join(weights)}")
    return sum(w * components[k] for k, w in weights.items())


@dataclass(frozen=True)
class EcoScores:
    """The component scores of one report, their overall quality, and the raw counts behind them."""

    depth: float
    breadth: float
    ecological: float
    rigor: float
    innovation: float
    density: float
    taxonomic: float
    overall: float
    counts: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in (*OVERALL_WEIGHTS, "overall")}


def count_signals(markdown: str, vocab: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, float]:
    """Every raw count the components use: distinct entries for
    regions, interventions, biodiversity dimensions, ecosystem services and spatial scales; total
    occurrences for the rest."""
    v = vocab or load_vocab()
    stats = source_stats(markdown)
    return {
        "mechanistic": occurrences(markdown, v["mechanistic"]),
        "causal": occurrences(markdown, v["causal"]),
        "temporal_precision": temporal_precision(markdown, v["temporal_vague"]),
        "regions": distinct(markdown, v["regions"]),
        "interventions": distinct(markdown, v["interventions"]),
        "biodiversity_dimensions": distinct(markdown, v["biodiversity_dimensions"]),
        "ecosystem_services": distinct(markdown, v["ecosystem_services"]),
        "spatial_scales": distinct(markdown, v["spatial_scales"]),
        "conservation": occurrences(markdown, v["conservation"]),
        "climate": occurrences(markdown, v["climate"]),
        "complexity": occurrences(markdown, v["complexity"]),
        "statistical": occurrences(markdown, v["statistical"]),
        "formal_citations": formal_citations(markdown),
        "uncertainty": occurrences(markdown, v["uncertainty"]),
        "speculation": occurrences(markdown, v["speculation"]),
        "novelty": occurrences(markdown, v["novelty"]),
        "research_gaps": occurrences(markdown, v["research_gaps"]),
        "binomials": binomials(markdown),
        "n_sources": stats.n_sources,
        "words": stats.words,
    }


def eco_scores(markdown: str, vocab: Mapping[str, tuple[str, ...]] | None = None) -> EcoScores:
    """The six heuristic scores, taxonomic precision and overall quality of a Markdown report."""
    c = count_signals(markdown, vocab)
    parts = {
        "depth": depth_score(c["mechanistic"], c["causal"], c["temporal_precision"]),
        "breadth": breadth_score(
            c["regions"], c["interventions"], c["biodiversity_dimensions"], c["ecosystem_services"], c["spatial_scales"]
        ),
        "ecological": ecological_score(c["conservation"], c["climate"], c["complexity"]),
        "rigor": rigor_score(c["statistical"], c["formal_citations"], c["uncertainty"]),
        "innovation": innovation_score(c["speculation"], c["novelty"], c["research_gaps"]),
        "density": density_score(int(c["n_sources"]), int(c["words"])),
        "taxonomic": taxonomic_score(c["binomials"]),
    }
    return EcoScores(**parts, overall=overall_quality(parts), counts=c)
