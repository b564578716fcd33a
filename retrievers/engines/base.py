"""The search-engine retriever: one engine's API behind the `Retriever` protocol.

A subclass says how to ask for one page (`fetch_page`) and how a record becomes a `Doc`; this class
walks the engine's pages to serve `search(query, k, offset=..., exclude=..., before=..., categories=...)`:

- pages have a fixed size per engine (`page_size`), so page n of a query is always the same request and
  the disk cache serves it again (`offset=10` reads page 1 from the cache, then page 2 if it needs it);
- `offset` skips the first results of the *filtered* ranking (as every retriever here): pages are read
  from the first until `offset + k` documents passed the filters;
- `before` goes to the API's own date filter and is checked again here (month level, as
  `passes_filters`); `categories` go to the API where it has them (arXiv's `cat:`, Semantic Scholar's
  `fieldsOfStudy`), and are checked on `Doc.metadata["categories"]` in any case;
- `exclude` drops documents by id, and by the DOI / arXiv id / PubMed id an excluded id names; the same
  paper twice in one engine's ranking (a preprint and its version of record) is kept once.

`search` is synchronous (it runs `asearch` in an event loop of its own, in a worker thread when the caller
is already inside one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from deepresearch.retrievers.engines.client import (
    DEFAULT_BACKOFF_S,
    DEFAULT_CACHE_TTL_S,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    EngineClient,
    ResponseCache,
    Sleep,
    public_url,
)
from deepresearch.retrievers.engines.dedup import dedup_keys, excluded_keys
from deepresearch.retrievers.ranking import check_page
from deepresearch.retrievers.stopwords import QUERY_STOP_WORDS
from deepresearch.retrievers.types import Doc, Hit, passes_filters, run_sync


@dataclass(frozen=True)
class Page:
    """One page of an engine's answer: its documents in rank order, the total when the API says, and how many
    results of the ranking the page covered when that is not `len(docs)` (a record that did not parse)."""

    docs: list[Doc]
    total: int | None = None
    returned: int | None = None


def month_end(before: str) -> str:
    """The last day of the month of a `YYYY-MM[-DD]` date, as `YYYY-MM-DD` (the filters are month-level).

    Example:
        >>> month_end("2020-02"), month_end("2021-12-05")
        ('2020-02-29', '2021-12-31')
    """
    import calendar

    year, month = int(before[:4]), int(before[5:7]) if len(before) >= 7 else 12
    return f"{year:04d}-{month:02d}-{calendar.monthrange(year, month)[1]:02d}"


def check_before(before: str | None) -> str | None:
    if before is None:
        return None
    text = str(before).strip()
    if len(text) < 4 or not text[:4].isdigit() or (len(text) >= 7 and not (text[4] == "-" and text[5:7].isdigit())):
        raise ValueError(f"before should be YYYY-MM or YYYY-MM-DD, got {before!r}")
    return text


class AsyncSearch:
    """`search` for a retriever whose work is asynchronous (HTTP): `asearch` run to completion."""

    def search(self, query: str, k: int = 10, **filters: Any) -> list[Hit]:
        return run_sync(self.asearch(query, k, **filters))  # type: ignore[attr-defined]


class SearchEngine(AsyncSearch):
    """Base of the engine retrievers (OpenAlex, Semantic Scholar, arXiv, PubMed).

    Args:
        base_url: The API's root (default: its public server; the command line passes the engine's
            `url_env` variable).
        cache_dir: Folder of the response cache (default ~/.cache/dspy-deepresearch/engines; the command line
            passes $DEEPRESEARCH_ENGINE_CACHE); `cache=False` turns it off.
        credentials: The engine's keys by parameter name (`api_key`, `mailto`, `email`: see each engine); the
            command line passes them from the environment. Sent with each request, never cached or logged.
        cache_ttl_s: Seconds a cached response stays valid (None: for ever).
        timeout_s, retries, backoff_s: Per request, as `EngineClient` (default: the class's values, 20 s, 3
            retries, 0.5 s doubled after each).
        min_interval: Seconds between two requests (default: the engine's documented limit).
        page_size: Results per API request (default: the engine's `page_size`).
        sleep: The coroutine that waits (tests).
    """

    name: ClassVar[str] = ""
    default_url: ClassVar[str] = ""
    url_env: ClassVar[str] = ""
    page_size: ClassVar[int] = 25
    max_results: ClassVar[int] = 1000  # the API's limit on offset + page size
    min_interval: ClassVar[float] = 1.0
    timeout_s: ClassVar[float] = DEFAULT_TIMEOUT_S
    retries: ClassVar[int] = DEFAULT_RETRIES
    backoff_s: ClassVar[float] = DEFAULT_BACKOFF_S
    secret_keys: ClassVar[tuple[str, ...]] = ()  # the keys sent as URL parameters (`credentials`), in this order
    syntax: ClassVar[re.Pattern[str] | None] = None  # an engine that ANDs a query's words: its query syntax

    def __init__(
        self,
        *,
        base_url: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache: bool = True,
        cache_ttl_s: float | None = DEFAULT_CACHE_TTL_S,
        timeout_s: float | None = None,
        retries: int | None = None,
        backoff_s: float | None = None,
        min_interval: float | None = None,
        page_size: int | None = None,
        sleep: Sleep | None = None,
        credentials: Mapping[str, str] | None = None,
    ):
        self.keys = {k: v.strip() for k, v in (credentials or {}).items() if v and v.strip()}
        self.base_url = (base_url or self.default_url).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"{self.name}: base URL must start with http:// or https://, got {public_url(self.base_url)!r}"
            )
        self.page = int(page_size or type(self).page_size)
        if self.page < 1:
            raise ValueError(f"{self.name}: page size must be >= 1")
        headers, secret_params = self.credentials()
        self.client = EngineClient(
            self.name,
            self.base_url,
            min_interval=type(self).min_interval if min_interval is None else min_interval,
            headers=headers,
            secret_params=secret_params,
            cache=ResponseCache(cache_dir, cache_ttl_s) if cache else None,
            timeout_s=type(self).timeout_s if timeout_s is None else timeout_s,
            retries=type(self).retries if retries is None else retries,
            backoff_s=type(self).backoff_s if backoff_s is None else backoff_s,
            sleep=sleep,
        )

    # ---- what a subclass provides ---------------------------------------------------------------------
    def credentials(self) -> tuple[dict[str, str], dict[str, str]]:
        """(headers, secret parameters) read from the environment; sent, never cached, logged or shown."""
        return {}, {k: self.keys[k] for k in self.secret_keys if self.keys.get(k)}

    async def fetch_page(
        self, query: str, start: int, size: int, before: str | None, categories: Collection[str]
    ) -> Page:
        raise NotImplementedError

    def loose_query(self, query: str) -> str | None:
        """A looser form of `query` to search when the query itself finds nothing (engines with a `syntax` AND every
        word of a query: its words OR-ed, unless the query uses that syntax), or None to keep the empty result."""
        return None if self.syntax is None or self.syntax.search(query) else or_words(query)

    # ---- the Retriever protocol -----------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """A JSON-able record for traces: the engine, its server (no credentials) and whether a key is set."""
        headers, secret_params = self.credentials()
        return {"engine": self.name, "url": public_url(self.base_url), "key": bool(headers or secret_params)}

    async def asearch(
        self,
        query: str,
        k: int = 10,
        *,
        offset: int = 0,
        exclude: Collection[str] = (),
        before: str | None = None,
        categories: Collection[str] = (),
    ) -> list[Hit]:
        check_page(k, offset)
        before = check_before(before)
        categories = tuple(categories or ())
        exclude = set(exclude or ())
        if not query or not query.strip():
            return []
        need = offset + k
        banned = excluded_keys(exclude)
        kept: list[Doc] = []
        seen: set[str] = set()
        start = 0
        max_pages = -(-(need + len(exclude)) // self.page) + 2  # room for what the filters drop, bounded
        query = query.strip()
        first = await self.fetch_page(query, 0, min(self.page, self.max_results), before, categories)
        if not first.docs and (first.total or 0) == 0 and (loose := self.loose_query(query)) and loose != query:
            # the first page of the query decides (cached), so every page of one search asks the same thing
            query, first = loose, await self.fetch_page(loose, 0, min(self.page, self.max_results), before, categories)
        for _ in range(max_pages):
            if start >= self.max_results:
                break
            size = min(self.page, self.max_results - start)
            page = first if start == 0 else await self.fetch_page(query, start, size, before, categories)
            for doc in page.docs:
                keys = dedup_keys(doc)
                if doc.doc_id in exclude or banned & keys or seen & keys:
                    continue
                seen |= keys
                if passes_filters(doc, before=before, categories=categories):
                    kept.append(doc)
            start += size
            returned = len(page.docs) if page.returned is None else page.returned
            if len(kept) >= need or returned < size or (page.total is not None and start >= page.total):
                break
        return [Hit(doc=doc, score=1.0 / n, rank=n) for n, doc in enumerate(kept[:need], start=1)][offset:]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({public_url(self.base_url)!r})"


def or_words(query: str) -> str | None:
    """The words of a query (stop words and one-letter words left out) joined by OR; None for fewer than two.

    Example:
        >>> or_words("Does vitamin D prevent fractures?")
        'vitamin OR prevent OR fractures'
    """
    words = list(dict.fromkeys(w for w in re.findall(r"[^\W_]{2,}", query.lower()) if w not in QUERY_STOP_WORDS))
    return " OR ".join(words) if len(words) > 1 else None


def first_text(value: Any) -> str:
    """A string field, stripped, with runs of white space made one space; '' for anything else."""
    return " ".join(value.split()) if isinstance(value, str) else ""


def mapping_of(value: Any) -> Mapping[str, Any]:
    """A mapping field as it is; {} for anything else."""
    return value if isinstance(value, Mapping) else {}


def year_of(date: str | None) -> int | None:
    if date and len(date) >= 4 and date[:4].isdigit():
        return int(date[:4])
    return None


def clean_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata without empty values."""
    return {k: v for k, v in meta.items() if v not in (None, "", [], (), {})}
