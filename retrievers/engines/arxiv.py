"""arXiv (https://info.arxiv.org/help/api/user-manual.html): `GET /api/query?search_query=&start=&max_results=`,
answered in Atom XML.

Documented limit: no more than one request every three seconds. A plain-language query becomes its words
OR-ed in `all:` (sorted by relevance, papers matching more words come first); a query already written in
arXiv's syntax (`ti:`, `au:`, `abs:`, `cat:`, `AND`...) is sent as it is. `before` becomes
`submittedDate:[... TO YYYYMMDD2359]`, categories `cat:` terms (`cs.CL`). Each entry's PDF link is its
`pdf_url`; a journal DOI given by the authors (`arxiv:doi`) becomes the id, else `arxiv:<id>`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Collection

from deepresearch.retrievers.bibliographic import normalize_doi
from deepresearch.retrievers.engines.base import Page, SearchEngine, clean_meta, first_text, month_end
from deepresearch.retrievers.engines.dedup import arxiv_id
from deepresearch.retrievers.stopwords import QUERY_STOP_WORDS
from deepresearch.retrievers.types import Doc

NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}
_SYNTAX = re.compile(r"\b(?:ti|au|abs|co|jr|cat|rn|id|all|submittedDate):|\b(?:AND|OR|ANDNOT)\b")
MAX_TERMS = 16


def arxiv_query(query: str, before: str | None = None, categories: Collection[str] = ()) -> str:
    """The `search_query` of a query, a date bound and categories.

    Example:
        >>> arxiv_query("What is retrieval-augmented generation?", "2023-02", ["cs.CL"])
        '(all:retrieval OR all:augmented OR all:generation) AND (cat:cs.CL) AND submittedDate:[190001010000 TO 202302282359]'
    """
    if _SYNTAX.search(query):
        text = query.strip()
    else:
        words = [w for w in re.findall(r"[^\W_]+", query.lower()) if w not in QUERY_STOP_WORDS]
        words = list(dict.fromkeys(words))[:MAX_TERMS] or [query.strip()]
        text = " OR ".join(f"all:{w}" for w in words)
    parts = [f"({text})"]
    if categories:
        parts.append("(" + " OR ".join(f"cat:{c}" for c in categories) + ")")
    if before:
        parts.append(f"submittedDate:[190001010000 TO {month_end(before).replace('-', '')}2359]")
    return " AND ".join(parts)


def _text(node: ET.Element | None) -> str:
    return first_text(node.text) if node is not None and node.text else ""


def entry_to_doc(entry: ET.Element) -> Doc:
    abs_url = _text(entry.find("atom:id", NS))
    arxiv = arxiv_id(abs_url)
    if arxiv is None:
        raise ValueError(f"an entry without an arXiv id ({abs_url[:80]!r})")
    doi = normalize_doi(_text(entry.find("arxiv:doi", NS)))
    published = _text(entry.find("atom:published", NS))[:10] or None
    pdf_url = next(
        (
            link.get("href")
            for link in entry.findall("atom:link", NS)
            if link.get("title") == "pdf" or link.get("type") == "application/pdf"
        ),
        None,
    )
    if pdf_url and pdf_url.startswith("http://arxiv.org/"):
        pdf_url = "https://" + pdf_url[len("http://") :]
    primary = entry.find("arxiv:primary_category", NS)
    categories = [c.get("term") for c in entry.findall("atom:category", NS) if c.get("term")]
    if primary is not None and primary.get("term") and primary.get("term") not in categories:
        categories.insert(0, primary.get("term"))
    meta = clean_meta(
        {
            "source": "arxiv",
            "arxiv_id": arxiv,
            "doi": doi.lower() if doi else None,
            "authors": [
                _text(a.find("atom:name", NS))
                for a in entry.findall("atom:author", NS)
                if _text(a.find("atom:name", NS))
            ],
            "venue": _text(entry.find("arxiv:journal_ref", NS)) or None,
            "pdf_url": pdf_url,
            "categories": categories,
            "updated": _text(entry.find("atom:updated", NS))[:10] or None,
            "comment": _text(entry.find("arxiv:comment", NS)) or None,
        }
    )
    return Doc(
        doc_id=meta.get("doi") or f"arxiv:{arxiv}",
        title=_text(entry.find("atom:title", NS)),
        text=_text(entry.find("atom:summary", NS)),
        url=f"https://arxiv.org/abs/{arxiv}",
        year=int(published[:4]) if published else None,
        published=published,
        metadata=meta,
    )


def parse_feed(body: str) -> Page:
    root = ET.fromstring(body)
    if root.tag != f"{{{NS['atom']}}}feed":
        raise ValueError(f"not an Atom feed (root element {root.tag!r})")
    entries = root.findall("atom:entry", NS)
    if len(entries) == 1 and "/api/errors" in _text(entries[0].find("atom:id", NS)):  # the API's own error entry
        raise ValueError(f"arXiv API error: {_text(entries[0].find('atom:summary', NS))[:200]}")
    total = _text(root.find("opensearch:totalResults", NS))
    docs = []
    for entry in entries:
        try:
            docs.append(entry_to_doc(entry))
        except ValueError:  # one unreadable entry costs that entry, not the page
            continue
    if entries and not docs:
        raise ValueError(f"none of the {len(entries)} entries could be read")
    return Page(docs, int(total) if total.isdigit() else None, returned=len(entries))


class ArxivEngine(SearchEngine):
    """arXiv search, one request every three seconds."""

    name = "arxiv"
    default_url = "https://export.arxiv.org/api"
    url_env = "DEEPRESEARCH_ARXIV_URL"
    max_results = 30000  # the API refuses start + max_results beyond 30,000
    min_interval = 3.0

    async def fetch_page(
        self, query: str, start: int, size: int, before: str | None, categories: Collection[str]
    ) -> Page:
        params = {
            "search_query": arxiv_query(query, before, categories),
            "start": start,
            "max_results": size,
            "sortBy": "relevance",
            "sortOrder": "descending",
        }
        return await self.client.get("/query", params, parse_feed)
