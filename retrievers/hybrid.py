"""Reciprocal-rank fusion of any retrievers (Cormack, Clarke and Büttcher, SIGIR 2009)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence

from deepresearch.retrievers.ranking import check_page
from deepresearch.retrievers.types import Hit, Retriever


def rrf_fuse(
    rankings: Sequence[Sequence[Hit]], weights: Sequence[float], k_rrf: float = 60.0
) -> list[tuple[str, float]]:
    """Fused (doc id, score) pairs, best first: score = Σ weight / (k_rrf + rank).

    Ties go to the document with the better best rank, then to the smaller doc id, so fusion is
    deterministic whatever order the rankings arrive in.
    """
    score: dict[str, float] = {}
    best: dict[str, int] = {}
    for hits, weight in zip(rankings, weights):
        for hit in hits:
            doc_id = hit.doc.doc_id
            score[doc_id] = score.get(doc_id, 0.0) + weight / (k_rrf + hit.rank)
            best[doc_id] = min(best.get(doc_id, hit.rank), hit.rank)
    return sorted(score.items(), key=lambda item: (-item[1], best[item[0]], item[0]))


def rrf_page(
    rankings: Sequence[Sequence[Hit]], weights: Sequence[float], k_rrf: float, k: int, offset: int
) -> list[Hit]:
    """Ranks offset + 1 .. offset + k of the fused rankings (`rrf_fuse`), as hits scored by their fused score."""
    docs = {h.doc.doc_id: h.doc for hits in rankings for h in hits}
    fused = rrf_fuse(rankings, weights, k_rrf)[offset : offset + k]
    return [Hit(doc=docs[doc_id], score=score, rank=offset + n) for n, (doc_id, score) in enumerate(fused, start=1)]


class HybridRetriever:
    """Fuses the rankings of several retrievers with weighted reciprocal-rank fusion.

    Args:
        retrievers: Named retrievers (e.g. {"bm25": ..., "dense": ...}) or a sequence of them.
        weights: One weight per retriever (a mapping by name, or a sequence); default 1 each.
        k_rrf: The RRF constant; larger values flatten the difference between top ranks.
        depth: How many results each retriever contributes (at least offset + k).

    Raises:
        ValueError: for no retrievers, unknown or missing weights, or a negative weight.
    """

    def __init__(
        self,
        retrievers: Mapping[str, Retriever] | Sequence[Retriever],
        weights: Mapping[str, float] | Sequence[float] | None = None,
        k_rrf: float = 60.0,
        depth: int = 100,
    ):
        named = dict(retrievers) if isinstance(retrievers, Mapping) else {str(i): r for i, r in enumerate(retrievers)}
        if not named:
            raise ValueError("hybrid retrieval needs at least one retriever")
        if weights is None:
            weights = {name: 1.0 for name in named}
        elif not isinstance(weights, Mapping):
            if len(weights) != len(named):
                raise ValueError(f"got {len(weights)} weights for {len(named)} retrievers; pass one per retriever")
            weights = dict(zip(named, weights))
        unknown = set(weights) - set(named)
        if unknown:
            raise ValueError(f"weight for unknown retriever {sorted(unknown)[0]!r}; known: {', '.join(named)}")
        self.weights = {name: float(weights.get(name, 1.0)) for name in named}
        if any(w < 0 for w in self.weights.values()):
            raise ValueError(f"RRF weights must be >= 0, got {self.weights}")
        self.retrievers = named
        self.k_rrf, self.depth = k_rrf, depth

    def search(
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
        depth = max(self.depth, offset + k)
        rankings = [
            r.search(query, depth, exclude=exclude, before=before, categories=categories)
            for r in self.retrievers.values()
        ]
        return rrf_page(rankings, list(self.weights.values()), self.k_rrf, k, offset)

    async def asearch(self, query: str, k: int = 10, **filters) -> list[Hit]:
        offset = filters.pop("offset", 0)
        check_page(k, offset)
        depth = max(self.depth, offset + k)
        rankings = await asyncio.gather(*(r.asearch(query, depth, **filters) for r in self.retrievers.values()))
        return rrf_page(rankings, list(self.weights.values()), self.k_rrf, k, offset)
