"""A report's reference: the cited document and what its corpus record says about it.

Below the other artifacts, so that citation logic (`deepresearch.programs.citing.citations`, `.provenance`)
uses it without importing the report that holds it. `deepresearch.programs.artifacts` re-exports it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from deepresearch.programs.runtime.text import collapse_whitespace, inert_markdown


@dataclass(frozen=True)
class Reference:
    """One entry of a report's reference list: the cited document and what its corpus record says about it.

    Attributes:
        number: The citation number in the report ([1]..[n], in order of first use).
        source_id: The run's id of the document, which learnings cite.
        doc_id: The document's id in the corpus.
        title, year, url: From the document (`url` may be built from an arXiv or PubMed id).
        authors, venue, doi: From the corpus record, when it has them (`deepresearch.retrievers.bibliographic`);
            `doi` is bare (`10.1234/abc`).
        passages: For a paper read as passages (a full-text corpus), the source ids of its cited passages
            in order of first use (`source_id` is the first; `_3` ends the id of passage `doc_id#3`);
            () for a whole document.
    """

    number: int
    source_id: str
    doc_id: str
    title: str
    year: int | None = None
    url: str | None = None
    authors: tuple[str, ...] = ()
    venue: str | None = None
    doi: str | None = None
    passages: tuple[str, ...] = ()

    def render(self, max_authors: int = 3) -> str:
        """The line of the References list: authors, year, title, venue, then where to find it.

        Where: the DOI link, else the URL, else the corpus id as `doc <id>` (which `deepresearch.eval.report` reads):
        "[2] A. Smith, B. Jones, C. Lee, et al. (2020). Title. Nature. https://doi.org/10.1038/x",
        "[3] Title (2004). doc 388". Past `max_authors` names the list ends with "et al.". What the record
        says is Markdown text only (`inert_markdown`): a title adds no link, image, HTML or control character.
        """
        title = collapse_whitespace(self.title).rstrip(". ") or _title_from_url(self.url) or self.doc_id
        year = f" ({self.year})" if self.year else ""
        names = list(self.authors[:max_authors]) + (["et al."] if len(self.authors) > max_authors else [])
        parts = [f"{', '.join(names)}{year}", title] if names else [f"{title}{year}"]
        if self.venue:
            parts.append(collapse_whitespace(self.venue).rstrip(". "))
        where = f"https://doi.org/{self.doi}" if self.doi else self.url or f"doc {self.doc_id}"
        return inert_markdown(f"[{self.number}] " + ". ".join(parts) + f". {where}", one_line=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reference:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["authors"] = tuple(values.get("authors") or ())
        values["passages"] = tuple(values.get("passages") or ())
        return cls(**values)


def _reference_dict(ref: Reference) -> dict[str, Any]:
    """A reference as report JSON holds it; `passages` only for a paper read as passages (abstracts as before)."""
    d = asdict(ref)
    if not ref.passages:
        d.pop("passages")
    return d


def _title_from_url(url: str | None) -> str:
    """The title of a source that has none: the title-cased last segment of the URL's path ("Documento.Php?Id=1")."""
    rest = (url or "").split("#")[0].split("://", 1)[-1].rstrip("/")
    return rest.rsplit("/", 1)[-1].title() if "/" in rest else ""
