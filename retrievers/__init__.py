"""Corpus loading and search backends. Depends on nothing else of ours."""

from retrievers.bm25 import BM25Retriever
from retrievers.corpus import Corpus, CorpusError, load_corpus
from retrievers.types import Doc, Hit, Retriever

__all__ = ["BM25Retriever", "Corpus", "CorpusError", "Doc", "Hit", "Retriever", "load_corpus"]
