"""BM25 (Okapi) over a Corpus."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from rank_bm25 import BM25Okapi

from retrievers.corpus import Corpus
from retrievers.tokenize import Tokenizer, get_tokenizer
from retrievers.types import Hit, SyncSearchMixin, passes_filters


def doc_text(title: str, text: str) -> str:
    """The text a document is indexed under (ScholarGym's `title: … abstract: …` form)."""
    return f"title: {title} abstract: {text}"


class BM25Retriever(SyncSearchMixin):
    """Okapi BM25 (k1, b, epsilon as in rank-bm25's BM25Okapi).

    Args:
        corpus: The documents to index.
        k1: Term-frequency saturation.
        b: Length normalisation.
        epsilon: Floor for negative IDF, as a fraction of the mean IDF.
        tokenizer: A tokenizer name (`words`, `scholargym`) or a callable.

    Ranking is score descending, ties by corpus order; documents scoring 0 are not returned.
    """

    def __init__(self, corpus: Corpus, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25,
                 tokenizer: str | Tokenizer = "words"):
        self.corpus = corpus
        self.tokenize = get_tokenizer(tokenizer)
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._bm25 = BM25Okapi([self.tokenize(doc_text(d.title, d.text)) for d in corpus], k1=k1, b=b, epsilon=epsilon)

    def scores(self, query: str) -> np.ndarray:
        return np.asarray(self._bm25.get_scores(self.tokenize(query)), dtype=np.float64)

    def search(self, query: str, k: int = 10, *, offset: int = 0, exclude: Collection[str] = (),
               before: str | None = None, categories: Collection[str] = ()) -> list[Hit]:
        if k < 1 or offset < 0:
            raise ValueError(f"k must be >= 1 and offset >= 0, got k={k}, offset={offset}")
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")
        hits: list[Hit] = []
        position = 0
        for i in order:
            if scores[i] <= 0 or len(hits) == k:
                break
            doc = self.corpus[int(i)]
            if not passes_filters(doc, exclude, before, categories):
                continue
            position += 1
            if position > offset:
                hits.append(Hit(doc=doc, score=float(scores[i]), rank=position))
        return hits
