"""The retrieval contract: documents, hits, and the protocol every backend implements."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


def run_sync(coro):
    """Runs a coroutine to completion from synchronous code, inside a running event loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    ctx = contextvars.copy_context()  # keep dspy.context overrides in the worker thread
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()


@dataclass(frozen=True)
class Doc:
    """One document of a corpus.

    Args:
        doc_id: Stable identifier within the corpus (BEIR `_id`, an arXiv id, a DOI...).
        title: Title, empty when unknown.
        text: Body text (usually the abstract).
        url: Link to the document, when known.
        year: Publication year, when known.
        published: Publication date as ISO text (`YYYY-MM` or `YYYY-MM-DD`), when known.
        metadata: Any further fields of the source record (authors, categories...).
    """

    doc_id: str
    title: str
    text: str
    url: str | None = None
    year: int | None = None
    published: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def link(self) -> str:
        """The URL when there is one, else a corpus-local reference."""
        return self.url or f"corpus:{self.doc_id}"


@dataclass(frozen=True)
class Hit:
    """A document returned for a query, with its score and 1-based rank."""

    doc: Doc
    score: float
    rank: int


@runtime_checkable
class Retriever(Protocol):
    """What the research programs need from a search backend.

    `search(query, k)` returns at most k hits, best first. Backends over a local corpus also take the
    keyword filters below (ScholarGym's): skip the first `offset` results of the filtered ranking
    (pagination: "more results of this query"), leave out ids in `exclude`, keep documents published in
    or before the month of `before` (`YYYY-MM[-DD]`), keep documents in any of `categories`.
    Hit.rank is the 1-based position in the filtered ranking, so page 2 starts at rank k + 1.
    """

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        offset: int = 0,
        exclude: Collection[str] = (),
        before: str | None = None,
        categories: Collection[str] = (),
    ) -> list[Hit]: ...

    async def asearch(
        self,
        query: str,
        k: int = 10,
        *,
        offset: int = 0,
        exclude: Collection[str] = (),
        before: str | None = None,
        categories: Collection[str] = (),
    ) -> list[Hit]: ...


class SyncSearchMixin:
    """Gives a backend with a CPU-bound `search` an `asearch` that runs it in a worker thread."""

    async def asearch(self, query: str, k: int = 10, **filters: Any) -> list[Hit]:
        return await asyncio.to_thread(self.search, query, k, **filters)  # type: ignore[attr-defined]


async def search_async(retriever: Retriever, query: str, k: int = 10, **filters: Any) -> list[Hit]:
    """`retriever.asearch` when it has one, else its `search` in a worker thread, so the loop never blocks."""
    if hasattr(retriever, "asearch"):
        return await retriever.asearch(query, k, **filters)
    return await asyncio.to_thread(retriever.search, query, k, **filters)


def passes_filters(
    doc: Doc, exclude: Collection[str] = (), before: str | None = None, categories: Collection[str] = ()
) -> bool:
    """ScholarGym's search filters: exclusion set, month-level `published <= before`, any-of categories.

    A document with no publication date passes the date filter (it cannot be shown to be too late).
    """
    if exclude and doc.doc_id in exclude:
        return False
    if before and doc.published and doc.published[:7] > before[:7]:
        return False
    if categories:
        cats = doc.metadata.get("categories") or ()
        cats = cats.split() if isinstance(cats, str) else cats
        if not set(cats) & set(categories):
            return False
    return True
