"""OpenAlex (https://docs.openalex.org): `GET /works?search=...&filter=...&page=&per-page=`.

Documented limits: 10 requests per second and 100,000 a day; an e-mail in `mailto` joins the "polite
pool" ($OPENALEX_MAILTO), an API key goes in `api_key` ($OPENALEX_API_KEY). `before` becomes
`filter=to_publication_date:YYYY-MM-DD` (the month's last day). Abstracts come as an inverted index
(word -> positions) and are rebuilt as text. A work's open-access PDF is `best_oa_location.pdf_url`, else
the first location with a `pdf_url`. Categories are the work's topics' field and subfield names (no API
filter: they are checked on the results). OpenAlex ANDs the words of a query; when that finds
nothing, its words are OR-ed (`SearchEngine.loose_query`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from deepresearch.retrievers.bibliographic import normalize_doi
from deepresearch.retrievers.engines.base import (
    Page,
    SearchEngine,
    clean_meta,
    first_text,
    mapping_of,
    month_end,
    year_of,
)
from deepresearch.retrievers.engines.dedup import arxiv_id
from deepresearch.retrievers.types import Doc

SELECT = (
    "id,doi,title,display_name,publication_year,publication_date,ids,primary_location,best_oa_location,"
    "locations,open_access,authorships,abstract_inverted_index,topics,type"
)


def rebuild_abstract(index: Mapping[str, Any] | None) -> str:
    """The text of an OpenAlex `abstract_inverted_index` ({"word": [positions]}).

    Example:
        >>> rebuild_abstract({"Deep": [0], "learning": [1, 3], "and": [2]})
        'Deep learning and learning'
    """
    if not isinstance(index, Mapping):
        return ""
    placed: dict[int, str] = {}
    for word, positions in index.items():
        for pos in positions or ():
            if isinstance(pos, int) and pos >= 0:
                placed[pos] = str(word)
    return " ".join(placed[p] for p in sorted(placed))


def _short_id(url: str | None) -> str | None:
    return url.rstrip("/").rsplit("/", 1)[-1] if isinstance(url, str) and url.strip() else None


def work_to_doc(work: Mapping[str, Any]) -> Doc:
    """A `Doc` from one OpenAlex work: id = its DOI, else `arxiv:<id>`, else `openalex:W...`."""
    openalex = _short_id(work.get("id"))
    ids = mapping_of(work.get("ids"))
    raw_doi = normalize_doi(work.get("doi") or ids.get("doi"))
    locations = [loc for loc in (work.get("locations") or []) if isinstance(loc, Mapping)]
    best = mapping_of(work.get("best_oa_location"))
    primary = mapping_of(work.get("primary_location"))
    arxiv = arxiv_id(raw_doi) or next(
        (a for loc in locations for a in (arxiv_id(loc.get("landing_page_url")), arxiv_id(loc.get("pdf_url"))) if a),
        None,
    )
    doi = raw_doi if raw_doi and not arxiv_id(raw_doi) else None
    pdf_url = best.get("pdf_url") or next((loc["pdf_url"] for loc in locations if loc.get("pdf_url")), None)
    pmid = _short_id(ids.get("pmid"))
    source = mapping_of(primary.get("source"))
    authors = [
        first_text((a.get("author") or {}).get("display_name")) or first_text(a.get("raw_author_name"))
        for a in (work.get("authorships") or [])
        if isinstance(a, Mapping)
    ]
    categories = []
    for topic in work.get("topics") or []:
        for level in ("field", "subfield"):
            name = first_text((topic.get(level) or {}).get("display_name")) if isinstance(topic, Mapping) else ""
            if name and name not in categories:
                categories.append(name)
    published = work.get("publication_date") if isinstance(work.get("publication_date"), str) else None
    year = work.get("publication_year") if isinstance(work.get("publication_year"), int) else year_of(published)
    url = (
        (f"https://doi.org/{doi}" if doi else None)
        or primary.get("landing_page_url")
        or (f"https://arxiv.org/abs/{arxiv}" if arxiv else None)
        or work.get("id")
    )
    doc_id = doi or (f"arxiv:{arxiv}" if arxiv else f"openalex:{openalex}")
    meta = clean_meta(
        {
            "source": "openalex",
            "openalex_id": openalex,
            "doi": doi,
            "arxiv_id": arxiv,
            "pmid": pmid if pmid and pmid.isdigit() else None,
            "authors": [a for a in authors if a],
            "venue": first_text(source.get("display_name")),
            "pdf_url": pdf_url,
            "oa_url": (work.get("open_access") or {}).get("oa_url"),
            "categories": categories,
            "type": work.get("type"),
        }
    )
    return Doc(
        doc_id=doc_id,
        title=first_text(work.get("title") or work.get("display_name")),
        text=rebuild_abstract(work.get("abstract_inverted_index")),
        url=url,
        year=year,
        published=published,
        metadata=meta,
    )


def parse_works(body: str) -> Page:
    data = json.loads(body)
    if not isinstance(data, Mapping) or not isinstance(data.get("results"), list):
        raise ValueError("no 'results' list in the answer")
    count = (data.get("meta") or {}).get("count")
    return Page(
        [work_to_doc(w) for w in data["results"] if isinstance(w, Mapping)], count if isinstance(count, int) else None
    )


class OpenAlexEngine(SearchEngine):
    """OpenAlex works search. Key and contact: `credentials={"api_key": ..., "mailto": ...}` (the CLI:
    $OPENALEX_API_KEY, $OPENALEX_MAILTO)."""

    name = "openalex"
    default_url = "https://api.openalex.org"
    url_env = "DEEPRESEARCH_OPENALEX_URL"
    max_results = 10000  # page * per-page beyond 10,000 needs cursor paging
    min_interval = 0.1  # 10 requests per second
    secret_keys = ("mailto", "api_key")
    syntax = re.compile(r'"|\b(?:AND|OR|NOT)\b')  # phrases, boolean operators

    async def fetch_page(
        self, query: str, start: int, size: int, before: str | None, categories: Collection[str]
    ) -> Page:
        params = {"search": query, "per-page": size, "page": start // size + 1, "select": SELECT}
        if before:
            params["filter"] = f"to_publication_date:{month_end(before)}"
        return await self.client.get("/works", params, parse_works)
