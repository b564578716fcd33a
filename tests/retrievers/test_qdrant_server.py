"""The Qdrant backend against a Qdrant *server* (the client's HTTP API), not the embedded local mode.

It needs a running server, named by DEEPRESEARCH_QDRANT_URL (e.g. `docker run -p 6333:6333 qdrant/qdrant`,
then DEEPRESEARCH_QDRANT_URL=http://127.0.0.1:6333); without one these tests are skipped, and say so.
They check that the server gives what the embedded mode gives: the same hits and scores, filters and pages.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

from deepresearch.retrievers.qdrant import QdrantRetriever

URL = os.environ.get("DEEPRESEARCH_QDRANT_URL")
pytestmark = pytest.mark.skipif(not URL, reason="no Qdrant server: set DEEPRESEARCH_QDRANT_URL to run these")


@pytest.fixture(scope="module")
def server(small_corpus, small_embeddings):
    collection = f"deepresearch-test-{uuid.uuid4().hex[:8]}"
    retriever = QdrantRetriever(small_corpus, url=URL, collection=collection, mode="bm25", embeddings=small_embeddings)
    yield retriever
    retriever.client.delete_collection(collection)
    retriever.close()


def test_a_server_collection_answers_as_the_embedded_one(
    server, small_corpus, small_embeddings, tmp_path, scifact_test_queries
):
    local = QdrantRetriever(small_corpus, path=tmp_path / "q", mode="bm25", embeddings=small_embeddings)
    for query in list(scifact_test_queries.values())[:10]:
        got, expected = server.search(query, 10), local.search(query, 10)
        assert [h.doc.doc_id for h in got] == [h.doc.doc_id for h in expected]
        assert np.allclose([h.score for h in got], [h.score for h in expected], atol=1e-4)
    local.close()


def test_pages_and_exclusions_on_the_server(server):
    query = "protein expression in cancer cells"
    whole = server.search(query, 10)
    assert server.search(query, 5, offset=5) == whole[5:]
    assert whole[0].doc.doc_id not in {h.doc.doc_id for h in server.search(query, 10, exclude={whole[0].doc.doc_id})}
