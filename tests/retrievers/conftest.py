"""Small real corpora for retriever tests: the first SciFact documents, embedded once per session."""

from __future__ import annotations

import numpy as np
import pytest

from deepresearch.retrievers import Corpus
from deepresearch.retrievers.dense import dense_text
from deepresearch.retrievers.embed import encode

SMALL = 300


@pytest.fixture(scope="session")
def small_corpus(scifact) -> Corpus:
    return Corpus(list(scifact)[:SMALL], name="scifact-300")


@pytest.fixture(scope="session")
def small_embeddings(small_corpus) -> np.ndarray:
    return encode([dense_text(d) for d in small_corpus])


@pytest.fixture(scope="session")
def scifact_queries(data_dir) -> dict[str, str]:
    from deepresearch.retrievers.beir import load_queries

    return load_queries(data_dir / "scifact")


@pytest.fixture(scope="session")
def scifact_test_queries(data_dir, scifact_queries) -> dict[str, str]:
    from deepresearch.retrievers.beir import load_qrels

    return {q: scifact_queries[q] for q in load_qrels(data_dir / "scifact", "test")}
