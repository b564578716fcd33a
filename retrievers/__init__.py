"""Corpus loading and search backends. Depends on nothing else of ours."""

from retrievers.bm25 import BM25Retriever
from retrievers.corpus import Corpus, CorpusError, load_corpus
from retrievers.dense import DenseRetriever
from retrievers.hf import load_hf_corpus
from retrievers.hybrid import HybridRetriever, rrf_fuse
from retrievers.index import Index, IndexMismatchError, build_index, open_index
from retrievers.qdrant import QdrantRetriever
from retrievers.scholargym import load_paper_db
from retrievers.sources import open_corpus
from retrievers.types import Doc, Hit, Retriever

__all__ = ["BM25Retriever", "Corpus", "CorpusError", "DenseRetriever", "Doc", "Hit", "HybridRetriever", "Index",
           "IndexMismatchError", "QdrantRetriever", "Retriever", "build_index", "load_corpus", "load_hf_corpus",
           "load_paper_db", "open_corpus", "open_index", "rrf_fuse"]
