"""Citation provenance: stable source ids for retrieved documents, and report renumbering."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from programs.artifacts import Reference
from retrievers.bibliographic import bibliographic
from retrievers.types import Doc

# A citation is one bracket group of labels, "[3]", "[1, 2]", "[5a7b0fd1_1; 3]" ("[3][4]" is two groups);
# a Markdown link `[text](url)` is not one. Our labels are source ids (`source_id_for`) and the numbers
# renumbering gives them.
_LABEL = r"(?:[0-9a-f]{8,40}_\d+|\d+)"
# A writer LM may also invent "source"/"doc"/"ref" style labels; the draft pattern reads them, so
# renumbering drops them (with the space before the group) instead of leaving them in the report.
_DRAFT_LABEL = rf"(?:{_LABEL}|(?:source|doc|ref)[\s_-]?\w+)"
_SEPARATOR = re.compile(r"\s*[,;]\s*")


def _bracket_group(label: str) -> str:
    return rf"\[\s*({label}(?:\s*[,;]\s*{label})*)\s*\](?!\()"


CITATION = re.compile(_bracket_group(_LABEL), re.IGNORECASE)
DRAFT_CITATION = re.compile(r"\s?" + _bracket_group(_DRAFT_LABEL), re.IGNORECASE)


def citation_labels(match: re.Match) -> list[str]:
    """The labels of one `CITATION` or `DRAFT_CITATION` match, lowercased, in order.

    Example:
        >>> citation_labels(CITATION.search("Shown [5A7B0FD1_1; 3]."))
        ['5a7b0fd1_1', '3']
    """
    return [label.lower() for label in _SEPARATOR.split(match.group(1).strip())]


def source_id_for(doc_id: str, n_hex: int = 8) -> str:
    """Spec 001 §4.7: first hex characters of SHA-1(doc id), then `_1` (one passage per document)."""
    return hashlib.sha1(doc_id.encode("utf-8")).hexdigest()[:n_hex] + "_1"


class CitationRegistry:
    """Maps source ids to the documents they name, for one run.

    Every retrieved document is registered once and keeps its id for the whole run.
    """

    def __init__(self):
        self._docs: dict[str, Doc] = {}
        self._ids: dict[str, str] = {}

    def register(self, doc: Doc) -> str:
        if doc.doc_id in self._ids:
            return self._ids[doc.doc_id]
        n_hex = 8
        sid = source_id_for(doc.doc_id, n_hex)
        while sid in self._docs:  # a hash-prefix collision between two documents: lengthen the prefix
            n_hex += 2
            sid = source_id_for(doc.doc_id, n_hex)
        self._docs[sid] = doc
        self._ids[doc.doc_id] = sid
        return sid

    def get(self, source_id: str) -> Doc | None:
        return self._docs.get(source_id)

    def __contains__(self, source_id: object) -> bool:
        return source_id in self._docs

    def __len__(self) -> int:
        return len(self._docs)

    def items(self):
        return self._docs.items()


@dataclass(frozen=True)
class Renumbered:
    markdown: str
    references: tuple[Reference, ...]
    dropped: int


def renumber_citations(markdown: str, registry: CitationRegistry) -> Renumbered:
    """Replaces source ids with [1]..[n] in order of first use and drops citations naming no registered document.

    Returns:
        The rewritten Markdown, the references in citation order, and the number of dropped citations.
    """
    numbers: dict[str, int] = {}
    refs: list[Reference] = []
    dropped = 0

    def replace(match: re.Match) -> str:
        nonlocal dropped
        out = []
        for sid in citation_labels(match):
            doc = registry.get(sid)
            if doc is None:
                dropped += 1
                continue
            if sid not in numbers:
                numbers[sid] = len(numbers) + 1
                refs.append(reference_for(numbers[sid], sid, doc))
            tag = f"[{numbers[sid]}]"
            if tag not in out:
                out.append(tag)
        lead = " " if match.group(0)[:1].isspace() and out else ""
        return lead + "".join(out)

    text = DRAFT_CITATION.sub(replace, markdown)
    return Renumbered(markdown=text, references=tuple(refs), dropped=dropped)


def reference_for(number: int, source_id: str, doc: Doc) -> Reference:
    """The reference list entry of a cited document, with the authors, venue, DOI and link its record carries."""
    bib = bibliographic(doc)
    return Reference(number=number, source_id=source_id, doc_id=doc.doc_id, title=doc.title, year=bib.year,
                     url=bib.url, authors=bib.authors, venue=bib.venue, doi=bib.doi)


def render_references(references: tuple[Reference, ...]) -> str:
    if not references:
        return "## References\n\nNo sources were cited."
    return "## References\n\n" + "\n".join(r.render() for r in references)
