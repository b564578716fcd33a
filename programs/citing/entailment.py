"""Claim sentences of a report and the lexical-entailment rule, shared by the verify stage and `eval`.

* Sentences: prose sentences of a Markdown body (headings, tables, quotes and paragraphs wholly in
  emphasis left out; list items read as prose), each with the citation labels it carries. A citation
  written after the period ("Claim. [1]") belongs to the sentence before it.
* The lexical-entailment rule (`lexical_entails`, `lexical_support`): a premise entails a hypothesis
  when it contains at least 75 % of the hypothesis's distinct content words (40 % is partial support).
  It is word overlap, not an entailment model: it accepts a sentence that rearranges the source's
  words into a wrong claim, and rejects a faithful paraphrase. The offline verify stage and the
  offline citation scores use it because it needs no model and gives the same answer every time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from deepresearch.programs.citing.citations import CITATION, citation_labels
from deepresearch.retrievers.passages import split_sentences

# Citations written after the sentence's period ("Claim. [1]") are moved before it ("Claim [1].").
TRAILING_CITATIONS = re.compile(rf"([.!?])((?:\s?{CITATION.pattern})+)", re.IGNORECASE)
LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# A paragraph wholly in emphasis ("*Written offline...*") is an editorial note about the report, not a claim.
NOTE = re.compile(r"^(?:\*[^*]+\*|_[^_]+_)$")
_MARKUP = re.compile(r"[*_`]+")

FULL_SUPPORT = 0.75
PARTIAL_SUPPORT = 0.4

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
        "which",
        "while",
        "than",
        "also",
        "can",
        "may",
        "more",
        "most",
        "other",
        "some",
    ]
)
WORD = re.compile(r"[a-z0-9]+")


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


def plain_sentence(part: str) -> str:
    """A raw sentence as a claim: citation markers and emphasis marks removed."""
    return _MARKUP.sub("", strip_citations(part)).strip()


def split_block(block: str) -> list[str]:
    """The raw sentences of one prose block (citations kept, trailing ones moved before the period)."""
    return split_sentences(TRAILING_CITATIONS.sub(r"\2\1", block))


def prose_blocks(text: str) -> list[str]:
    """Paragraphs and list items with wrapped lines joined; headings, tables, quotes and notes dropped."""
    blocks: list[list[str]] = []
    is_open = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|", ">")):
            is_open = False
            continue
        if LIST_MARK.match(line) or not is_open:
            blocks.append([LIST_MARK.sub("", line).strip()])
            is_open = True
        else:
            blocks[-1].append(stripped)
    return [text for text in (" ".join(b) for b in blocks) if not NOTE.match(text)]


def body_sentences(body: str) -> list[Sentence]:
    """Prose sentences of a report body (no References section), each with its citations."""
    sentences = []
    for block in prose_blocks(body):
        for part in split_block(block):
            text = plain_sentence(part)
            if text:
                sentences.append(Sentence(text=text, citations=tuple(citations_in(part))))
    return sentences


def content_tokens(text: str) -> list[str]:
    """Lowercase words of three or more characters that are not stop words, crudely singularised."""
    out = []
    for t in WORD.findall(text.lower()):
        if len(t) < 3 or t in STOP_WORDS:
            continue
        out.append(t[:-1] if len(t) > 4 and t.endswith("s") and not t.endswith("ss") else t)
    return out


def lexical_coverage(premise: str, hypothesis: str) -> float:
    """Share of the hypothesis's distinct content words that occur in the premise."""
    wanted = set(content_tokens(hypothesis))
    if not wanted:
        return 0.0
    return len(wanted & set(content_tokens(premise))) / len(wanted)


def lexical_support(
    claim: str, sources: Sequence[str], full: float = FULL_SUPPORT, partial: float = PARTIAL_SUPPORT
) -> float:
    """The lexical-entailment rule as a support grade; word overlap, not an entailment model.

    Returns 1 when at least `full` of the claim's content words occur in the cited sources, 0.5 when
    at least `partial` do, else 0.
    """
    coverage = lexical_coverage("\n".join(sources), claim)
    return 1.0 if coverage >= full else 0.5 if coverage >= partial else 0.0


def lexical_entails(premise: str, hypothesis: str, threshold: float = FULL_SUPPORT) -> bool:
    """The lexical-entailment rule as `entails(premise, hypothesis)`: coverage of the hypothesis's content words."""
    return bool(premise) and lexical_coverage(premise, hypothesis) >= threshold
