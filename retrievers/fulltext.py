"""The full text of a hit: fetch its open-access PDF, read it, and give the passages that bear on the query.

Search engines give some hits an open-access PDF link (`Doc.metadata["pdf_url"]`). `FullTextRetriever`
wraps any retriever: for each such hit it fetches the PDF (once: PDFs are cached on disk, by default
under ~/.cache/dspy-deepresearch/fulltext), extracts and splits it (`deepresearch.retrievers.pdf`,
`deepresearch.retrievers.passages`), ranks the paper's passages against the query with BM25 and returns the best few
as hits `paper#n` in the paper's place, so the extractor reads those passages rather than the abstract.
A hit without a link, or whose PDF cannot be fetched or read, stays as it was (its abstract); a failure
is told in one warning line per paper and not tried again in the same process (`unread` says why).

A step that judges whole papers reads one through `read` instead, which keeps the paper's id: the
gathering loop (ScholarGym's) searches the retriever this one wraps, selects papers by id, and its second
look at an uncertain candidate reads that paper's best passages this way, from the same cache.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

import diskcache

from deepresearch.retrievers.corpus import CorpusError
from deepresearch.retrievers.passages import (
    MAX_CHARS,
    OVERLAP,
    PASSAGE_SEP,
    best_passages,
    passage_docs,
)
from deepresearch.retrievers.pdf import read_pdf
from deepresearch.retrievers.types import Doc, Hit, search_async

logger = logging.getLogger(__name__)

DEFAULT_CACHE = Path("~/.cache/dspy-deepresearch/fulltext")
CACHE_BYTES = 4 << 30  # 4 GiB: a few thousand article PDFs
MAX_BYTES = 30 * 1024 * 1024  # larger than nearly every article PDF; a bound against a link to a whole book
TIMEOUT_S = 30.0


class FullTextError(RuntimeError):
    """A PDF that could not be fetched or read; the message names the link and why."""


class FullTextCache:
    """Fetches PDFs over HTTP(S) with httpx and keeps them on disk in a diskcache folder, keyed by link.

    Past `size_limit` bytes, each new PDF drops the least recently stored one.

    Args:
        folder: Where fetched PDFs are kept; created on the first fetch.
        max_bytes: Largest PDF accepted; a longer download is abandoned.
        timeout_s: Seconds to connect and between received bytes.
        user_agent: Sent with each request (some hosts refuse clients without one).
        size_limit: Most bytes the folder holds.
    """

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        max_bytes: int = MAX_BYTES,
        timeout_s: float = TIMEOUT_S,
        user_agent: str = "dspy-deepresearch (full text of open-access papers)",
        size_limit: int = CACHE_BYTES,
    ):
        self.folder = Path(folder or DEFAULT_CACHE).expanduser()
        if self.folder.exists() and not self.folder.is_dir():  # found now, not at the first fetch, mid-run
            raise ValueError(f"full-text cache {self.folder} is a file; pass a folder (--full-text-cache)")
        self.max_bytes, self.timeout_s, self.user_agent = max_bytes, timeout_s, user_agent
        self.size_limit = size_limit
        self._disk: diskcache.Cache | None = None

    @property
    def _cache(self) -> diskcache.Cache:
        if self._disk is None:  # opened on the first fetch: a run that reads no PDF creates no folder
            self._disk = diskcache.Cache(str(self.folder), size_limit=self.size_limit, cull_limit=1)
        return self._disk

    def __contains__(self, url: str) -> bool:
        return url in self._cache

    def fetch(self, url: str) -> bytes:
        """The PDF behind `url`, from the cache when it was fetched before.

        Raises:
            FullTextError: for a link that is not http(s), a failed request or status, a response that is
                not a PDF, or one over `max_bytes`.
        """
        cached = self._cache.get(url)
        if cached is not None:
            return cached
        if not url.startswith(("http://", "https://")):
            raise FullTextError(f"{url}: not an http(s) link")
        import httpx

        data = bytearray()
        try:
            with httpx.stream(
                "GET", url, timeout=self.timeout_s, follow_redirects=True, headers={"User-Agent": self.user_agent}
            ) as response:
                if response.status_code != 200:
                    raise FullTextError(f"{url}: HTTP {response.status_code}")
                if int(response.headers.get("content-length") or 0) > self.max_bytes:
                    raise FullTextError(f"{url}: larger than {self.max_bytes // 1024 // 1024} MiB")
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > self.max_bytes:
                        raise FullTextError(f"{url}: larger than {self.max_bytes // 1024 // 1024} MiB")
        except httpx.HTTPError as err:
            raise FullTextError(f"{url}: {type(err).__name__}: {err}") from err
        if not data.startswith(b"%PDF"):
            raise FullTextError(f"{url}: the response is not a PDF (an HTML landing page?)")
        self._cache.set(url, bytes(data))  # the entry points to the file once it is whole: no reader sees half
        return bytes(data)


class FullTextRetriever:
    """A retriever whose hits with an open-access PDF are replaced by that paper's best passages.

    Args:
        inner: Any retriever (search engines, a local corpus whose records carry `pdf_url`).
        cache: Where PDFs come from; a `FullTextCache` under the default folder when None.
        passages_per_paper: Passages of a paper returned in its place (ranked against the query).
        max_chars, overlap: Passage length and overlap (`deepresearch.retrievers.passages.split_passages`).

    Other attributes (`corpus`, `failures`, ...) are those of `inner`.
    """

    def __init__(
        self,
        inner: Any,
        cache: FullTextCache | None = None,
        *,
        passages_per_paper: int = 3,
        max_chars: int = MAX_CHARS,
        overlap: int = OVERLAP,
    ):
        if passages_per_paper < 1:
            raise ValueError(f"passages_per_paper must be >= 1, got {passages_per_paper}")
        self.inner, self.cache = inner, cache or FullTextCache()
        self.passages_per_paper, self.max_chars, self.overlap = passages_per_paper, max_chars, overlap
        self._papers: dict[str, list[Doc] | None] = {}  # link -> passages; None after a failure (told once)
        self._why: dict[str, str] = {}  # link -> why its PDF could not be had
        self._lock = threading.Lock()
        self._link_locks: dict[str, threading.Lock] = {}  # one per link: concurrent readers fetch it once

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def passages(self, doc: Doc) -> list[Doc] | None:
        """All passages of the paper behind `doc`'s PDF link (title and metadata from `doc`), or None when
        it has no link or its PDF cannot be had (warned once per link)."""
        url = (doc.metadata or {}).get("pdf_url")
        if not url:
            return None
        with self._lock:
            if url in self._papers:
                return self._papers[url]
            link_lock = self._link_locks.setdefault(url, threading.Lock())
        with link_lock:
            with self._lock:
                if url in self._papers:  # read by another thread while this one waited
                    return self._papers[url]
            return self._read(doc, url)

    def _read(self, doc: Doc, url: str) -> list[Doc] | None:
        try:
            paper = read_pdf(self.cache.fetch(url), url)
            meta = {k: v for k, v in (doc.metadata or {}).items() if k not in ("paper_id", "passage", "passages")}
            full = replace(doc, title=doc.title or paper.title, text=paper.text, metadata={**meta, "full_text": True})
            result: list[Doc] | None = passage_docs(full, self.max_chars, self.overlap) or None
        except (FullTextError, CorpusError) as err:
            logger.warning("full text of %s not read (%s); using its abstract", doc.doc_id, err)
            result = None
            with self._lock:
                self._why[url] = str(err)
        with self._lock:
            self._papers[url] = result
        return result

    def unread(self, doc: Doc) -> str:
        """Why `passages(doc)` gave nothing: no open-access link, or the fetch or read that failed (after a
        call to `passages`); empty when the paper was read."""
        url = (doc.metadata or {}).get("pdf_url")
        if not url:
            return "no open-access PDF link"
        with self._lock:
            if self._papers.get(url):
                return ""
            return self._why.get(url) or "the PDF holds no text"

    def expand(self, query: str, hits: list[Hit]) -> list[Hit]:
        """`hits` with each paper that has a readable PDF replaced by its best passages (same score and rank)."""
        out: list[Hit] = []
        for hit in hits:
            passages = self.passages(hit.doc)
            if not passages:
                out.append(hit)
                continue
            out.extend(
                Hit(doc=p, score=hit.score, rank=hit.rank)
                for p in best_passages(query, passages, self.passages_per_paper)
            )
        return out

    def read(self, hit: Hit, query: str, k: int | None = None) -> Hit:
        """`hit` with its text replaced by the paper's `k` passages best matching `query`, in text order,
        joined by blank lines; the hit itself when it has no readable PDF. The id stays the paper's: for a
        step that judges whole papers (ScholarGym's second look at an uncertain candidate)."""
        passages = self.passages(hit.doc)
        if not passages:
            return hit
        best = best_passages(query, passages, k or self.passages_per_paper)
        text = "\n\n".join(p.text for p in sorted(best, key=lambda p: p.metadata["passage"]))
        doc = replace(hit.doc, text=text, metadata={**hit.doc.metadata, "full_text": True})
        return Hit(doc=doc, score=hit.score, rank=hit.rank)

    @staticmethod
    def _papers_of(exclude: Collection[str]) -> set[str]:
        """Excluded passage ids `paper#n` exclude their paper (the search below knows only papers)."""
        return {i.rsplit(PASSAGE_SEP, 1)[0] if i.rsplit(PASSAGE_SEP, 1)[-1].isdigit() else i for i in exclude}

    def search(self, query: str, k: int = 10, **filters: Any) -> list[Hit]:
        if filters.get("exclude"):
            filters["exclude"] = self._papers_of(filters["exclude"]) | set(filters["exclude"])
        return self.expand(query, self.inner.search(query, k, **filters))

    async def asearch(self, query: str, k: int = 10, **filters: Any) -> list[Hit]:
        if filters.get("exclude"):
            filters["exclude"] = self._papers_of(filters["exclude"]) | set(filters["exclude"])
        hits = await search_async(self.inner, query, k, **filters)
        return await asyncio.to_thread(self.expand, query, hits)
