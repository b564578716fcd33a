"""Several sources as one retriever: search engines (and a local corpus) fused by reciprocal rank.

`SourcesRetriever` asks every source at once, joins the records of the same paper across sources (by DOI,
arXiv id, PubMed id or normalised title: `deepresearch.retrievers.engines.dedup`), and fuses the rankings with
`deepresearch.retrievers.hybrid.rrf_fuse`. A source that fails is left out of that search with one log line naming it
(`openalex: search failed (connection refused at ...); continuing with the other sources`), recorded in
`failures` for the run's trace; after a network failure (refused, DNS, timeout, 429 or 5xx after the
retries) the source is skipped for `down_for_s` seconds, so a run without a network does not wait for
every search's retries. When every source fails, the search raises `SourcesFailed` naming each one, and the
caller handles it as any failed search.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from deepresearch.retrievers.engines.base import AsyncSearch
from deepresearch.retrievers.engines.client import EngineError
from deepresearch.retrievers.engines.dedup import ID_PREFIXES, dedup_keys, excluded_keys, group_docs, merge_docs
from deepresearch.retrievers.hybrid import rrf_page
from deepresearch.retrievers.ranking import check_page
from deepresearch.retrievers.types import Doc, Hit, Retriever, search_async

logger = logging.getLogger(__name__)

DOWN_FOR_S = 120.0
SOURCE_TIMEOUT_S = 45.0


class SourcesFailed(RuntimeError):
    """Every source of a search failed; the message names each source and why.

    Attributes:
        provider: The sources, joined by `+` (`openalex+arxiv`): what failed, for one-line explanations of
            errors that name where they came from.
    """

    def __init__(self, message: str, sources: Collection[str] = ()):
        super().__init__(message)
        self.provider = "+".join(sources) or "the search engines"


def failure_reason(err: BaseException) -> str:
    """One line: an engine's reason, or the error's type and first line."""
    if isinstance(err, EngineError):
        return err.reason
    text = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class SourcesRetriever(AsyncSearch):
    """Search engines (and optionally a local corpus) fused with weighted reciprocal-rank fusion.

    Args:
        parts: Named retrievers, in priority order (e.g. {"corpus": bm25, "openalex": ..., "arxiv": ...}).
        weights: One RRF weight per part (a mapping by name); default 1 each.
        local: The name of the part that searches a local corpus: a paper it holds keeps the corpus's id.
        k_rrf: The RRF constant.
        down_for_s: Seconds a source is skipped after a network failure (0: never skipped).
        timeout_s: Seconds one source may take for one search (its retries included) before the search goes on
            without it; below the run's search timeout (60 s), so a slow source never costs the others' hits.

    Raises:
        ValueError: for no parts, or a weight for an unknown part.
    """

    def __init__(
        self,
        parts: Mapping[str, Retriever],
        *,
        weights: Mapping[str, float] | None = None,
        local: str | None = None,
        k_rrf: float = 60.0,
        down_for_s: float = DOWN_FOR_S,
        timeout_s: float | None = SOURCE_TIMEOUT_S,
    ):
        if not parts:
            raise ValueError("nothing to search: pass at least one source or a corpus")
        unknown = set(weights or {}) - set(parts)
        if unknown:
            raise ValueError(f"weight for unknown source {min(unknown)!r}; known: {', '.join(parts)}")
        if local is not None and local not in parts:
            raise ValueError(f"local part {local!r} is not one of: {', '.join(parts)}")
        self.parts = dict(parts)
        self.weights = {name: float((weights or {}).get(name, 1.0)) for name in self.parts}
        self.local, self.k_rrf, self.down_for_s, self.timeout_s = local, k_rrf, down_for_s, timeout_s
        self.failures: list[dict[str, Any]] = []  # every failed or skipped source search, for the trace
        self._down: dict[str, tuple[float, str]] = {}  # source -> (skipped until, why)
        self._warned: dict[str, str] = {}  # source -> the reason last logged as a warning
        self._known: dict[str, set[str]] = {}  # id of a paper returned -> every key it was found under
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def describe(self) -> list[dict[str, Any]]:
        """The sources, as JSON-able records (an engine's `describe()`, else its name)."""
        return [
            {"name": n, **(p.describe() if n != self.local and hasattr(p, "describe") and callable(p.describe) else {})}
            for n, p in self.parts.items()
        ]

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
        exclude, banned = self._expand(set(exclude or ()))
        filters = {"exclude": exclude, "before": before, "categories": tuple(categories or ())}
        names = list(self.parts)
        outcomes = await asyncio.gather(*(self._one(name, query, offset + k, filters) for name in names))
        rankings = {name: hits for name, (hits, _) in zip(names, outcomes) if hits is not None}
        failed = {name: why for name, (hits, why) in zip(names, outcomes) if hits is None}
        if not rankings:
            if len(failed) == 1:
                name, why = next(iter(failed.items()))
                raise SourcesFailed(f"{name}: search failed ({why})", failed)
            raise SourcesFailed("every source failed: " + "; ".join(f"{n}: {w}" for n, w in failed.items()), failed)
        for name, why in failed.items():
            self._report(name, why)
        return self._fuse(rankings, k, offset, exclude, banned)

    def _expand(self, exclude: set[str]) -> tuple[set[str], set[str]]:
        """The excluded ids with every identifier known for the papers they name, and all their keys.

        A paper returned earlier under one id (its DOI) may come back from an engine that knows it by another
        (`arxiv:<id>`); the keys remembered from earlier searches exclude it by any of them.
        """
        banned = excluded_keys(exclude)
        with self._lock:
            for doc_id, keys in self._known.items():
                if doc_id in exclude or keys & banned:
                    banned |= keys
        ids = {key.removeprefix("doi:") for key in banned if key.startswith(ID_PREFIXES)}
        return exclude | ids, banned

    async def _one(self, name: str, query: str, depth: int, filters: Mapping[str, Any]) -> tuple[list[Hit] | None, str]:
        now = time.monotonic()
        with self._lock:
            down = self._down.get(name)
        if down is not None and now < down[0]:
            why = f"skipped: down since a failure within the last {self.down_for_s:g}s ({down[1]})"
            self._record(name, query, why, skipped=True)
            return None, why
        try:
            search = search_async(self.parts[name], query, depth, offset=0, **filters)
            if self.timeout_s is None:
                return await search, ""
            return await asyncio.wait_for(search, self.timeout_s), ""
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:  # our own limit (the source may be queued behind its rate limit): not "down"
            why = f"no answer within {self.timeout_s:g}s"
            self._record(name, query, why)
            return None, why
        except Exception as err:  # one source's failure is this search's problem only
            why = failure_reason(err)
            if isinstance(err, EngineError) and err.transient and self.down_for_s > 0:
                with self._lock:
                    self._down[name] = (time.monotonic() + self.down_for_s, why)
            self._record(name, query, why)
            return None, why

    def _record(self, name: str, query: str, why: str, skipped: bool = False) -> None:
        elapsed_s = round(time.monotonic() - self._t0, 3)
        with self._lock:
            self.failures.append(
                {"source": name, "query": query, "error": why, "skipped": skipped, "elapsed_s": elapsed_s}
            )

    def _report(self, name: str, why: str) -> None:
        """The one line of a failed source: a warning the first time (or when the reason changes), then INFO."""
        line = f"{name}: search failed ({why}); continuing with the other sources"
        with self._lock:
            first = self._warned.get(name) != why and not why.startswith("skipped: ")
            if first:
                self._warned[name] = why
        logger.log(logging.WARNING if first else logging.INFO, "%s", line)

    def _fuse(
        self, rankings: Mapping[str, Sequence[Hit]], k: int, offset: int, exclude: set[str], banned: set[str]
    ) -> list[Hit]:
        order = {name: n for n, name in enumerate(self.parts)}
        flat = [(name, hit) for name, hits in rankings.items() for hit in hits]
        groups = group_docs([hit.doc for _, hit in flat])
        canonical: dict[int, str] = {}
        merged: dict[str, Doc] = {}
        for group in groups:
            members = sorted(group, key=lambda i: (flat[i][1].rank, order[flat[i][0]]))
            local_ids = [flat[i][1].doc.doc_id for i in members if flat[i][0] == self.local]
            doc = merge_docs([flat[i][1].doc for i in members], keep_id=local_ids[0] if local_ids else None)
            member_ids = {flat[i][1].doc.doc_id for i in members}
            keys = set().union(*(dedup_keys(flat[i][1].doc) for i in members), dedup_keys(doc))
            with self._lock:
                self._known.setdefault(doc.doc_id, set()).update(keys)
            if member_ids & exclude or doc.doc_id in exclude or keys & banned:
                continue
            merged.setdefault(doc.doc_id, doc)
            for i in group:
                canonical[i] = doc.doc_id
        fused_rankings, weights = [], []
        position = 0
        for name, hits in rankings.items():
            seen: set[str] = set()
            ranking = []
            for hit in hits:
                doc_id = canonical.get(position)
                position += 1
                if doc_id is None or doc_id in seen:
                    continue
                seen.add(doc_id)
                ranking.append(Hit(doc=merged[doc_id], score=hit.score, rank=hit.rank))
            fused_rankings.append(ranking)
            weights.append(self.weights[name])
        return rrf_page(fused_rankings, weights, self.k_rrf, k, offset)

    def __repr__(self) -> str:
        return f"SourcesRetriever({', '.join(self.parts)})"
