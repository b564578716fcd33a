"""Corpus loading and search backends. Depends on nothing else of ours."""

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

__all__ = ["BM25_PRESETS", "ENGINES", "BM25Retriever", "Corpus", "CorpusError", "DenseRetriever", "Doc", "Hit",
           "HybridRetriever", "Index", "IndexMismatchError", "QdrantRetriever", "Retrieval", "Retriever", "SourcesFailed",
           "SourcesRetriever", "StoredCorpus", "build_index", "find_local", "load_corpus", "load_hf_corpus",
           "load_paper_db", "open_corpus", "open_engine", "open_index", "open_retriever", "open_sources", "rrf_fuse"]
