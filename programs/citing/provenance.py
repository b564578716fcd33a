"""Sentence provenance: from each sentence of a report to the references, sources and learnings behind it.

`sentence_provenance(markdown, references, learnings)` reads a finished report (citations renumbered
[1]..[n]) and returns one record per sentence of its body, in order: the numbers it cites, the source
ids and corpus ids those numbers stand for, and the learnings of the run that rest on those sources.
A reader goes sentence -> [n] -> source id -> learning (the finding the writer was given) and doc id
(the passage in the corpus: `paper#3` for each cited passage of a full-text paper). `Report.provenance()`
calls it, and trace.json carries the result.

What counts as a sentence: the body is the report before its last References (or Sources) heading.
Headings, fenced code and rules are left out; paragraphs, list items, block quotes and table rows are
split into sentences at `.`, `!` or `?` followed by a space and a capital, digit, bracket or quote, not
after common abbreviations (et al., e.g., Fig., ...) or an initial. A citation written after the
period ("Claim. [2] Next") belongs to the sentence before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from deepresearch.programs.citing.entailment import LIST_MARK, STOP_WORDS, WORD
from deepresearch.retrievers.passages import PASSAGE_SEP, split_sentences
from deepresearch.signatures.types import Learning

if TYPE_CHECKING:
    from deepresearch.programs.reference import Reference

# A renumbered citation group: "[3]", "[1, 2]" (a Markdown link "[text](url)" is not one).
NUMBERED_CITATION = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\](?!\()")
_REFERENCE_HEADING = re.compile(r"^#{1,6}\s*(?:references|sources)\s*$", re.I | re.M)
TABLE_RULE = re.compile(r"^\|?[\s:|-]+\|?$")
RULE = re.compile(r"^(?:-{3,}|\*{3,}|_{3,})$")


@dataclass(frozen=True)
class CitedSource:
    """What one citation number of a sentence stands for."""

    number: int
    source_id: str
    doc_id: str
    title: str


@dataclass(frozen=True)
class SupportingLearning:
    """A learning of the run that rests on a source the sentence cites.

    Attributes:
        index: Position in `Report.learnings`.
        text: The learning.
        source_ids: Its sources that the sentence cites (a subset of the learning's `source_ids`).
        overlap: Share of the sentence's content words found in the learning (0..1); the list is ordered
            by it, so the learning the sentence most likely restates comes first.
    """

    index: int
    text: str
    source_ids: tuple[str, ...]
    overlap: float


@dataclass(frozen=True)
class SentenceProvenance:
    """One sentence of the report body and what it rests on.

    Attributes:
        index: Position among the body's sentences (0-based).
        text: The sentence as written, citation markers kept.
        citations: The numbers it cites, in order, without repeats.
        sources: The references those numbers name (a number with no reference is left out).
        learnings: Learnings resting on any cited source, best match first; () for an uncited sentence.
    """

    index: int
    text: str
    citations: tuple[int, ...] = ()
    sources: tuple[CitedSource, ...] = ()
    learnings: tuple[SupportingLearning, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it (lists for tuples), as trace.json's `provenance` entries."""
        return {
            "index": self.index,
            "text": self.text,
            "citations": list(self.citations),
            "sources": [asdict(s) for s in self.sources],
            "learnings": [{**asdict(x), "source_ids": list(x.source_ids)} for x in self.learnings],
        }


def body_of(markdown: str) -> str:
    """The report without its trailing References or Sources section."""
    headings = list(_REFERENCE_HEADING.finditer(markdown))
    return markdown[: headings[-1].start()] if headings else markdown


def cited_numbers(text: str) -> tuple[int, ...]:
    """The citation numbers of `text`, in order of appearance, without repeats."""
    numbers = (int(n) for m in NUMBERED_CITATION.finditer(text) for n in re.split(r"\s*[,;]\s*", m.group(1).strip()))
    return tuple(dict.fromkeys(numbers))


def report_sentences(markdown: str) -> list[str]:
    """The sentences of the report body, as written (see the module docstring for what is left out)."""
    return [s for block in _blocks(body_of(markdown)) for s in split_sentences(block)]


def _blocks(text: str) -> list[str]:
    """Paragraphs (wrapped lines joined), list items, block quotes and table rows; headings, code and rules dropped."""
    blocks: list[list[str]] = []
    is_open = is_code = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            is_code, is_open = not is_code, False
            continue
        if is_code or not stripped or stripped.startswith("#") or RULE.match(stripped):
            is_open = False
            continue
        if stripped.startswith("|"):
            if not TABLE_RULE.match(stripped):
                blocks.append([" ".join(c.strip() for c in stripped.strip("|").split("|") if c.strip())])
            is_open = False
            continue
        if stripped.startswith(">"):
            stripped = stripped.lstrip("> ").strip()
            if not stripped:
                continue
        if LIST_MARK.match(line) or not is_open:
            blocks.append([LIST_MARK.sub("", stripped)])
            is_open = True
        else:
            blocks[-1].append(stripped)
    return [" ".join(b) for b in blocks if any(b)]


def _content_words(text: str) -> set[str]:
    return {w for w in WORD.findall(NUMBERED_CITATION.sub(" ", text).lower()) if len(w) > 2 and w not in STOP_WORDS}


def sentence_provenance(
    markdown: str, references: Sequence[Reference], learnings: Sequence[Learning]
) -> tuple[SentenceProvenance, ...]:
    """Each sentence of the report body with the references, source ids and learnings behind its citations.

    Args:
        markdown: The finished report: citations renumbered [1]..[n], References list at the end.
        references: The list behind the numbers (`Report.references`).
        learnings: The run's learnings with the source ids each rests on (`Report.learnings`).

    Returns:
        One record per sentence, in report order. A sentence without citations has no sources and no
        learnings; a cited source no learning rests on adds a source but no learning.
    """
    by_number = {r.number: r for r in references}
    out = []
    for i, text in enumerate(report_sentences(markdown)):
        numbers = cited_numbers(text)
        sources = tuple(c for n in numbers if (r := by_number.get(n)) is not None for c in _cited(n, r))
        out.append(
            SentenceProvenance(
                index=i,
                text=text,
                citations=numbers,
                sources=sources,
                learnings=_supporting(text, {s.source_id for s in sources}, learnings),
            )
        )
    return tuple(out)


def _cited(number: int, ref: Reference) -> tuple[CitedSource, ...]:
    """What a number stands for: the document, or each cited passage of a paper (`doc_id` `paper#3`)."""
    if not ref.passages:
        return (CitedSource(number=number, source_id=ref.source_id, doc_id=ref.doc_id, title=ref.title),)
    return tuple(
        CitedSource(
            number=number, source_id=sid, doc_id=f"{ref.doc_id}{PASSAGE_SEP}{sid.rsplit('_', 1)[-1]}", title=ref.title
        )
        for sid in ref.passages
    )


def _supporting(sentence: str, source_ids: set[str], learnings: Iterable[Learning]) -> tuple[SupportingLearning, ...]:
    if not source_ids:
        return ()
    words = _content_words(sentence)
    found = []
    for index, learning in enumerate(learnings):
        shared = tuple(s for s in learning.source_ids if s in source_ids)
        if shared:
            overlap = len(words & _content_words(learning.text)) / len(words) if words else 0.0
            found.append(
                SupportingLearning(index=index, text=learning.text, source_ids=shared, overlap=round(overlap, 3))
            )
    return tuple(sorted(found, key=lambda x: (-x.overlap, x.index)))
