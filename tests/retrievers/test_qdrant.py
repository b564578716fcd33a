import numpy as np
import pytest

from deepresearch.retrievers import BM25Retriever, Corpus, Doc
from deepresearch.retrievers.dense import DenseRetriever
from deepresearch.retrievers.qdrant import QdrantRetriever


@pytest.fixture(scope="module")
def qdrant_path(tmp_path_factory):
    return tmp_path_factory.mktemp("qdrant")


@pytest.fixture(scope="module")
def sparse(small_corpus, small_embeddings, qdrant_path):
    retriever = QdrantRetriever(small_corpus, path=qdrant_path, mode="bm25", embeddings=small_embeddings)
    yield retriever
    retriever.close()


def test_sparse_scores_equal_lucene_bm25(sparse, small_corpus, scifact_test_queries):
    ours = BM25Retriever(small_corpus, tokenizer="scholargym", method="lucene")
    for query in list(scifact_test_queries.values())[:20]:
        got = sparse.search(query, 10)
        expected = ours.search(query, 10)
        assert [h.doc.doc_id for h in got] == [h.doc.doc_id for h in expected]
        assert np.allclose([h.score for h in got], [h.score for h in expected], atol=1e-4)


def test_filters_and_pages(sparse, small_corpus):
    query = "protein expression in cancer cells"
    whole = sparse.search(query, 10)
    assert sparse.search(query, 5, offset=5) == whole[5:]
    excluded = {whole[0].doc.doc_id}
    assert whole[0].doc.doc_id not in {h.doc.doc_id for h in sparse.search(query, 10, exclude=excluded)}


def test_dense_and_hybrid_modes(small_corpus, small_embeddings, tmp_path):
    dense = QdrantRetriever(small_corpus, path=tmp_path / "q", mode="dense", embeddings=small_embeddings)
    exact = DenseRetriever(small_corpus, embeddings=small_embeddings)
    query = "insulin and glucose metabolism"
    assert [h.doc.doc_id for h in dense.search(query, 10)] == [h.doc.doc_id for h in exact.search(query, 10)]
    dense.close()
    hybrid = QdrantRetriever(small_corpus, path=tmp_path / "q", mode="hybrid")  # reuses the collection
    hits = hybrid.search(query, 10)
    assert len(hits) == 10 and [h.rank for h in hits] == list(range(1, 11))
    hybrid.close()


def test_date_filter_in_qdrant(tmp_path):
    docs = [
        Doc(doc_id=f"p{i}", title="graph networks", text="graph neural networks", published=m)
        for i, m in enumerate(["2024-09-30", "2024-10-01", None])
    ]
    docs += [Doc(doc_id=f"f{i}", title="other", text="unrelated text") for i in range(4)]
    corpus = Corpus(docs)
    q = QdrantRetriever(corpus, path=tmp_path / "d", mode="bm25", embeddings=np.eye(7, dtype=np.float32))
    assert [h.doc.doc_id for h in q.search("graph", 10, before="2024-09")] == ["p0", "p2"]
    q.close()


def test_collection_of_another_corpus_is_refused(small_corpus, small_embeddings, tmp_path):
    QdrantRetriever(small_corpus, path=tmp_path / "c", mode="bm25", embeddings=small_embeddings).close()
    other = Corpus(list(small_corpus)[:50])
    with pytest.raises(ValueError, match="holds another corpus"):
        QdrantRetriever(other, path=tmp_path / "c", mode="bm25")


def test_needs_exactly_one_location(small_corpus):
    with pytest.raises(ValueError, match="exactly one of path"):
        QdrantRetriever(small_corpus, mode="bm25")
