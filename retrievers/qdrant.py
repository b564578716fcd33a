"""A Qdrant backend: embedded local mode (a folder on disk) by default, or a Qdrant server for scale.

Each document is one point (id = corpus index) with a dense vector ("dense", cosine) and BM25 as a sparse
vector ("bm25"): the values are BM25's saturated term frequencies, and Qdrant's IDF modifier multiplies
in ln(1 + (N − n + 0.5)/(n + 0.5)) at query time, so sparse scores equal `BM25Retriever(method="lucene")`.
Term ids are the CRC-32 of the term, so no vocabulary has to be stored beside the collection.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Collection
from pathlib import Path

import numpy as np

from deepresearch.retrievers import embed
from deepresearch.retrievers.bm25 import doc_text
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.dense import dense_text
from deepresearch.retrievers.extras import require
from deepresearch.retrievers.ranking import check_page, month_key
from deepresearch.retrievers.scoring import tf_saturation
from deepresearch.retrievers.tokenize import Tokenizer, get_tokenizer, tokenizer_name
from deepresearch.retrievers.types import Hit, SyncSearchMixin

logger = logging.getLogger(__name__)

MODES = ("bm25", "dense", "hybrid")
MEMORY = ":memory:"  # path= for a collection held in memory (tests, small corpora)


def sparse_terms(tokens: list[str]) -> tuple[list[int], np.ndarray]:
    """Distinct term ids and their counts (repeated query terms count as often as they occur)."""
    counts = Counter(zlib.crc32(t.encode("utf-8")) for t in tokens)
    ids = sorted(counts)
    return ids, np.asarray([counts[i] for i in ids], dtype=np.float64)


class QdrantRetriever(SyncSearchMixin):
    """Search over a Qdrant collection holding the corpus, with the same protocol as the in-process backends.

    Args:
        corpus: The documents (loaded into the collection when it is new, or checked against it).
        path: Folder for Qdrant's embedded local mode, or ":memory:" for a collection held in memory.
        url: A Qdrant server URL (instead of `path`).
        collection: Collection name.
        mode: "bm25" (sparse), "dense", or "hybrid" (Qdrant's reciprocal-rank fusion of both).
        model: Encoder for the dense vectors (default all-MiniLM-L6-v2).
        embeddings: Precomputed normalised document embeddings, one row per document; without them the
            corpus is encoded, except for a new collection in mode "bm25", which then holds BM25 vectors only.
        tokenizer, k1, b, text_format: BM25 settings for the sparse vectors (recorded with the collection,
            and checked when it is reused).
        recreate: Drop and rebuild the collection even if it exists.
        depth: How many results each side contributes to the hybrid fusion.

    Raises:
        ValueError: for an unknown mode, neither or both of path and url, or a collection built from
            another corpus (rebuild with recreate=True).
        ConnectionError: when the server at `url` cannot be reached.
    """

    def __init__(
        self,
        corpus: Corpus,
        *,
        path: str | Path | None = None,
        url: str | None = None,
        collection: str = "deepresearch",
        mode: str = "hybrid",
        model: str | None = None,
        embeddings: np.ndarray | None = None,
        tokenizer: str | Tokenizer = "scholargym",
        k1: float = 1.5,
        b: float = 0.75,
        text_format: str = "scholargym",
        recreate: bool = False,
        batch_size: int = 256,
        depth: int = 100,
    ):
        QdrantClient = require("qdrant_client", "qdrant").QdrantClient
        if mode not in MODES:
            raise ValueError(f"unknown Qdrant mode {mode!r}; choose one of: {', '.join(MODES)}")
        if (path is None) == (url is None):
            raise ValueError(
                "pass exactly one of path= (embedded Qdrant in a folder, or ':memory:') or url= (a Qdrant server)"
            )
        doc_text("", "", text_format)
        self.corpus, self.mode, self.collection, self.depth = corpus, mode, collection, depth
        self.model = model or embed.DEFAULT_MODEL
        self.tokenize = get_tokenizer(tokenizer)
        self.k1, self.b, self.text_format = k1, b, text_format
        self.settings = {
            "model": self.model,
            "k1": k1,
            "b": b,
            "text_format": text_format,
            "tokenizer": tokenizer_name(tokenizer),
        }
        if url is not None:
            # reached first without the client's version check: for a server that is not there, that check
            # warns from a thread of its own after the one line below; a server that answers gets it
            probe = QdrantClient(url=url, check_compatibility=False)
            try:
                probe.get_collections()
            except Exception as err:
                raise ConnectionError(
                    f"cannot reach Qdrant at {url} ({type(err).__name__}); check the server "
                    f"is running and the URL and port are right"
                ) from err
            finally:
                probe.close()
            self.client = QdrantClient(url=url)
        elif str(path) == MEMORY:
            self.client = QdrantClient(location=MEMORY)
        else:
            assert path is not None  # exactly one of path and url (checked above)
            Path(path).mkdir(parents=True, exist_ok=True)
            self.client = QdrantClient(path=str(path))
        self._ensure_collection(embeddings, recreate, batch_size)

    def _ensure_collection(self, embeddings, recreate: bool, batch_size: int) -> None:
        from qdrant_client import models

        fingerprint = self.corpus.fingerprint()
        if self.client.collection_exists(self.collection) and not recreate:
            info = self.client.get_collection(self.collection)
            metadata = info.config.metadata or {}
            stored = metadata.get("corpus_fingerprint")
            if stored != fingerprint:
                raise ValueError(
                    f"Qdrant collection {self.collection!r} holds another corpus (fingerprint "
                    f"{str(stored)[:12]}, expected {fingerprint[:12]}); pass recreate=True to rebuild it"
                )
            changed = [k for k, v in self.settings.items() if k in metadata and metadata[k] != v]
            if changed:
                raise ValueError(
                    f"Qdrant collection {self.collection!r} was built with {changed[0]}="
                    f"{metadata[changed[0]]!r}, not {self.settings[changed[0]]!r}; pass recreate=True "
                    f"to rebuild it"
                )
            if self.mode != "bm25" and "dense" not in (info.config.params.vectors or {}):
                raise ValueError(
                    f"Qdrant collection {self.collection!r} holds BM25 vectors only, so it cannot serve "
                    f"mode {self.mode!r}; pass recreate=True to rebuild it with dense vectors"
                )
            return
        if self.client.collection_exists(self.collection):
            self.client.delete_collection(self.collection)
        if embeddings is None and self.mode != "bm25":
            embeddings = embed.encode([dense_text(d) for d in self.corpus], self.model)
        # a BM25-only collection without given embeddings skips encoding the corpus
        dense = (
            {}
            if embeddings is None
            else {"dense": models.VectorParams(size=int(embeddings.shape[1]), distance=models.Distance.COSINE)}
        )
        self.client.create_collection(
            self.collection,
            vectors_config=dense,
            sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
            metadata={"corpus_fingerprint": fingerprint, **self.settings},
        )
        tokens = [self.tokenize(doc_text(d.title, d.text, self.text_format)) for d in self.corpus]
        doc_len = np.asarray([len(t) for t in tokens], dtype=np.float64)
        avgdl = float(doc_len.mean())
        points = []
        for i, (doc, toks) in enumerate(zip(self.corpus, tokens)):
            ids, tf = sparse_terms(toks)
            values = tf_saturation(tf, np.full(tf.shape, doc_len[i]), avgdl, self.k1, self.b)
            cats = doc.metadata.get("categories") or ()
            payload = {
                "doc_id": doc.doc_id,
                "published_month": month_key(doc.published),
                "categories": cats.split() if isinstance(cats, str) else list(cats),
            }
            vector: dict[str, models.Vector] = {"bm25": models.SparseVector(indices=ids, values=values.tolist())}
            if embeddings is not None:
                vector["dense"] = np.asarray(embeddings[i], dtype=np.float32).tolist()
            points.append(models.PointStruct(id=i, payload=payload, vector=vector))
            if len(points) == batch_size:
                self.client.upsert(self.collection, points)
                points = []
        if points:
            self.client.upsert(self.collection, points)

    def _filter(self, exclude: Collection[str], before: str | None, categories: Collection[str]):
        from qdrant_client import models

        must: list[models.Condition] = []
        must_not: list[models.Condition] = []
        if before:
            must.append(
                models.Filter(
                    should=[
                        models.FieldCondition(key="published_month", range=models.Range(lte=month_key(before[:7]))),
                        models.FieldCondition(key="published_month", match=models.MatchValue(value=0)),
                    ]
                )
            )
        if categories:
            must.append(models.FieldCondition(key="categories", match=models.MatchAny(any=list(categories))))
        known: list[models.ExtendedPointId] = [self.corpus.index_of(d) for d in exclude if d in self.corpus]
        if known:
            must_not.append(models.HasIdCondition(has_id=known))
        return models.Filter(must=must or None, must_not=must_not or None) if must or must_not else None

    def _sparse_query(self, query: str):
        from qdrant_client import models

        ids, counts = sparse_terms(self.tokenize(query))
        return models.SparseVector(indices=ids, values=counts.tolist()) if ids else None

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
        from qdrant_client import models

        check_page(k, offset)
        flt = self._filter(exclude, before, categories)
        limit = offset + k
        if self.mode == "bm25":
            sparse = self._sparse_query(query)
            if sparse is None:
                return []
            points = self.client.query_points(
                self.collection, query=sparse, using="bm25", query_filter=flt, limit=limit, with_payload=False
            ).points
            points = [p for p in points if p.score > 0]
        else:
            dense = embed.encode([query], self.model)[0].tolist()
            if self.mode == "dense":
                points = self.client.query_points(
                    self.collection, query=dense, using="dense", query_filter=flt, limit=limit, with_payload=False
                ).points
            else:
                depth = max(self.depth, limit)
                prefetch = [models.Prefetch(query=dense, using="dense", filter=flt, limit=depth)]
                sparse = self._sparse_query(query)
                if sparse is not None:
                    prefetch.append(models.Prefetch(query=sparse, using="bm25", filter=flt, limit=depth))
                points = self.client.query_points(
                    self.collection,
                    prefetch=prefetch,
                    query=models.FusionQuery(fusion=models.Fusion.RRF),
                    limit=limit,
                    with_payload=False,
                ).points
        ranked = sorted(points, key=lambda p: (-p.score, int(p.id)))[offset:limit]
        return [
            Hit(doc=self.corpus[int(p.id)], score=float(p.score), rank=offset + n)
            for n, p in enumerate(ranked, start=1)
        ]

    def close(self) -> None:
        self.client.close()
