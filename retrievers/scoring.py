"""BM25 formulas as small pure numpy functions.

Okapi BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009),
in the two IDF forms in common use.
"""

from __future__ import annotations

import numpy as np


def idf_okapi(doc_freq: np.ndarray, n_docs: int, epsilon: float) -> np.ndarray:
    """rank-bm25's BM25Okapi IDF: ln(N - n + 0.5) - ln(n + 0.5), negatives floored.

    A negative IDF (a term in more than half the documents) becomes epsilon times the mean raw IDF over
    the vocabulary; an IDF of exactly 0 (n = N/2) stays 0.
    """
    df = doc_freq.astype(np.float64)
    raw = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    floor = epsilon * raw.mean() if raw.size else 0.0
    return np.where(raw < 0, floor, raw)


def idf_lucene(doc_freq: np.ndarray, n_docs: int, epsilon: float = 0.0) -> np.ndarray:
    """Lucene's (and Elasticsearch's) IDF: ln(1 + (N - n + 0.5) / (n + 0.5)), never negative."""
    df = doc_freq.astype(np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def tf_saturation(tf: np.ndarray, doc_len: np.ndarray, avgdl: float, k1: float, b: float) -> np.ndarray:
    """tf·(k1 + 1) / (tf + k1·(1 − b + b·|d|/avgdl)), the term-frequency part of BM25."""
    tf = tf.astype(np.float64)
    norm = k1 * (1.0 - b + b * doc_len.astype(np.float64) / avgdl) if avgdl > 0 else k1 * (1.0 - b)
    return tf * (k1 + 1.0) / (tf + norm)


IDF = {"okapi": idf_okapi, "lucene": idf_lucene}
