"""Exact top-k over a score vector, and ScholarGym's search filters as boolean masks.

Both are shared by every in-process backend, so BM25 and dense rank and filter the same way: score
descending, ties by corpus index (lower first); Hit.rank is the 1-based position in the filtered ranking.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from deepresearch.retrievers.types import Doc, Hit


def month_key(date: str | None) -> int:
    """`YYYY-MM[-DD]` as the integer YYYYMM (a bare year gives YYYY00); 0 when unknown."""
    if not date or not date[:4].isdigit():
        return 0
    month = date[5:7]
    return int(date[:4]) * 100 + (int(month) if len(month) == 2 and month.isdigit() else 0)


def top_k(scores: np.ndarray, k: int, offset: int = 0, *, min_score: float | None = None) -> np.ndarray:
    """Corpus indices of ranks offset+1 .. offset+k, by score descending then index ascending.

    Args:
        scores: One score per document; not modified.
        k: Page size.
        offset: Results to skip (earlier pages).
        min_score: Keep only documents scoring strictly above this (the dense retriever gives filtered-out
            documents -inf and passes -inf).

    Selection is exact: argpartition finds the cut-off score, and every document tied with it is kept
    before the final sort, so ties never depend on the partition's internal order.
    """
    need = offset + k
    eligible = scores.size if min_score is None else int(np.count_nonzero(scores > min_score))
    if eligible > need:
        # the need-th best score is above min_score here, so the cut alone applies both conditions
        cut = scores[np.argpartition(scores, scores.size - need)[scores.size - need :]].min()
        index = np.flatnonzero(scores >= cut)
    elif min_score is None:
        index = np.arange(scores.size)
    else:
        index = np.flatnonzero(scores > min_score)
    order = np.lexsort((index, -scores[index]))
    return index[order][offset:need]


# Threshold estimates read about n / 64 scores (at least MIN_SAMPLE, at most MAX_SAMPLE) in evenly
# spread blocks of BLOCK neighbours: in a large array, contiguous reads cost far less than scattered ones.
MIN_SAMPLE, MAX_SAMPLE, BLOCK = 1024, 8192, 64


def score_sample(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """A spread-out sample of `scores` (a copy, or the scores themselves when short); 0 where `mask` fails."""
    n_blocks, wanted = scores.size // BLOCK, min(MAX_SAMPLE, max(MIN_SAMPLE, scores.size // 64)) // BLOCK
    if n_blocks <= wanted:
        return scores if mask is None else np.where(mask, scores, 0.0)
    step = n_blocks // wanted
    sample = scores[: n_blocks * BLOCK].reshape(n_blocks, BLOCK)[::step].ravel()
    return (
        sample
        if mask is None
        else np.where(mask[: n_blocks * BLOCK].reshape(n_blocks, BLOCK)[::step].ravel(), sample, 0.0)
    )


def nth_largest(values: np.ndarray, n: int) -> float:
    """The n-th largest value (1 <= n <= values.size)."""
    return float(np.partition(values, values.size - n)[values.size - n])


def nth_largest_positive(values: np.ndarray, n: int) -> float:
    """The n-th largest value when at least n values are positive, else 0."""
    if np.count_nonzero(values) * 2 < values.size:  # numpy's introselect slows down on many equal values
        values = values[values > 0]
    return max(nth_largest(values, n), 0.0) if values.size >= n else 0.0


def best_among(index: np.ndarray, scores: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray]:
    """The `need` best of the documents `index` (ascending, with `scores`): score descending, then index."""
    if index.size > 4 * need:
        keep = scores >= nth_largest(scores, need)  # ties with the cut stay: never the partition's choice
        index, scores = index[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")[:need]  # stable, so ties keep index order
    return index[order], scores[order]


def best_positive(scores: np.ndarray, need: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Corpus indices and scores of the `need` best documents scoring above 0 that pass `mask`, best first.

    Exact like `top_k`, but the cut-off comes from a sample: the need-th best sampled score is at most
    the need-th best of all, so comparing with it keeps every winner and few others.
    """
    cut = nth_largest_positive(score_sample(scores, mask), need)
    index = (scores >= cut).nonzero()[0] if cut > 0 else (scores > 0).nonzero()[0]
    if mask is not None:
        index = index[mask[index]]
    return best_among(index, scores[index], need)


def ranked_hits(docs: Sequence[Doc], index: np.ndarray, scores: np.ndarray, offset: int) -> list[Hit]:
    """Hits for corpus indices `index` (already ranked) with their `scores`, numbered from offset + 1."""
    return [Hit(docs[i], s, rank) for rank, (i, s) in enumerate(zip(index.tolist(), scores.tolist()), start=offset + 1)]


def check_page(k: int, offset: int) -> None:
    if k < 1 or offset < 0:
        raise ValueError(f"k must be >= 1 and offset >= 0, got k={k}, offset={offset}")


class FilterIndex:
    """Per-document arrays for the filters of `passes_filters`, so a filter is a mask, not a loop.

    Args:
        corpus: A `Corpus` (or a `StoredCorpus`, whose month keys are read from disk): its `month_keys()`
            give the date filter, `index_of` the exclusion set, and its documents the categories (read on
            the first category filter only).
    """

    def __init__(self, corpus):
        self.size = len(corpus)
        self.index_of = corpus.index_of
        self.months = corpus.month_keys()
        self._docs = corpus
        self._categories: dict[str, np.ndarray] | None = None

    def _category_index(self) -> dict[str, np.ndarray]:
        if self._categories is None:
            members: dict[str, list[int]] = {}
            for i, d in enumerate(self._docs):
                cats = d.metadata.get("categories") or ()
                for c in cats.split() if isinstance(cats, str) else cats:
                    members.setdefault(str(c), []).append(i)
            self._categories = {c: np.asarray(v, dtype=np.int64) for c, v in members.items()}
        return self._categories

    def mask(
        self, exclude: Collection[str] = (), before: str | None = None, categories: Collection[str] = ()
    ) -> np.ndarray | None:
        """True for documents that pass; None when no filter is set."""
        if not exclude and not before and not categories:
            return None
        keep = np.ones(self.size, dtype=bool)
        if before:
            limit = month_key(before[:7])
            keep &= (self.months == 0) | (self.months <= limit)
        if categories:
            index = self._category_index()
            in_any = np.zeros(self.size, dtype=bool)
            for c in categories:
                if c in index:
                    in_any[index[c]] = True
            keep &= in_any
        if exclude:
            known = []
            for doc_id in exclude:
                try:
                    known.append(self.index_of(doc_id))
                except KeyError:
                    continue
            keep[np.asarray(known, dtype=np.int64)] = False
        return keep
