"""A persistent retrieval index: BM25 matrices and dense embeddings on disk, tied to one corpus and model.

Layout of the folder:
    manifest.json   corpus source and fingerprint, settings of each part, model fingerprint
    bm25/           bm25.json, vocab.json, bm25.npz (CSR arrays of the weight matrix)
    dense/          dense.json, embeddings.npy (float32, memory-mapped when opened)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retrievers import embed
from retrievers.bm25 import BM25Retriever
from retrievers.corpus import Corpus
from retrievers.dense import DenseRetriever
from retrievers.hybrid import HybridRetriever
from retrievers.sources import reopen_corpus
from retrievers.types import Retriever

logger = logging.getLogger(__name__)

FORMAT = 1
MANIFEST = "manifest.json"
KINDS = ("bm25", "dense", "hybrid")


class IndexMismatchError(ValueError):
    """An index that cannot serve: missing, of another format, or built from a different corpus or model."""




@dataclass
class Index:
    """An opened index: the corpus and whichever retrievers were built."""

    folder: Path
    corpus: Corpus
    manifest: dict
    bm25: BM25Retriever | None = None
    dense: DenseRetriever | None = None

    def retriever(self, kind: str = "bm25", weights: Mapping[str, float] | None = None) -> Retriever:
        """The `bm25`, `dense` or `hybrid` (RRF of both) retriever of this index.

        Raises:
            ValueError: for an unknown kind, or a part the index was built without.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown retriever kind {kind!r}; choose one of: {', '.join(KINDS)}")
        parts = {"bm25": self.bm25, "dense": self.dense}
        needed = ["bm25", "dense"] if kind == "hybrid" else [kind]
        missing = [p for p in needed if parts[p] is None]
        if missing:
            hint = " --dense MODEL" if "dense" in missing else ""
            raise ValueError(f"index at {self.folder} has no {missing[0]} part; rebuild it with "
                             f"`deepresearch index CORPUS --out {self.folder}{hint}`")
        if kind == "hybrid":
            return HybridRetriever({"bm25": self.bm25, "dense": self.dense}, weights)
        return parts[kind]


def build_index(corpus: Corpus, folder: str | Path, source: Mapping | None = None, *,
                bm25: Mapping | None = None, dense_model: str | None = None, batch_size: int = 64,
                show_progress: bool = False) -> Index:
    """Builds the requested parts for `corpus` and writes them with a manifest to `folder`.

    Args:
        corpus: The corpus to index.
        folder: Output folder (created; existing parts are overwritten).
        source: How to reopen the corpus (from `open_corpus`); without one, `open_index` needs the corpus.
        bm25: BM25Retriever keyword settings (k1, b, epsilon, tokenizer, method, text_format); None skips BM25.
        dense_model: Encoder name or path for the dense part; None skips it.
        batch_size: Encoder batch size.
        show_progress: Draw the encoder's progress bar.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                      "corpus": {"name": corpus.name, "documents": len(corpus), "fingerprint": corpus.fingerprint(),
                                 "source": dict(source) if source else None},
                      "bm25": None, "dense": None, "build_seconds": {}}
    index = Index(folder, corpus, manifest)
    if bm25 is not None:
        started = time.perf_counter()
        index.bm25 = BM25Retriever(corpus, **bm25)
        manifest["bm25"] = index.bm25.save(folder / "bm25")
        manifest["build_seconds"]["bm25"] = round(time.perf_counter() - started, 3)
    if dense_model is not None:
        started = time.perf_counter()
        index.dense = DenseRetriever(corpus, dense_model, batch_size=batch_size, show_progress=show_progress)
        manifest["dense"] = {**index.dense.save(folder / "dense"), "model_fingerprint": embed.model_fingerprint(dense_model)}
        manifest["build_seconds"]["dense"] = round(time.perf_counter() - started, 3)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return index


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise IndexMismatchError(f"no index at {folder} (missing {MANIFEST}); build one with `deepresearch index CORPUS --out {folder}`")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise IndexMismatchError(f"index at {folder} has format {manifest.get('format')!r}, this version reads {FORMAT}; rebuild it")
    return manifest


def open_index(folder: str | Path, corpus: Corpus | None = None, *, parts: tuple[str, ...] = ("bm25", "dense")) -> Index:
    """Opens an index, refusing one whose corpus or model has changed since it was built.

    Args:
        folder: What `build_index` wrote.
        corpus: The corpus to serve; reopened from the manifest's source when None.
        parts: Which parts to load (those the index lacks are skipped).

    Raises:
        IndexMismatchError: when the corpus fingerprint or the dense model's fingerprint differs from the
            one recorded, or the index is missing.
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    if corpus is None:
        source = manifest["corpus"].get("source")
        if not source:
            raise IndexMismatchError(f"index at {folder} does not record its corpus source; pass the corpus to open_index")
        corpus = reopen_corpus(source)
    recorded = manifest["corpus"]["fingerprint"]
    if corpus.fingerprint() != recorded:
        raise IndexMismatchError(f"corpus {corpus.name!r} ({len(corpus)} documents) differs from the one index {folder} was "
                                 f"built from ({manifest['corpus']['documents']} documents, fingerprint {recorded[:12]}); "
                                 f"rebuild the index with `deepresearch index`")
    index = Index(folder, corpus, manifest)
    if "bm25" in parts and manifest.get("bm25"):
        index.bm25 = BM25Retriever.load(folder / "bm25", corpus)
    if "dense" in parts and manifest.get("dense"):
        model = manifest["dense"]["model"]
        if embed.model_fingerprint(model) != manifest["dense"]["model_fingerprint"]:
            raise IndexMismatchError(f"the embedding model {model!r} differs from the one index {folder} was built with; "
                                     f"rebuild the index with `deepresearch index --dense {model}`")
        index.dense = DenseRetriever.load(folder / "dense", corpus)
    return index
