"""The same paper from several engines: keys that identify it, and one merged record.

A paper is known by its DOI, its arXiv id, its PubMed id and its normalised title. Two records sharing any
of these keys are the same paper (a preprint found by arXiv and its version of record found by OpenAlex
share the title; OpenAlex gives arXiv preprints the DataCite DOI `10.48550/arXiv.<id>`, read as the arXiv
id). `group_docs` joins records transitively; `merge_docs` makes one record of a group, the best-ranked
record's fields first, the others filling what it lacks (an abstract, a PDF link, a DOI).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any

from deepresearch.retrievers.bibliographic import normalize_doi
from deepresearch.retrievers.types import Doc

_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_OLD = re.compile(r"\b([a-z-]+(?:\.[a-z]{2})?/\d{7})(?:v\d+)?\b", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^\s?#]+?)(?:v\d+)?(?:\.pdf)?(?:[?#]|$)", re.IGNORECASE)
MIN_TITLE_CHARS = 20  # shorter titles ("Introduction", "Editorial") name no paper on their own
ID_PREFIXES = ("doi:", "arxiv:", "pmid:")


def normalize_title(title: str) -> str:
    """Lower case, accents and punctuation removed, white space collapsed.

    Example:
        >>> normalize_title("  Attention Is All You Need. ") == normalize_title("attention is all you need")
        True
    """
    text = unicodedata.normalize("NFKD", title or "")
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def arxiv_id(value: Any) -> str | None:
    """The arXiv id (no version) in an id, a DOI `10.48550/arXiv.<id>` or an arxiv.org URL; None if none."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if (m := _ARXIV_DOI.match(normalize_doi(text) or "")) is not None or (m := _ARXIV_URL.search(text)) is not None:
        text = m.group(1)
    elif text.lower().startswith("arxiv:"):
        text = text[6:]
    elif "/" in text and "arxiv" not in text.lower() and not _ARXIV_OLD.fullmatch(text):
        return None
    if (m := _ARXIV_NEW.fullmatch(text) or _ARXIV_NEW.match(text)) is not None:
        return m.group(1)
    if (m := _ARXIV_OLD.fullmatch(text)) is not None:
        return m.group(1).lower()
    return None


def doc_doi(doc: Doc) -> str | None:
    """The document's DOI (lower case), from its metadata or its id; not an arXiv DataCite DOI."""
    meta = doc.metadata or {}
    for raw in (meta.get("doi"), doc.doc_id):
        doi = normalize_doi(raw) if isinstance(raw, str) else None
        if doi and not _ARXIV_DOI.match(doi):
            return doi.lower()
    return None


def doc_arxiv(doc: Doc) -> str | None:
    meta = doc.metadata or {}
    for raw in (
        meta.get("arxiv_id"),
        meta.get("doi"),
        doc.doc_id if doc.doc_id.lower().startswith(("arxiv:", "10.")) else None,
    ):
        found = arxiv_id(raw)
        if found:
            return found
    return None


def doc_pmid(doc: Doc) -> str | None:
    meta = doc.metadata or {}
    raw = meta.get("pmid") or (doc.doc_id[5:] if doc.doc_id.startswith("pmid:") else None)
    return str(raw).strip() if raw is not None and str(raw).strip().isdigit() else None


def id_keys(doc: Doc) -> set[str]:
    """The keys naming the paper by an identifier: `doi:...`, `arxiv:...`, `pmid:...` (no title)."""
    keys = set()
    if (doi := doc_doi(doc)) is not None:
        keys.add(f"doi:{doi}")
    if (arxiv := doc_arxiv(doc)) is not None:
        keys.add(f"arxiv:{arxiv}")
    if (pmid := doc_pmid(doc)) is not None:
        keys.add(f"pmid:{pmid}")
    return keys


def dedup_keys(doc: Doc) -> set[str]:
    """Every key naming the paper: its identifiers and, for a title of 20 characters or more, `title:...`.

    Example:
        >>> sorted(dedup_keys(Doc("arxiv:1706.03762", "Attention Is All You Need", "")))
        ['arxiv:1706.03762', 'title:attention is all you need']
    """
    keys = id_keys(doc)
    title = normalize_title(doc.title)
    if len(title) >= MIN_TITLE_CHARS:
        keys.add(f"title:{title}")
    return keys


def excluded_keys(exclude: Collection[str]) -> set[str]:
    """The identifier keys the ids of an exclusion set name (a DOI, `arxiv:<id>`, `pmid:<n>`)."""
    keys = set()
    for doc_id in exclude:
        keys |= id_keys(Doc(doc_id=str(doc_id), title="", text=""))
    return keys


def group_docs(docs: Sequence[Doc]) -> list[list[int]]:
    """Indices of `docs` grouped by shared keys (transitively), each group in input order, groups in the order
    of their first member. Documents with the same id are always one group."""
    parent = list(range(len(docs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, doc in enumerate(docs):
        for key in (f"id:{doc.doc_id}", *sorted(dedup_keys(doc))):
            if key in owner:
                a, b = find(owner[key]), find(i)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(docs)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _id_rank(doc_id: str) -> int:
    if normalize_doi(doc_id) and not _ARXIV_DOI.match(normalize_doi(doc_id) or ""):
        return 0
    return next((n for n, p in enumerate(ID_PREFIXES[1:], start=1) if doc_id.lower().startswith(p)), len(ID_PREFIXES))


def merge_docs(docs: Sequence[Doc], keep_id: str | None = None) -> Doc:
    """One record of the same paper's records, best first: the first record's fields, the others filling
    what it lacks; metadata merged the same way, `sources` listing every engine that found it.

    The merged id is `keep_id` when given (a local corpus's own id), else the most stable id of the group:
    a DOI, else `arxiv:<id>`, else `pmid:<n>`, else the first record's id.
    """
    if not docs:
        raise ValueError("nothing to merge")
    first = docs[0]
    fields: dict[str, Any] = {}
    for name in ("title", "text", "url", "year", "published"):
        fields[name] = next((getattr(d, name) for d in docs if getattr(d, name)), getattr(first, name))
    meta: dict[str, Any] = {}
    for d in docs:
        for key, value in (d.metadata or {}).items():
            if value not in (None, "", [], (), {}) and key not in meta:
                meta[key] = value
    sources = []
    for d in docs:
        for s in (d.metadata or {}).get("sources") or [(d.metadata or {}).get("source")]:
            if s and s not in sources:
                sources.append(s)
    if sources:
        meta["sources"] = sources
    merged = replace(first, metadata=meta, **fields)
    if keep_id is None:
        ids = sorted((_id_rank(d.doc_id), n) for n, d in enumerate(docs))
        keep_id = docs[ids[0][1]].doc_id
        if _id_rank(keep_id) > 0 and (doi := doc_doi(merged)) is not None:
            keep_id = doi
        elif _id_rank(keep_id) > 1 and (arxiv := doc_arxiv(merged)) is not None:
            keep_id = f"arxiv:{arxiv}"
    return replace(merged, doc_id=keep_id)


def deduplicate(docs: Iterable[Doc]) -> list[Doc]:
    """The documents with each paper once, merged (`merge_docs`), in the order of its first record.

    Example:
        >>> a = Doc("10.1000/x", "A study of deduplicated records", "", metadata={"source": "openalex"})
        >>> b = Doc("arxiv:2101.00001", "A Study of Deduplicated Records.", "abstract", metadata={"source": "arxiv"})
        >>> [(d.doc_id, d.text, d.metadata["sources"]) for d in deduplicate([a, b])]
        [('10.1000/x', 'abstract', ['openalex', 'arxiv'])]
    """
    docs = list(docs)
    return [merge_docs([docs[i] for i in group]) for group in group_docs(docs)]
