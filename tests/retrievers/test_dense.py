import numpy as np
import pytest

from deepresearch.retrievers import Corpus, Doc
from deepresearch.retrievers.dense import DenseRetriever
from deepresearch.retrievers.embed import encode


@pytest.fixture(scope="module")
def dense(small_corpus, small_embeddings):
    return DenseRetriever(small_corpus, embeddings=small_embeddings)


def test_embeddings_are_normalised_float32(small_embeddings, small_corpus):
    assert small_embeddings.dtype == np.float32
    assert small_embeddings.shape == (len(small_corpus), 384)
    assert np.allclose(np.linalg.norm(small_embeddings, axis=1), 1.0, atol=1e-5)


def test_top_k_equals_a_full_sort(dense, small_embeddings, small_corpus):
    query = "stem cells in bone marrow"
    scores = small_embeddings @ encode([query])[0]
    expected = [small_corpus[int(i)].doc_id for i in np.lexsort((np.arange(scores.size), -scores))[:15]]
    hits = dense.search(query, 15)
    assert [h.doc.doc_id for h in hits] == expected
    assert [h.rank for h in hits] == list(range(1, 16))
    assert hits[0].score == pytest.approx(float(scores.max()), abs=1e-6)


def test_the_best_hit_for_a_title_is_its_document(dense, small_corpus):
    doc = small_corpus[42]
    assert dense.search(doc.title, 1)[0].doc.doc_id == doc.doc_id


def test_filters_apply_before_top_k(dense, small_corpus):
    query = small_corpus[7].title
    top = dense.search(query, 5)
    excluded = {h.doc.doc_id for h in top[:3]}
    hits = dense.search(query, 5, exclude=excluded)
    assert len(hits) == 5 and not excluded & {h.doc.doc_id for h in hits}
    assert [h.doc.doc_id for h in hits[:2]] == [h.doc.doc_id for h in top[3:5]]


def test_pages_and_ties_are_deterministic():
    vectors = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8], [1, 0]], dtype=np.float32)
    corpus = Corpus([Doc(doc_id=f"d{i}", title="", text="") for i in range(5)])
    dense = DenseRetriever(corpus, embeddings=vectors)
    query = np.array([1, 0], dtype=np.float32)
    assert [h.doc.doc_id for h in dense.search(query, 3)] == ["d0", "d2", "d4"]
    assert [(h.doc.doc_id, h.rank) for h in dense.search(query, 2, offset=2)] == [("d4", 3), ("d3", 4)]


def test_save_then_load_memory_maps_and_ranks_the_same(tmp_path, dense, small_corpus):
    dense.save(tmp_path)
    loaded = DenseRetriever.load(tmp_path, small_corpus)
    assert isinstance(loaded.embeddings, np.memmap)
    assert loaded.search("insulin resistance", 10) == dense.search("insulin resistance", 10)


def test_wrong_number_of_embeddings_is_refused(small_corpus, small_embeddings):
    with pytest.raises(ValueError, match="re-encode"):
        DenseRetriever(small_corpus, embeddings=small_embeddings[:10])
