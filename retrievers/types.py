"""The retrieval contract: documents, hits, and the protocol every backend implements."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable


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
    """What the research programs need from a search backend."""

    def search(self, query: str, k: int = 10) -> list[Hit]: ...

    async def asearch(self, query: str, k: int = 10) -> list[Hit]: ...


class SyncSearchMixin:
    """Gives a backend with a CPU-bound `search` an `asearch` that runs it in a worker thread."""

    async def asearch(self, query: str, k: int = 10, **kwargs: Any) -> list[Hit]:
        return await asyncio.to_thread(self.search, query, k, **kwargs)  # type: ignore[attr-defined]
