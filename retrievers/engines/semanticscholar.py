"""Semantic Scholar Academic Graph (https://api.semanticscholar.org/api-docs/graph):
`GET /graph/v1/paper/search?query=&offset=&limit=&fields=`.

Documented limits: without a key, a rate pool shared by every unauthenticated client (busy times answer
429); with a key ($S2_API_KEY, sent as the `x-api-key` header), 1 request per second to start. Either
way one request per second here. Results stop at offset + limit = 1,000. `before` becomes
`publicationDateOrYear=:YYYY-MM` (up to the month's end); categories go to `fieldsOfStudy` (its names:
Computer Science, Medicine, Biology...). The open-access PDF is `openAccessPdf.url`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from deepresearch.retrievers.bibliographic import normalize_doi
from deepresearch.retrievers.engines.base import Page, SearchEngine, clean_meta, first_text, mapping_of, year_of
from deepresearch.retrievers.engines.dedup import arxiv_id
from deepresearch.retrievers.types import Doc

FIELDS = "paperId,externalIds,title,abstract,year,publicationDate,venue,authors,openAccessPdf,url,fieldsOfStudy"


def paper_to_doc(paper: Mapping[str, Any]) -> Doc:
    """A `Doc` from one paper: id = its DOI, else `arxiv:<id>`, else `pmid:<n>`, else `s2:<paperId>`."""
    ids = mapping_of(paper.get("externalIds"))
    arxiv = arxiv_id(f"arxiv:{ids['ArXiv']}") if ids.get("ArXiv") else None
    raw_doi = normalize_doi(ids.get("DOI"))
    arxiv = arxiv or arxiv_id(raw_doi)
    doi = raw_doi if raw_doi and not arxiv_id(raw_doi) else None
    pmid = str(ids["PubMed"]) if ids.get("PubMed") is not None and str(ids["PubMed"]).isdigit() else None
    paper_id = first_text(paper.get("paperId"))
    pdf = mapping_of(paper.get("openAccessPdf"))
    published = paper.get("publicationDate") if isinstance(paper.get("publicationDate"), str) else None
    year = paper.get("year") if isinstance(paper.get("year"), int) else year_of(published)
    doc_id = doi or (f"arxiv:{arxiv}" if arxiv else f"pmid:{pmid}" if pmid else f"s2:{paper_id}")
    url = paper.get("url") or (f"https://www.semanticscholar.org/paper/{paper_id}" if paper_id else None)
    meta = clean_meta(
        {
            "source": "semanticscholar",
            "s2_id": paper_id,
            "doi": doi,
            "arxiv_id": arxiv,
            "pmid": pmid,
            "authors": [
                first_text(a.get("name"))
                for a in (paper.get("authors") or [])
                if isinstance(a, Mapping) and first_text(a.get("name"))
            ],
            "venue": first_text(paper.get("venue")),
            "pdf_url": first_text(pdf.get("url")) or None,
            "categories": [c for c in (paper.get("fieldsOfStudy") or []) if isinstance(c, str)],
        }
    )
    return Doc(
        doc_id=doc_id,
        title=first_text(paper.get("title")),
        text=first_text(paper.get("abstract")),
        url=url,
        year=year,
        published=published,
        metadata=meta,
    )


def parse_search(body: str) -> Page:
    data = json.loads(body)
    if not isinstance(data, Mapping) or "total" not in data and "data" not in data:
        raise ValueError("no 'data' list in the answer")
    papers = data.get("data") or []  # an empty result may leave `data` out
    if not isinstance(papers, list):
        raise ValueError("'data' is not a list")
    total = data.get("total")
    return Page([paper_to_doc(p) for p in papers if isinstance(p, Mapping)], total if isinstance(total, int) else None)


class SemanticScholarEngine(SearchEngine):
    """Semantic Scholar paper search (relevance). Key: `credentials={"api_key": ...}` (the CLI: $S2_API_KEY)."""

    name = "semanticscholar"
    default_url = "https://api.semanticscholar.org/graph/v1"
    url_env = "DEEPRESEARCH_SEMANTICSCHOLAR_URL"

    def credentials(self) -> tuple[dict[str, str], dict[str, str]]:
        key = self.keys.get("api_key")
        return ({"x-api-key": key} if key else {}), {}

    async def fetch_page(
        self, query: str, start: int, size: int, before: str | None, categories: Collection[str]
    ) -> Page:
        # the API finds nothing for hyphenated terms ("retrieval-augmented"); its documentation says to use spaces
        params = {
            "query": " ".join(query.replace("-", " ").split()),
            "offset": start,
            "limit": min(size, self.max_results - start - 1),
            "fields": FIELDS,
        }
        if before:
            params["publicationDateOrYear"] = f":{before[:7]}" if len(before) >= 7 else f":{before[:4]}"
        if categories:
            params["fieldsOfStudy"] = ",".join(categories)
        return await self.client.get("/paper/search", params, parse_search)
