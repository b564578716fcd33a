import asyncio

import pytest

from deepresearch.retrievers import BM25Retriever, Corpus, Doc, Hit
from deepresearch.retrievers.dense import DenseRetriever
from deepresearch.retrievers.hybrid import HybridRetriever, rrf_fuse


def hits(*ids):
    return [Hit(doc=Doc(doc_id=d, title="", text=""), score=1.0, rank=r) for r, d in enumerate(ids, start=1)]


def test_rrf_scores_by_hand():
    fused = dict(rrf_fuse([hits("a", "b", "c"), hits("b", "d")], [1.0, 1.0], k_rrf=60))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert list(fused) == ["b", "a", "d", "c"]
    weighted = [d for d, _ in rrf_fuse([hits("a", "b"), hits("b", "a")], [1.0, 3.0], k_rrf=60)]
    assert weighted == ["b", "a"]


def test_ties_go_to_better_rank_then_doc_id():
    fused = [d for d, _ in rrf_fuse([hits("z", "y"), hits("y", "z")], [1.0, 1.0])]
    assert fused == ["y", "z"]


@pytest.fixture(scope="module")
def hybrid(small_corpus, small_embeddings):
    return HybridRetriever(
        {"bm25": BM25Retriever(small_corpus), "dense": DenseRetriever(small_corpus, embeddings=small_embeddings)}
    )


def test_hybrid_pages_filters_and_async(hybrid):
    query = "tumour suppressor gene mutations"
    whole = hybrid.search(query, 20)
    assert [h.rank for h in whole] == list(range(1, 21))
    assert hybrid.search(query, 10, offset=10) == whole[10:]
    skip = {whole[0].doc.doc_id}
    assert whole[0].doc.doc_id not in {h.doc.doc_id for h in hybrid.search(query, 20, exclude=skip)}
    assert asyncio.run(hybrid.asearch(query, 10, offset=10)) == whole[10:]


def test_zero_weight_reduces_to_the_other_retriever(small_corpus, small_embeddings):
    bm25 = BM25Retriever(small_corpus)
    only_bm25 = HybridRetriever(
        {"bm25": bm25, "dense": DenseRetriever(small_corpus, embeddings=small_embeddings)}, weights={"dense": 0.0}
    )
    query = "antibiotic resistance in bacteria"
    assert [h.doc.doc_id for h in only_bm25.search(query, 10)] == [h.doc.doc_id for h in bm25.search(query, 10)]


def test_bad_weights_are_refused(small_corpus):
    bm25 = BM25Retriever(Corpus(list(small_corpus)[:5]))
    with pytest.raises(ValueError, match="unknown retriever 'dense'"):
        HybridRetriever({"bm25": bm25}, weights={"dense": 1.0})
    with pytest.raises(ValueError, match="2 weights for 1 retrievers"):
        HybridRetriever([bm25], weights=[1.0, 2.0])
