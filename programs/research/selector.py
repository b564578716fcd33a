"""HERO's submodular query selection: keep k of n candidate queries, relevant and diverse.

f_α(Q) = Σ_j max(α·sim(e_0, e_j), max_{i∈Q} sim(e_j, e_i)) is a facility-location function: every
candidate j is "covered" by its closest selected query, with a floor of α times its similarity to the
anchor (the question, or a task's query for enrichment). It is monotone submodular, so greedy choice
is within (1 - 1/e) of the best normalised gain. Note: raising α makes candidates
near the anchor count as already covered, which pushes the choice away from the anchor.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence

import numpy as np

from deepresearch.retrievers import embed as embeddings

STRATEGIES = ("submodular", "random", "first_k")


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def facility_location(similarity: np.ndarray, relevance: np.ndarray, alpha: float, chosen: Sequence[int]) -> float:
    """f_α(Q) for the candidates `chosen`, given pairwise and anchor cosine similarities."""
    cover = alpha * relevance
    for i in chosen:
        cover = np.maximum(cover, similarity[i])
    return float(cover.sum())


def _gain(cover: np.ndarray, row: np.ndarray) -> float:
    # Rounded so that equal gains compare equal in both greedy variants (ties go to the lowest index).
    return round(float(np.maximum(cover, row).sum() - cover.sum()), 10)


def greedy(similarity: np.ndarray, relevance: np.ndarray, alpha: float, k: int) -> list[int]:
    """Indices in selection order; each step takes the largest gain, ties to the lowest index."""
    n = len(relevance)
    cover = alpha * relevance
    chosen: list[int] = []
    for _ in range(min(k, n)):
        gains = [(-_gain(cover, similarity[i]), i) for i in range(n) if i not in chosen]
        best = min(gains)[1]
        chosen.append(best)
        cover = np.maximum(cover, similarity[best])
    return chosen


def lazy_greedy(similarity: np.ndarray, relevance: np.ndarray, alpha: float, k: int) -> list[int]:
    """The same selection as `greedy`, re-evaluating only the candidate whose stale bound is on top."""
    n = len(relevance)
    cover = alpha * relevance
    heap = [(-_gain(cover, similarity[i]), i, 0) for i in range(n)]
    heapq.heapify(heap)
    chosen: list[int] = []
    while heap and len(chosen) < min(k, n):
        neg_gain, i, stamp = heapq.heappop(heap)
        if stamp == len(chosen):
            chosen.append(i)
            cover = np.maximum(cover, similarity[i])
            continue
        heapq.heappush(heap, (-_gain(cover, similarity[i]), i, len(chosen)))
    return chosen


def select_indices(
    candidates: np.ndarray, anchor: np.ndarray, k: int, alpha: float, strategy: str = "submodular", seed: int = 0
) -> list[int]:
    """Chooses k of the candidate embeddings (rows). With k >= n every index is returned in input order.

    Args:
        candidates: (n, d) embeddings; normalised here.
        anchor: (d,) embedding of the anchor text.
        k: How many to keep.
        alpha: Weight of the anchor floor, in [0, 1].
        strategy: `submodular` (greedy facility location), `random` (seeded, the NoSubmodular
            ablation) or `first_k`.
        seed: Seed of `random`.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown selection strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    n = len(candidates)
    if k >= n:
        return list(range(n))
    if strategy == "first_k":
        return list(range(k))
    if strategy == "random":
        return random.Random(seed).sample(range(n), k)
    e = _normalise(candidates)
    e0 = _normalise(anchor)
    return greedy(e @ e.T, e @ e0, alpha, k)


def select(
    texts: list[str],
    anchor: str,
    k: int,
    alpha: float,
    strategy: str = "submodular",
    seed: int = 0,
) -> list[int]:
    """Indices of the k texts to keep, in selection order. Embeds the texts and the anchor (query text
    only) with `deepresearch.retrievers.embed.encode` (all-MiniLM-L6-v2)."""
    if k >= len(texts) or strategy != "submodular":
        return select_indices(np.zeros((len(texts), 1)), np.zeros(1), k, alpha, strategy, seed)
    # looked up at call time, so a replaced encoder (a test's spy) is the one used
    vectors = np.asarray(embeddings.encode([anchor, *texts]))
    return select_indices(vectors[1:], vectors[0], k, alpha, strategy, seed)
