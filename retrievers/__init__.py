"""Corpus loading and search backends. Depends on nothing else of ours."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use (PEP 562), so that a light submodule (extras, sources) does not load every backend.
_EXPORTS = {
    **dict.fromkeys(["BM25Retriever"], "deepresearch.retrievers.bm25"),
    **dict.fromkeys(["Corpus", "CorpusError", "load_corpus"], "deepresearch.retrievers.corpus"),
    **dict.fromkeys(["DenseRetriever"], "deepresearch.retrievers.dense"),
    **dict.fromkeys(
        ["ENGINES", "SourcesFailed", "SourcesRetriever", "open_engine", "open_sources"],
        "deepresearch.retrievers.engines",
    ),
    **dict.fromkeys(["load_hf_corpus"], "deepresearch.retrievers.hf"),
    **dict.fromkeys(["HybridRetriever", "rrf_fuse"], "deepresearch.retrievers.hybrid"),
    **dict.fromkeys(["Index", "IndexMismatchError", "build_index", "open_index"], "deepresearch.retrievers.index"),
    **dict.fromkeys(["BM25_PRESETS", "Retrieval", "open_retriever"], "deepresearch.retrievers.open"),
    **dict.fromkeys(["QdrantRetriever"], "deepresearch.retrievers.qdrant"),
    **dict.fromkeys(["load_paper_db"], "deepresearch.retrievers.scholargym"),
    **dict.fromkeys(["find_local", "open_corpus"], "deepresearch.retrievers.sources"),
    **dict.fromkeys(["StoredCorpus"], "deepresearch.retrievers.store"),
    **dict.fromkeys(["Doc", "Hit", "Retriever"], "deepresearch.retrievers.types"),
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from deepresearch.retrievers.bm25 import BM25Retriever
    from deepresearch.retrievers.corpus import Corpus, CorpusError, load_corpus
    from deepresearch.retrievers.dense import DenseRetriever
    from deepresearch.retrievers.engines import ENGINES, SourcesFailed, SourcesRetriever, open_engine, open_sources
    from deepresearch.retrievers.hf import load_hf_corpus
    from deepresearch.retrievers.hybrid import HybridRetriever, rrf_fuse
    from deepresearch.retrievers.index import Index, IndexMismatchError, build_index, open_index
    from deepresearch.retrievers.open import BM25_PRESETS, Retrieval, open_retriever
    from deepresearch.retrievers.qdrant import QdrantRetriever
    from deepresearch.retrievers.scholargym import load_paper_db
    from deepresearch.retrievers.sources import find_local, open_corpus
    from deepresearch.retrievers.store import StoredCorpus
    from deepresearch.retrievers.types import Doc, Hit, Retriever


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'deepresearch.retrievers' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
