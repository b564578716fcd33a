"""BM25 over a Corpus, computed on a sparse term-by-document matrix of precomputed weights.

Scores equal rank-bm25's `BM25Okapi` (method "okapi"); a query is a sum of the matrix rows of its
terms, each row counted as often as the term repeats in the query.
"""

from __future__ import annotations

import functools
import json
import logging
from array import array
from collections.abc import Collection, Iterable
from pathlib import Path

import numpy as np
from scipy import sparse

from retrievers.corpus import Corpus
from retrievers.ranking import FilterIndex, check_page, to_hits, top_k
from retrievers.scoring import IDF, tf_saturation
from retrievers.tokenize import Tokenizer, get_tokenizer, tokenizer_name
from retrievers.types import Hit, SyncSearchMixin

logger = logging.getLogger(__name__)

# How a document becomes the text BM25 indexes. "scholargym" is the reference's form (spec 004 §2.1).
TEXT_FORMATS = {"scholargym": "title: {title} abstract: {text}", "plain": "{title} {text}"}


def doc_text(title: str, text: str, text_format: str = "scholargym") -> str:
    """The text a document is indexed under (default: ScholarGym's `title: … abstract: …` form)."""
    if text_format not in TEXT_FORMATS:
        raise ValueError(f"unknown text format {text_format!r}; choose one of: {', '.join(TEXT_FORMATS)}")
    return TEXT_FORMATS[text_format].format(title=title, text=text)


def term_doc_counts(token_lists: Iterable[list[str]], n_docs: int) -> tuple[dict[str, int], sparse.csr_matrix, np.ndarray]:
    """Vocabulary (term -> row, first-seen order), the term-by-document count matrix and document lengths."""
    vocab: dict[str, int] = {}
    term_ids = array("i")
    doc_len = np.zeros(n_docs, dtype=np.int64)
    for i, tokens in enumerate(token_lists):
        term_ids.extend([vocab.setdefault(t, len(vocab)) for t in tokens])
        doc_len[i] = len(tokens)
    rows = np.frombuffer(term_ids, dtype=np.int32)
    cols = np.repeat(np.arange(n_docs, dtype=np.int32), doc_len)
    counts = sparse.coo_matrix((np.ones(rows.size, dtype=np.int32), (rows, cols)),
                               shape=(len(vocab), n_docs)).tocsr()  # duplicates summed: data = tf
    counts.sort_indices()
    return vocab, counts, doc_len


def bm25_weights(counts: sparse.csr_matrix, doc_len: np.ndarray, k1: float, b: float, epsilon: float,
                 method: str = "okapi", dtype=np.float64) -> sparse.csr_matrix:
    """The matrix of idf(t)·saturated tf(t, d), same sparsity as `counts`."""
    n_docs = counts.shape[1]
    doc_freq = np.diff(counts.indptr)
    idf = IDF[method](doc_freq, n_docs, epsilon)
    avgdl = float(doc_len.mean()) if n_docs else 0.0
    tf_part = tf_saturation(counts.data, doc_len[counts.indices], avgdl, k1, b)
    data = (np.repeat(idf, doc_freq) * tf_part).astype(dtype)
    return sparse.csr_matrix((data, counts.indices, counts.indptr), shape=counts.shape)


class BM25Retriever(SyncSearchMixin):
    """Okapi BM25 (k1, b, epsilon as in rank-bm25's BM25Okapi) on a sparse matrix.

    Args:
        corpus: The documents to index.
        k1: Term-frequency saturation.
        b: Length normalisation.
        epsilon: Floor for negative IDF, as a fraction of the mean IDF (method "okapi" only).
        tokenizer: A tokenizer name (`words`, `scholargym`, `english`) or a callable.
        method: "okapi" (rank-bm25's IDF with its floor) or "lucene" (Lucene's non-negative IDF).
        text_format: How title and text are joined before tokenizing (`scholargym` or `plain`).
        dtype: Float type of the stored weights; float64 keeps scores within 1e-6 of rank-bm25.

    Ranking is score descending, ties by corpus order; documents scoring 0 are not returned.

    Example:
        >>> BM25Retriever(corpus, tokenizer="scholargym").search("sparse attention", k=5)  # doctest: +SKIP
    """

    def __init__(self, corpus: Corpus, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25,
                 tokenizer: str | Tokenizer = "words", *, method: str = "okapi",
                 text_format: str = "scholargym", dtype=np.float64, _matrix=None):
        if method not in IDF:
            raise ValueError(f"unknown BM25 method {method!r}; choose one of: {', '.join(IDF)}")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        doc_text("", "", text_format)
        self.corpus = corpus
        self.tokenizer = tokenizer
        self.tokenize = get_tokenizer(tokenizer)
        self.k1, self.b, self.epsilon, self.method, self.text_format = k1, b, epsilon, method, text_format
        if _matrix is None:
            tokens = (self.tokenize(doc_text(d.title, d.text, text_format)) for d in corpus)
            self.vocab, counts, self.doc_len = term_doc_counts(tokens, len(corpus))
            self.weights = bm25_weights(counts, self.doc_len, k1, b, epsilon, method, dtype)
        else:
            self.vocab, self.weights, self.doc_len = _matrix

    @functools.cached_property
    def filters(self) -> FilterIndex:
        return FilterIndex(self.corpus, self.corpus.index_of)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (float64, corpus order)."""
        ids = [i for i in map(self.vocab.get, self.tokenize(query)) if i is not None]
        n_docs = self.weights.shape[1]
        if not ids:
            return np.zeros(n_docs)
        terms, repeats = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        indptr, indices, data = self.weights.indptr, self.weights.indices, self.weights.data
        out = np.zeros(n_docs)
        for term, repeat in zip(terms.tolist(), repeats.tolist()):
            start, end = indptr[term], indptr[term + 1]
            # per-term np.add.at measured faster than one bincount over the concatenated postings
            np.add.at(out, indices[start:end], data[start:end] * repeat if repeat > 1 else data[start:end])
        return out

    def _filtered_scores(self, query: str, exclude, before, categories) -> np.ndarray:
        scores = self.scores(query)
        mask = self.filters.mask(exclude, before, categories)
        return scores if mask is None else np.where(mask, scores, 0.0)

    def search(self, query: str, k: int = 10, *, offset: int = 0, exclude: Collection[str] = (),
               before: str | None = None, categories: Collection[str] = ()) -> list[Hit]:
        check_page(k, offset)
        scores = self._filtered_scores(query, exclude, before, categories)
        return to_hits(self.corpus, scores, top_k(scores, k, offset, min_score=0.0), offset)

    def full_ranking(self, query: str, *, exclude: Collection[str] = (), before: str | None = None,
                     categories: Collection[str] = ()) -> list[Hit]:
        """Every document scoring above 0 after the filters, best first (spec 004 Avg.Distance)."""
        scores = self._filtered_scores(query, exclude, before, categories)
        n_positive = int(np.count_nonzero(scores > 0))
        if n_positive == 0:
            return []
        return to_hits(self.corpus, scores, top_k(scores, n_positive, 0, min_score=0.0), 0)

    def params(self) -> dict:
        """The settings an index records; raises for an unregistered tokenizer, which cannot be saved."""
        name = tokenizer_name(self.tokenizer)
        if name is None:
            raise ValueError("cannot save a BM25 index built with an unregistered tokenizer callable; "
                             "add it to retrievers.tokenize.TOKENIZERS or pass a tokenizer name")
        return {"k1": self.k1, "b": self.b, "epsilon": self.epsilon, "method": self.method,
                "tokenizer": name, "text_format": self.text_format, "dtype": str(self.weights.dtype),
                "vocabulary": len(self.vocab)}

    def save(self, folder: str | Path) -> dict:
        """Writes `bm25.json`, `vocab.json` and `bm25.npz` into `folder`; returns the settings."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        params = self.params()
        (folder / "bm25.json").write_text(json.dumps(params, indent=2), encoding="utf-8")
        (folder / "vocab.json").write_text(json.dumps(list(self.vocab), ensure_ascii=False), encoding="utf-8")
        np.savez(folder / "bm25.npz", indptr=self.weights.indptr, indices=self.weights.indices,
                 data=self.weights.data, doc_len=self.doc_len)
        return params

    @classmethod
    def load(cls, folder: str | Path, corpus: Corpus) -> BM25Retriever:
        """Reads what `save` wrote; `corpus` must be the one the index was built from."""
        folder = Path(folder)
        params = json.loads((folder / "bm25.json").read_text(encoding="utf-8"))
        terms = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        with np.load(folder / "bm25.npz") as arrays:
            n_docs = arrays["doc_len"].size
            if n_docs != len(corpus):
                raise ValueError(f"BM25 index in {folder} has {n_docs} documents but the corpus has "
                                 f"{len(corpus)}; rebuild the index with `deepresearch index`")
            weights = sparse.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                                        shape=(len(terms), n_docs))
            doc_len = arrays["doc_len"]
        vocab = {t: i for i, t in enumerate(terms)}
        return cls(corpus, params["k1"], params["b"], params["epsilon"], params["tokenizer"],
                   method=params["method"], text_format=params["text_format"],
                   _matrix=(vocab, weights, doc_len))
