"""Citation provenance: stable source ids for retrieved documents, and report renumbering.

A source id names one passage: the first hex characters of SHA-1 of the paper's id, then `_` and the
passage number (`_1` for a whole document, such as an abstract). A passage Doc of a full-text corpus
(`deepresearch.retrievers.passages`: id `smith2020#3`, `metadata["paper_id"]`) gets `<sha1(smith2020)>_3`, so the
trace names the passage it read; renumbering gives all passages of one paper one number and one
reference entry, which lists the cited passages' source ids in `Reference.passages`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from deepresearch.programs.reference import Reference
from deepresearch.retrievers.bibliographic import bibliographic
from deepresearch.retrievers.passages import PASSAGE_SEP, paper_id
from deepresearch.retrievers.types import Doc

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


def split_passage_id(doc_id: str) -> tuple[str, int]:
    """(paper id, passage number) of a passage id `paper#3`; (doc id, 1) for any other id.

    Example:
        >>> split_passage_id("smith2020#3"), split_passage_id("388")
        (('smith2020', 3), ('388', 1))
    """
    paper, sep, n = doc_id.rpartition(PASSAGE_SEP)
    if sep and paper and n.isdigit() and int(n) > 0:
        return paper, int(n)
    return doc_id, 1


def source_id_for(doc_id: str, n_hex: int = 8) -> str:
    """A source's id in a run: the first `n_hex` hex characters of SHA-1(paper id), then `_<passage>`.

    A whole document is its own only passage (`_1`); a passage id `paper#3` hashes `paper` and ends `_3`.

    Example:
        >>> source_id_for("smith2020#3")[-2:], source_id_for("smith2020#3")[:8] == source_id_for("smith2020")[:8]
        ('_3', True)
    """
    paper, n = split_passage_id(doc_id)
    return hashlib.sha1(paper.encode("utf-8")).hexdigest()[:n_hex] + f"_{n}"


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

    Passages of one paper share its number (`deepresearch.retrievers.passages.paper_id`): the paper is one reference.

    Returns:
        The rewritten Markdown, the references in citation order, and the number of dropped citations.
    """
    numbers: dict[str, int] = {}  # paper id -> number
    cited: dict[str, list[tuple[str, Doc]]] = {}  # paper id -> its cited (source id, passage) in order of first use
    dropped = 0

    def replace(match: re.Match) -> str:
        nonlocal dropped
        out = []
        for sid in citation_labels(match):
            doc = registry.get(sid)
            if doc is None:
                dropped += 1
                continue
            paper = paper_id(doc)
            if paper not in numbers:
                numbers[paper] = len(numbers) + 1
                cited[paper] = []
            if all(sid != s for s, _ in cited[paper]):
                cited[paper].append((sid, doc))
            tag = f"[{numbers[paper]}]"
            if tag not in out:
                out.append(tag)
        lead = " " if match.group(0)[:1].isspace() and out else ""
        return lead + "".join(out)

    text = DRAFT_CITATION.sub(replace, markdown)
    refs = tuple(
        reference_for(
            numbers[paper], parts[0][0], parts[0][1], passages=tuple(s for s, d in parts if paper_id(d) != d.doc_id)
        )
        for paper, parts in cited.items()
    )
    return Renumbered(markdown=text, references=refs, dropped=dropped)


def reference_for(number: int, source_id: str, doc: Doc, passages: tuple[str, ...] = ()) -> Reference:
    """The reference list entry of a cited document, with the authors, venue, DOI and link its record carries.

    For a passage, the entry names its paper (`doc_id` is the paper's id); `passages` are the source ids of
    the paper's cited passages.
    """
    bib = bibliographic(doc)
    return Reference(
        number=number,
        source_id=source_id,
        doc_id=paper_id(doc),
        title=doc.title,
        year=bib.year,
        url=bib.url,
        authors=bib.authors,
        venue=bib.venue,
        doi=bib.doi,
        passages=passages,
    )


def render_references(references: tuple[Reference, ...]) -> str:
    if not references:
        return "## References\n\nNo sources were cited."
    # one paragraph each: Markdown joins lines that no blank line separates into one paragraph
    return "## References\n\n" + "\n\n".join(r.render() for r in references)
