"""What a corpus record says about the paper behind a document: authors, year, venue, DOI, a link.

Corpora name these fields differently. `bibliographic(doc)` reads the usual names from `Doc.metadata`
(the record's fields that are not id, title, text, url, year or published) and from the `metadata`
object BEIR records nest their extra fields in (CSFCube's `year`, TREC-COVID's `url` and `pubmed_id`);
a top-level field wins over a nested one:

- authors: `authors`, `author`, `creators`, `authorships`, `authors_parsed`; a list of names, of
  `{"name"}` / `{"display_name"}` / `{"given", "family"}` / `{"author": {...}}` objects, of
  `[last, first, suffix]` lists (arXiv), or one string "A and B", "A; B", "A, B" or "Last, First".
- venue: `venue`, `journal`, `journal_name`, `journal-ref`, `journal_ref`, `container-title`,
  `container_title`, `booktitle`, `publication_venue`, `publicationVenue`, `conference`, `primary_location`,
  `host_venue`; a string, a list (Crossref) or an object with a `name` or `display_name` (Semantic
  Scholar), or with a `source` object that has one (OpenAlex).
- DOI: `doi` / `DOI`, or `DOI` inside `externalIds` / `external_ids` / `ids`, or a doi.org URL; written bare
  (`10.1234/abc`), without `https://doi.org/` or `doi:`.
- year: `Doc.year`, else `year` / `publication_year`, else the year of `published` / `date` /
  `publication_date` (these reach the metadata when nested, or when `Doc` did not take them).
- a link: `Doc.url`, else `url` / `link` (nested), else `https://arxiv.org/abs/<id>` from an arXiv id
  (`arxiv_id`, `arxiv`, `externalIds.ArXiv`), else `https://pubmed.ncbi.nlm.nih.gov/<id>/` from a PubMed id.

Nothing is guessed: a field the record does not carry stays empty.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deepresearch.retrievers.types import Doc

AUTHOR_KEYS = ("authors", "author", "creators", "authorships", "authors_parsed")
VENUE_KEYS = (
    "venue",
    "journal",
    "journal_name",
    "journal-ref",
    "journal_ref",
    "container-title",
    "container_title",
    "booktitle",
    "publication_venue",
    "publicationVenue",
    "conference",
    "primary_location",
    "host_venue",
)
DOI_KEYS = ("doi", "DOI")
ARXIV_KEYS = ("arxiv_id", "arxiv", "arXiv", "ArXiv")
PUBMED_KEYS = ("pmid", "pubmed_id", "PubMed", "PMID")
ID_MAP_KEYS = ("externalIds", "external_ids", "ids")  # Semantic Scholar, OpenAlex: {"DOI": ..., "ArXiv": ...}
NAME_KEYS = ("name", "display_name", "full_name", "raw_author_name")

# Crossref's DOI pattern for modern DOIs ("10." registrant "/" suffix), which covers nearly all of them.
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
_DOI_PREFIX = re.compile(r"^(?:https?://)?(?:dx\.|www\.)?doi\.org/|^doi:\s*", re.I)
_ARXIV = re.compile(r"^(?:arxiv:)?(\d{4}\.\d{4,5}|[a-z-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?$", re.I)
_ET_AL = re.compile(r"^(?:et\.? al\.?|others)$", re.I)


@dataclass(frozen=True)
class Bibliographic:
    """The bibliographic fields of one document; empty where its record has nothing.

    Attributes:
        authors: Author names in record order, each as "Given Family" when the record splits them.
        venue: Journal, conference or proceedings.
        doi: The bare DOI (`10.1234/abc`).
        year: Publication year.
        url: The record's link, else one built from its arXiv or PubMed id.
    """

    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str | None = None
    doi: str | None = None
    url: str | None = None


def bibliographic(doc: Doc) -> Bibliographic:
    """The authors, venue, DOI and link a document's record carries (see the module docstring for field names).

    Example:
        >>> d = Doc(doc_id="1", title="t", text="x", metadata={"authors": "A. Smith and B. Jones",
        ...                                                   "doi": "https://doi.org/10.1000/XY"})
        >>> bibliographic(d)
        Bibliographic(authors=('A. Smith', 'B. Jones'), year=None, venue=None, doi='10.1000/XY', url=None)
    """
    top = dict(doc.metadata or {})
    nested = top.pop("metadata", None)
    meta = {**nested, **top} if isinstance(nested, Mapping) else top
    ids = _id_map(meta)
    authors = next((names for k in AUTHOR_KEYS if (names := author_names(meta.get(k)))), ())
    venue = next((v for k in VENUE_KEYS if (v := _venue(meta.get(k)))), None)
    link = doc.url or next((v for k in ("url", "link") if isinstance(v := meta.get(k), str) and v.strip()), None)
    candidates = (*(meta.get(k) for k in DOI_KEYS), ids.get("doi"), link)
    doi = next((d for raw in candidates if (d := normalize_doi(raw))), None)
    year = doc.year if doc.year is not None else _year(meta)
    return Bibliographic(authors=authors, year=year, venue=venue, doi=doi, url=link or _derived_url(meta, ids))


def normalize_doi(value: Any) -> str | None:
    """A DOI without its resolver prefix (`https://doi.org/`, `http://dx.doi.org/`, `doi:`), or None if not a DOI.

    Example:
        >>> normalize_doi(" doi:10.1038/s41586-020-2649-2 "), normalize_doi("https://example.org/x")
        ('10.1038/s41586-020-2649-2', None)
    """
    if not isinstance(value, str):
        return None
    doi = _DOI_PREFIX.sub("", value.strip()).strip()
    return doi if _DOI.match(doi) else None


def author_names(value: Any) -> tuple[str, ...]:
    """Author names from any of the shapes corpora use (see the module docstring); () when there are none.

    A string is split on ";" when it has one, else on " and " and commas. "Last, First" (one name, or
    "Last, First and Last, First") is read as BibTeX writes it and given back as "First Last".
    A trailing "et al." or "others" is dropped.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        names = _split_names(value)
    elif isinstance(value, Mapping):
        names = [_name_of(value)]
    elif isinstance(value, (list, tuple)):
        names = [_name_of(v) for v in value]
    else:
        return ()
    return tuple(n for n in (" ".join(x.split()) for x in names if x) if n and not _ET_AL.match(n))


def _name_of(value: Any) -> str:
    if isinstance(value, str):
        return _flip(value) if value.count(",") == 1 else value
    if isinstance(value, (list, tuple)):  # arXiv's authors_parsed: [last, first, suffix]
        last, first, *rest = [*map(str, value), "", ""]
        return " ".join(p for p in (first, last, *rest) if p)
    if isinstance(value, Mapping):
        if isinstance(value.get("author"), Mapping):  # OpenAlex authorships
            return _name_of(value["author"])
        for key in NAME_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key]
        given = value.get("given") or value.get("first") or value.get("given_name") or ""
        family = value.get("family") or value.get("last") or value.get("family_name") or ""
        return f"{given} {family}".strip()
    return ""


def _split_names(text: str) -> list[str]:
    text = text.strip()
    if ";" in text:
        return [_name_of(p.strip()) for p in text.split(";")]
    parts = [p.strip() for p in re.split(r",?\s+and\s+", text) if p.strip()]
    if len(parts) > 1 and all(p.count(",") == 1 and _is_family(p.partition(",")[0]) for p in parts):
        return [_flip(p) for p in parts]  # "Smith, John and Doe, Jane": BibTeX's "Last, First"
    pieces = [q.strip() for p in parts for q in p.split(",") if q.strip()]
    if len(parts) == 1 and len(pieces) == 2 and len(pieces[0].split()) == 1:
        return [_flip(parts[0])]  # one "Smith, J." (a family name alone before the comma)
    return pieces  # "A. Smith, B. Jones and C. Lee" (arXiv), "Alice Smith, Bob Jones"


def _is_family(text: str) -> bool:
    """Could be the family-name side of "Last, First": no initials, at most three words ("van der Berg")."""
    return bool(text.strip()) and "." not in text and len(text.split()) <= 3


def _flip(name: str) -> str:
    last, _, first = name.partition(",")
    return f"{first.strip()} {last.strip()}".strip()


def _venue(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        value = next((v for v in value if v), None)
    if isinstance(value, Mapping) and isinstance(value.get("source"), Mapping):  # OpenAlex primary_location
        value = value["source"]
    if isinstance(value, Mapping):
        value = next((value[k] for k in NAME_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
    if isinstance(value, str) and value.strip():
        return " ".join(value.split())
    return None


def _year(meta: Mapping[str, Any]) -> int | None:
    for key in ("year", "publication_year", "published", "date", "publication_date"):
        m = re.match(r"\s*(\d{4})\b", str(meta.get(key) or ""))
        if m:
            return int(m.group(1))
    return None


def _id_map(meta: Mapping[str, Any]) -> dict[str, str]:
    """External ids as {lowercased kind: value}, from the first id map a record has."""
    for key in ID_MAP_KEYS:
        if isinstance(meta.get(key), Mapping):
            return {str(k).lower(): str(v) for k, v in meta[key].items() if v is not None}
    return {}


def _derived_url(meta: Mapping[str, Any], ids: Mapping[str, str]) -> str | None:
    for raw in (*(meta.get(k) for k in ARXIV_KEYS), ids.get("arxiv")):
        if raw is not None and (m := _ARXIV.match(str(raw).strip())):
            return f"https://arxiv.org/abs/{m.group(1)}"
    for raw in (*(meta.get(k) for k in PUBMED_KEYS), ids.get("pubmed"), ids.get("pmid")):
        if raw is not None and str(raw).strip().isdigit():
            return f"https://pubmed.ncbi.nlm.nih.gov/{str(raw).strip()}/"
    return None
