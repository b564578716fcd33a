"""What one BM25 query allocates: the scores, one float64 per document, and little else.

The benchmark (benchmarks/bench_index.py, scale part) measures the memory of opening and querying at
570,205 documents against bm25s; these tests hold the structure that figure rests on, on a corpus small
enough to build in seconds, with tracemalloc (numpy reports its arrays to it).
"""

import tracemalloc

import numpy as np
import pytest

from deepresearch.retrievers import BM25Retriever
from deepresearch.retrievers import bm25 as bm25_module
from tests.retrievers.test_bm25 import zipf_corpus


@pytest.fixture(scope="module")
def zipf_bm25():
    return BM25Retriever(zipf_corpus(60_000, 3000), method="lucene", text_format="plain")


def query_peak(bm25, query, k=10):
    """Peak bytes traced while `bm25` answers `query`, and its hits."""
    tracemalloc.start()
    try:
        hits = bm25.search(query, k)
        return tracemalloc.get_traced_memory()[1], hits
    finally:
        tracemalloc.stop()


def postings(bm25, query):
    return sum(end - start for start, end, *_ in bm25._query_terms(query))


@pytest.mark.parametrize("query", [
    " ".join(f"w{r}" for r in range(30, 60)),  # thirty short posting lists: every posting summed at once
    " ".join(f"w{r}" for r in range(10, 22)),  # twelve long ones: added one by one, maybe some skipped
    "w300 w1500 w0 w1 w2 w5",  # two rare words and common ones: the long terms looked up, not scanned
    "w3 w3 w10 w11 w12",  # a dense word twice
])
def test_a_query_holds_one_score_per_document_not_copies_of_its_postings(zipf_bm25, query, monkeypatch):
    n_docs = zipf_bm25.doc_len.size
    monkeypatch.setattr(bm25_module, "DENSE_CHUNK", 4096)  # slices well below the corpus, as at scale
    assert postings(zipf_bm25, query) > n_docs  # copying the postings would cost more than the scores
    peak, hits = query_peak(zipf_bm25, query)
    assert len(hits) == 10
    # the float64 scores, a boolean per document to cut the top, one slice of a repeated dense row, and small
    # change (tokens, hits, a sample of the scores)
    assert peak < 8 * n_docs + n_docs + 8 * 4096 + 200_000, (peak, 8 * n_docs)


def test_a_repeated_dense_word_added_in_slices_scores_the_same_bits(zipf_bm25, monkeypatch):
    query = "w0 w0 w1 w1 w1 w70"
    assert any(dense >= 0 and repeat > 1 for *_, repeat, _, dense in zipf_bm25._query_terms(query))
    whole_scores, whole_hits = zipf_bm25.scores(query), zipf_bm25.search(query, 50)
    monkeypatch.setattr(bm25_module, "DENSE_CHUNK", 977)  # slices that do not divide the corpus
    assert np.array_equal(zipf_bm25.scores(query), whole_scores)
    assert zipf_bm25.search(query, 50) == whole_hits
    expected = np.zeros(zipf_bm25.doc_len.size)  # the repeated weights added at once, in scoring order
    for start, end, repeat, _, dense in zipf_bm25._query_terms(query):
        if dense >= 0:
            expected += zipf_bm25.dense_weights[dense] * repeat
        else:
            np.add.at(expected, zipf_bm25.weights.indices[start:end], zipf_bm25.weights.data[start:end] * repeat)
    assert np.array_equal(whole_scores, expected)
