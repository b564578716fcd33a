"""Scholarly search engines as retrievers: OpenAlex, Semantic Scholar, arXiv and PubMed.

Each engine implements the `Retriever` protocol (`search` / `asearch` with k, offset, exclude, before and
categories) over its public API, with its key or contact e-mail from the environment, its documented rate
limit, retries with backoff, a bounded timeout, an on-disk response cache and a base-URL setting:

    engine      base URL (default)                               setting                            credentials
    openalex    https://api.openalex.org                         $DEEPRESEARCH_OPENALEX_URL         $OPENALEX_MAILTO, $OPENALEX_API_KEY
    semanticscholar https://api.semanticscholar.org/graph/v1     $DEEPRESEARCH_SEMANTICSCHOLAR_URL  $S2_API_KEY
    arxiv       https://export.arxiv.org/api                     $DEEPRESEARCH_ARXIV_URL            -
    pubmed      https://eutils.ncbi.nlm.nih.gov/entrez/eutils    $DEEPRESEARCH_PUBMED_URL           $NCBI_API_KEY, $NCBI_EMAIL

`open_sources(["openalex", "arxiv"], local=bm25)` gives one retriever fusing them (`SourcesRetriever`).
Hits carry `Doc.metadata` keys `source`, `doi`, `arxiv_id`, `pmid`, `authors` (names), `venue`, `pdf_url`
(an open-access PDF, where the engine gives one) and `categories`.

The requests go through httpx's AsyncClient (already installed with dspy, litellm and openai): the
engines' own client libraries (pyalex, semanticscholar, arxiv, biopython's Entrez) are synchronous or
wrap their own sessions, so none would share one rate limiter, cache, retry policy and base-URL setting
across four engines inside the run's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deepresearch.retrievers.engines.arxiv import ArxivEngine
from deepresearch.retrievers.engines.base import SearchEngine
from deepresearch.retrievers.engines.client import EngineError, ResponseCache, default_cache_dir
from deepresearch.retrievers.engines.dedup import dedup_keys, deduplicate, normalize_title
from deepresearch.retrievers.engines.fusion import DOWN_FOR_S, SOURCE_TIMEOUT_S, SourcesFailed, SourcesRetriever
from deepresearch.retrievers.engines.openalex import OpenAlexEngine
from deepresearch.retrievers.engines.pubmed import PubMedEngine
from deepresearch.retrievers.engines.semanticscholar import SemanticScholarEngine
from deepresearch.retrievers.types import Retriever

ENGINES: dict[str, type[SearchEngine]] = {
    e.name: e for e in (OpenAlexEngine, SemanticScholarEngine, ArxivEngine, PubMedEngine)
}
ALIASES = {
    "s2": "semanticscholar",
    "semantic-scholar": "semanticscholar",
    "semantic_scholar": "semanticscholar",
    "semscholar": "semanticscholar",
    "open-alex": "openalex",
    "medline": "pubmed",
    "ncbi": "pubmed",
}
LOCAL = "corpus"  # the name of the local corpus among the fused sources


def engine_name(name: str) -> str:
    """The engine a name or alias means (`s2` -> `semanticscholar`), case-insensitive.

    Raises:
        ValueError: for a name that is no engine.
    """
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in ENGINES:
        raise ValueError(f"unknown source {name!r}; choose from: {', '.join(ENGINES)} (s2 = semanticscholar)")
    return key


def open_engine(name: str, **options: Any) -> SearchEngine:
    """An engine retriever by name; `options` as `SearchEngine` (base_url, cache_dir, cache, timeout_s...)."""
    return ENGINES[engine_name(name)](**options)


def open_sources(
    names: Sequence[str],
    *,
    local: Retriever | None = None,
    base_urls: Mapping[str, str] | None = None,
    credentials: Mapping[str, Mapping[str, str]] | None = None,
    weights: Mapping[str, float] | None = None,
    down_for_s: float = DOWN_FOR_S,
    source_timeout_s: float | None = SOURCE_TIMEOUT_S,
    **options: Any,
) -> SourcesRetriever:
    """One retriever fusing the named engines (and `local`, a retriever over a local corpus, listed first).

    Args:
        names: Engine names or aliases; repeats count once.
        local: A retriever over a local corpus to fuse with the engines (its papers keep their corpus ids).
        base_urls: A base URL per engine name, over its public server.
        credentials: The keys of each engine by engine name (`{"semanticscholar": {"api_key": ...}}`).
        weights: RRF weights by source name (`corpus` for the local one).
        down_for_s: Seconds a source is skipped after a network failure (default 120).
        source_timeout_s: Seconds one source may take for one search before the search goes on without it (default
            45; None: no limit).
        options: Passed to every engine (cache_dir, cache, cache_ttl_s, timeout_s per request, retries, backoff_s...).

    Raises:
        ValueError: for an unknown engine, or nothing to search.
    """
    chosen = list(dict.fromkeys(engine_name(n) for n in names))
    urls = {engine_name(k): v for k, v in (base_urls or {}).items()}
    keys = {engine_name(k): v for k, v in (credentials or {}).items()}
    parts: dict[str, Retriever] = {LOCAL: local} if local is not None else {}
    for name in chosen:
        parts[name] = open_engine(
            name,
            **({"base_url": urls[name]} if urls.get(name) else {}),
            **({"credentials": keys[name]} if keys.get(name) else {}),
            **options,
        )
    return SourcesRetriever(
        parts,
        weights=weights,
        local=LOCAL if local is not None else None,
        down_for_s=down_for_s,
        timeout_s=source_timeout_s,
    )


__all__ = [
    "ALIASES",
    "ENGINES",
    "LOCAL",
    "ArxivEngine",
    "EngineError",
    "OpenAlexEngine",
    "PubMedEngine",
    "ResponseCache",
    "SearchEngine",
    "SemanticScholarEngine",
    "SourcesFailed",
    "SourcesRetriever",
    "dedup_keys",
    "deduplicate",
    "default_cache_dir",
    "engine_name",
    "normalize_title",
    "open_engine",
    "open_sources",
]
