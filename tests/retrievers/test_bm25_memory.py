"""What one BM25 query allocates: at most one float64 per document, and little else.

The benchmark (benchmarks/bench_index.py, scale part) measures the memory of opening and querying at
570,205 documents against bm25s; these tests hold the structure that figure rests on, on a corpus small
enough to build in seconds, with tracemalloc (numpy reports its arrays to it).
"""

import tracemalloc

import numpy as np
import pytest

from deepresearch.retrievers import BM25Retriever
from deepresearch.retrievers import bm25 as bm25_module
from tests.retrievers.test_bm25 import (
    FILTERS,
    assert_search_is_ranking_by_scores,
    with_dates_and_categories,
    zipf_corpus,
    zipf_queries,  # noqa: F401 - a fixture
)


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


@pytest.mark.parametrize(
    "query",
    [
        " ".join(f"w{r}" for r in range(30, 60)),  # thirty short posting lists: every posting added, in blocks
        " ".join(f"w{r}" for r in range(10, 22)),  # twelve long ones: added one by one, maybe some skipped
        "w300 w1500 w0 w1 w2 w5",  # two rare words and common ones: the long terms looked up, not scanned
        "w3 w3 w10 w11 w12",  # a dense word twice
    ],
)
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
    assert any(dense >= 0 and repeat > 1 for *_, repeat, _, dense, _ in zipf_bm25._query_terms(query))
    whole_scores, whole_hits = zipf_bm25.scores(query), zipf_bm25.search(query, 50)
    monkeypatch.setattr(bm25_module, "DENSE_CHUNK", 977)  # slices that do not divide the corpus
    assert np.array_equal(zipf_bm25.scores(query), whole_scores)
    assert zipf_bm25.search(query, 50) == whole_hits
    expected = np.zeros(zipf_bm25.doc_len.size)  # the repeated weights added at once, in scoring order
    weights = zipf_bm25.weights
    for start, end, repeat, _, dense, _ in zipf_bm25._query_terms(query):
        if dense >= 0:
            expected += zipf_bm25.dense_weights[dense] * repeat
        else:
            np.add.at(expected, weights.indices[start:end], weights.data[start:end] * repeat)
    assert np.array_equal(whole_scores, expected)


def test_scoring_in_blocks_holds_one_block_of_scores(zipf_bm25, monkeypatch):
    query = " ".join(f"w{r}" for r in range(30, 60))
    monkeypatch.setattr(bm25_module, "SCORE_BLOCK", 8192)
    peak, hits = query_peak(zipf_bm25, query)
    assert len(hits) == 10
    assert peak < 8 * 8192 + 200_000, peak  # a block's scores, not the corpus's 480,000 bytes


@pytest.mark.parametrize("block", [997, 4096])
def test_scoring_in_blocks_ranks_like_scores(scifact, zipf_bm25, zipf_queries, block, monkeypatch):  # noqa: F811 - the fixture
    monkeypatch.setattr(bm25_module, "SCORE_BLOCK", block)  # blocks that do not divide the corpus
    dated = BM25Retriever(with_dates_and_categories(scifact), tokenizer="scholargym", method="lucene")
    scifact_queries = [
        "vitamin D deficiency and cancer risk",
        "the of and cells",
        "stem cell differentiation",
        "aspirin reduces the risk of colorectal cancer in patients",
    ]
    assert_search_is_ranking_by_scores(dated, scifact_queries, FILTERS)
    words = [" ".join(f"w{r}" for r in range(30, 60)), "w3 w3 w10 w11 w12", "w0 w0 w1 w1 w1 w70"]
    assert_search_is_ranking_by_scores(zipf_bm25, words + zipf_queries[:10], FILTERS)


def test_negative_weights_scored_in_blocks_rank_like_scores(monkeypatch):
    # rank-bm25's IDF floor is negative here, so search adds every term, in blocks of three documents
    from deepresearch.retrievers import Corpus, Doc

    monkeypatch.setattr(bm25_module, "SCORE_BLOCK", 3)
    texts = ["a b c", "a b c d", "a b c e", "a b d", "b c e a"] * 3 + ["f a"]
    bm25 = BM25Retriever(
        Corpus([Doc(doc_id=str(i), title="", text=t) for i, t in enumerate(texts)]), text_format="plain"
    )
    assert bm25.has_negative_weights
    assert_search_is_ranking_by_scores(bm25, ["a d", "e f a", "b b c", "d e"], [{}, {"exclude": {"1"}}])
