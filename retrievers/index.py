"""A persistent retrieval index: the corpus's documents, BM25 arrays and dense embeddings on disk.

Opening costs O(1) in the corpus size: every array is memory-mapped, nothing is recomputed, and the
documents are parsed one at a time as hits need them. The corpus source is checked by the recorded size
and modification time of its files; `verify=True` also re-reads it and compares its fingerprint.

Layout of the folder (format 2):
    manifest.json   format; corpus name, size, fingerprint, source and its files' sizes and times; the
                    settings of each part (the BM25 tokenizer among them)
    docs/           the documents, read on demand (`deepresearch.retrievers.store.StoredCorpus`)
    bm25/           settings, vocabulary and arrays (`BM25Retriever.save`)
    dense/          dense.json, embeddings.npy (float32)
    qdrant/         a local Qdrant collection, made on first use (`deepresearch.retrievers.open`)
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deepresearch.retrievers import embed
from deepresearch.retrievers.bm25 import BM25Retriever
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.dense import DenseRetriever
from deepresearch.retrievers.hybrid import HybridRetriever
from deepresearch.retrievers.sources import load_source, source_files
from deepresearch.retrievers.store import StoredCorpus, write_docs
from deepresearch.retrievers.types import Retriever

logger = logging.getLogger(__name__)

FORMAT = 3  # 3: BM25 postings hold (tf, length) codes (bm25.STORE_FORMAT 3)
MANIFEST = "manifest.json"
KINDS = ("bm25", "dense", "hybrid")


class IndexMismatchError(ValueError):
    """An index that cannot serve: missing, of another format, or built from a different corpus or model."""


def rebuild_command(folder: str | Path, manifest: Mapping | None = None, extra: str = "") -> str:
    """The `deepresearch index` command that rebuilds `folder` (its corpus spec when recorded)."""
    source = ((manifest or {}).get("corpus") or {}).get("source") or {}
    spec = source.get("path") or (f"hf:{source['name']}" if source.get("name") else "CORPUS")
    return f"`deepresearch index {spec} --out {folder}{extra}`"


def file_stamps(files: list[Path]) -> list[dict]:
    """Path, size and modification time of each file: a cheap test that a corpus is unchanged."""
    return [{"path": str(f), "size": (st := f.stat()).st_size, "mtime_ns": st.st_mtime_ns} for f in files]


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
            hint = " --dense-model MODEL" if "dense" in missing else ""
            raise ValueError(
                f"index at {self.folder} has no {missing[0]} part; rebuild it with "
                f"{rebuild_command(self.folder, self.manifest, hint)}"
            )
        if kind == "hybrid":
            assert self.bm25 is not None and self.dense is not None  # neither is missing (checked above)
            return HybridRetriever({"bm25": self.bm25, "dense": self.dense}, weights)
        part = parts[kind]
        assert part is not None  # not missing (checked above)
        return part


def build_index(
    corpus: Corpus,
    folder: str | Path,
    source: Mapping | None = None,
    *,
    bm25: Mapping | None = None,
    dense_model: str | None = None,
    batch_size: int = 64,
    show_progress: bool = False,
) -> Index:
    """Writes the documents, the requested parts and a manifest for `corpus` to `folder`.

    Args:
        corpus: The corpus to index.
        folder: Output folder (created; an index already there is replaced).
        source: How to reopen the corpus (from `open_corpus`); recorded so a changed corpus is noticed.
        bm25: BM25Retriever keyword settings (k1, b, epsilon, tokenizer, method, text_format); None skips BM25.
        dense_model: Encoder name or path for the dense part; None skips it.
        batch_size: Encoder batch size.
        show_progress: Draw the encoder's progress bar.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)  # a build cut short leaves no index that looks whole
    for part in ("bm25", "dense"):  # the replaced index's files go, not only those this build rewrites
        shutil.rmtree(folder / part, ignore_errors=True)
    started = time.perf_counter()
    fingerprint = corpus.fingerprint()
    write_docs(corpus, folder / "docs")
    manifest: dict = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "corpus": {
            "name": corpus.name,
            "documents": len(corpus),
            "fingerprint": fingerprint,
            "source": dict(source) if source else None,
            "files": file_stamps(source_files(source)) if source else [],
        },
        "bm25": None,
        "dense": None,
        "build_seconds": {"documents": round(time.perf_counter() - started, 3)},
    }
    index = Index(folder, corpus, manifest)
    if bm25 is not None:
        started = time.perf_counter()
        index.bm25 = BM25Retriever.build(corpus, folder / "bm25", **bm25)  # streamed to its files
        manifest["bm25"] = index.bm25.params()
        manifest["build_seconds"]["bm25"] = round(time.perf_counter() - started, 3)
    if dense_model is not None:
        started = time.perf_counter()
        index.dense = DenseRetriever(corpus, dense_model, batch_size=batch_size, show_progress=show_progress)
        manifest["dense"] = {
            **index.dense.save(folder / "dense"),
            "model_fingerprint": embed.model_fingerprint(dense_model),
        }
        manifest["build_seconds"]["dense"] = round(time.perf_counter() - started, 3)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return index


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise IndexMismatchError(f"no index at {folder} (missing {MANIFEST}); build one with {rebuild_command(folder)}")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise IndexMismatchError(
            f"index at {folder} has format {manifest.get('format')!r}, this version reads "
            f"{FORMAT}; rebuild it with {rebuild_command(folder, manifest)}"
        )
    return manifest


def check_source(folder: str | Path, manifest: Mapping, verify: bool = False) -> None:
    """Refuses an index whose corpus source changed since it was built.

    By default the source files' sizes and modification times are compared with those recorded (a file
    that is gone only gives a warning: the index holds its own copy of the documents). With `verify`, the
    source is read again and its fingerprint compared, so a file touched but not changed still serves.

    Raises:
        IndexMismatchError: naming the changed file or the differing fingerprint, and the rebuild command.
    """
    recorded = manifest["corpus"]
    if verify:
        if not recorded.get("source"):
            raise IndexMismatchError(f"index at {folder} does not record its corpus source, so it cannot be verified")
        fingerprint = load_source(recorded["source"])[0].fingerprint()
        if fingerprint != recorded["fingerprint"]:
            raise IndexMismatchError(
                f"corpus {recorded['name']!r} now has fingerprint {fingerprint[:12]}, index "
                f"{folder} was built from {recorded['fingerprint'][:12]}; rebuild it with "
                f"{rebuild_command(folder, manifest)}"
            )
        return
    for stamp in recorded.get("files") or ():
        path = Path(stamp["path"])
        if not path.exists():
            logger.warning("corpus file %s is gone; serving the copy of its documents index %s holds", path, folder)
            continue
        stat = path.stat()
        if (stat.st_size, stat.st_mtime_ns) != (stamp["size"], stamp["mtime_ns"]):
            raise IndexMismatchError(
                f"corpus file {path} changed since index {folder} was built (size or "
                f"modification time differ); rebuild it with {rebuild_command(folder, manifest)}, "
                f"or verify its contents (--verify-index)"
            )


def open_index(
    folder: str | Path,
    corpus: Corpus | None = None,
    *,
    parts: tuple[str, ...] = ("bm25", "dense"),
    verify: bool = False,
) -> Index:
    """Opens an index memory-mapped, refusing one whose corpus or model has changed since it was built.

    Args:
        folder: What `build_index` wrote.
        corpus: The corpus to serve, checked by fingerprint; None serves the index's own copy of the
            documents, read on demand, after the cheap check of `check_source`.
        parts: Which parts to open (those the index lacks are skipped).
        verify: Re-read the corpus source and compare fingerprints (slow on a big corpus).

    Raises:
        IndexMismatchError: when the index is missing or of another format, the corpus changed, or the dense
            model's fingerprint differs from the one recorded.
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    recorded = manifest["corpus"]
    if corpus is None:
        check_source(folder, manifest, verify)
        corpus = StoredCorpus(folder / "docs", recorded["name"], recorded["fingerprint"])
    elif corpus.fingerprint() != recorded["fingerprint"]:
        raise IndexMismatchError(
            f"corpus {corpus.name!r} ({len(corpus)} documents) differs from the one index {folder} was "
            f"built from ({recorded['documents']} documents, fingerprint {recorded['fingerprint'][:12]}); "
            f"rebuild the index with {rebuild_command(folder, manifest)}"
        )
    index = Index(folder, corpus, manifest)
    if "bm25" in parts and manifest.get("bm25"):
        index.bm25 = BM25Retriever.load(folder / "bm25", corpus)
    if "dense" in parts and manifest.get("dense"):
        model = manifest["dense"]["model"]
        if embed.model_fingerprint(model) != manifest["dense"]["model_fingerprint"]:
            raise IndexMismatchError(
                f"the embedding model {model!r} differs from the one index {folder} was built with; "
                f"rebuild the index with {rebuild_command(folder, manifest, f' --dense-model {model}')}"
            )
        index.dense = DenseRetriever.load(folder / "dense", corpus)
    return index
