"""`open_retriever`: one opener for a corpus spec or an index, every kind, the index's own settings."""

import pytest

from deepresearch.retrievers import (
    BM25_PRESETS,
    Corpus,
    IndexMismatchError,
    build_index,
    open_corpus,
    open_retriever,
)
from deepresearch.retrievers.store import StoredCorpus

QUERY = "insulin resistance in obese patients"
SMALL = 80


@pytest.fixture(scope="module")
def small_file(scifact_head):
    return scifact_head(SMALL)


@pytest.fixture(scope="module")
def small_corpus(small_file):
    return open_corpus(str(small_file))[0]


@pytest.fixture(scope="module")
def small_index(tmp_path_factory, small_file):
    corpus, source, _ = open_corpus(str(small_file))
    folder = tmp_path_factory.mktemp("index") / "small"
    build_index(corpus, folder, source, bm25=BM25_PRESETS["scholargym"], dense_model="all-MiniLM-L6-v2")
    return folder


def test_in_memory_uses_the_default_settings_of_every_command(data_dir):
    retrieval = open_retriever("BeIR/scifact", data_dir=data_dir)
    assert retrieval.kind == "bm25" and retrieval.parts["bm25"] is retrieval.retriever
    assert retrieval.description == {
        "name": "scifact",
        "documents": 5183,
        "retriever": "bm25",
        "index": None,
        "bm25": BM25_PRESETS["default"],
        "dense": None,
        "qdrant": None,
    }
    assert retrieval.retriever.params()["tokenizer"] == "english"


def test_an_index_serves_its_own_settings_and_refuses_others(small_index, small_file):
    retrieval = open_retriever(index=small_index)
    assert isinstance(retrieval.corpus, StoredCorpus) and retrieval.retriever.params()["tokenizer"] == "scholargym"
    assert retrieval.description["bm25"] == BM25_PRESETS["scholargym"]
    assert open_retriever(str(small_file), index=small_index, bm25={"tokenizer": "scholargym"}).retriever.search(
        QUERY, 5
    )
    with pytest.raises(
        IndexMismatchError,
        match=r"built with tokenizer='scholargym', not 'english'; leave the "
        r"tokenizer setting out .* --tokenizer english`",
    ):
        open_retriever(index=small_index, bm25={"tokenizer": "english"})
    with pytest.raises(IndexMismatchError, match="built with k1=1.5, not 1.2"):
        open_retriever(index=small_index, bm25={"k1": 1.2})
    with pytest.raises(IndexMismatchError, match="built with tokenizer='scholargym', not 'english'"):
        open_retriever(index=small_index, bm25_preset="default")
    with pytest.raises(IndexMismatchError, match="holds embeddings of 'all-MiniLM-L6-v2', not 'other-model'"):
        open_retriever(index=small_index, kind="dense", dense_model="other-model")


def test_a_corpus_given_with_an_index_must_be_its_corpus(small_index, small_file, small_corpus, data_dir):
    assert len(open_retriever(str(small_file), index=small_index).corpus) == len(small_corpus)
    assert open_retriever(small_corpus, index=small_index).corpus is small_corpus  # checked by fingerprint
    with pytest.raises(IndexMismatchError, match=r"holds corpus 'scifact-80.jsonl' \(80 documents\), not csfcube"):
        open_retriever("csfcube", index=small_index, data_dir=data_dir)
    with pytest.raises(IndexMismatchError, match="differs from the one index"):
        open_retriever(Corpus(list(small_corpus)[:10]), index=small_index)


def test_dense_and_hybrid_from_an_index_use_its_embeddings(small_index, small_file, encoded, caplog):
    from_index = {kind: open_retriever(index=small_index, kind=kind) for kind in ("dense", "hybrid")}
    assert encoded == []  # nothing embedded to open them
    in_memory = open_retriever(str(small_file), kind="hybrid", bm25_preset="scholargym")
    assert encoded == [SMALL] and f"embedding {SMALL} documents in memory" in caplog.text
    assert set(in_memory.parts) == set(from_index["hybrid"].parts) == {"bm25", "dense"}
    assert from_index["dense"].retriever.search(QUERY, 10) == in_memory.parts["dense"].search(QUERY, 10)
    assert from_index["hybrid"].retriever.search(QUERY, 10) == in_memory.retriever.search(QUERY, 10)
    assert from_index["hybrid"].description["dense"] == "all-MiniLM-L6-v2"


def test_qdrant_bm25_ranks_as_the_default_bm25(small_file, encoded):
    # Qdrant's IDF modifier is Lucene's IDF, the default preset's
    bm25 = open_retriever(str(small_file))
    qdrant = open_retriever(str(small_file), kind="qdrant", qdrant_mode="bm25")
    assert encoded == []  # a BM25-only collection needs no embeddings
    assert qdrant.description["qdrant"] == ":memory:" and qdrant.description["bm25"] == BM25_PRESETS["default"]
    for query in (QUERY, "p53 tumour suppressor", "vitamin D"):
        assert [h.doc.doc_id for h in qdrant.retriever.search(query, 10)] == [
            h.doc.doc_id for h in bm25.retriever.search(query, 10)
        ]


def test_qdrant_over_an_index_keeps_its_collection_in_the_index_folder(small_index, encoded):
    first = open_retriever(index=small_index, kind="qdrant")
    hits = first.retriever.search(QUERY, 10)
    first.retriever.close()
    assert (small_index / "qdrant").is_dir() and all(n == 1 for n in encoded)  # only the query was embedded
    again = open_retriever(index=small_index, kind="qdrant")  # the collection is reused, not rebuilt
    assert again.retriever.search(QUERY, 10) == hits and again.description["qdrant_mode"] == "hybrid"
    again.retriever.close()


def test_bad_requests_fail_before_anything_is_read(small_file):
    with pytest.raises(ValueError, match="unknown retriever 'sparse'; choose one of: bm25, dense, hybrid, qdrant"):
        open_retriever(str(small_file), kind="sparse")
    with pytest.raises(ValueError, match="needs the qdrant retriever"):
        open_retriever(str(small_file), qdrant_url="http://localhost:6333")
    with pytest.raises(ValueError, match="nothing to search"):
        open_retriever()
    with pytest.raises(ValueError, match="unknown BM25 preset 'bm26'"):
        open_retriever(str(small_file), bm25_preset="bm26")
    with pytest.raises(ValueError, match="unknown BM25 setting 'k2'"):
        open_retriever(str(small_file), bm25={"k2": 1.0})
