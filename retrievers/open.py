"""One opener for every command: a corpus spec or an index folder in, a ready retriever out.

`open_retriever` is what `deepresearch run`, every `eval` runner and `optimize` call (through
`deepresearch.programs.retrieval.open_from_args`), and what Python users call. With an index the settings are the index's
own (a conflicting explicit setting is refused); without one, BM25 is built in memory with the same
defaults `deepresearch index` uses, and dense embeddings are encoded in memory (slow on a big corpus).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearch.retrievers import embed
from deepresearch.retrievers.bm25 import BM25Retriever
from deepresearch.retrievers.corpus import Corpus
from deepresearch.retrievers.dense import DenseRetriever
from deepresearch.retrievers.hybrid import HybridRetriever
from deepresearch.retrievers.index import Index, IndexMismatchError, open_index, rebuild_command
from deepresearch.retrievers.qdrant import QdrantRetriever
from deepresearch.retrievers.settings import BM25_KEYS, BM25_PRESETS, KINDS, QDRANT_MODES
from deepresearch.retrievers.sources import load_source, resolve_source, same_source
from deepresearch.retrievers.types import Retriever

logger = logging.getLogger(__name__)


def bm25_settings(preset: str = "default", overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of a named preset with `overrides` (BM25Retriever keywords) applied.

    Raises:
        ValueError: for an unknown preset or setting.
    """
    if preset not in BM25_PRESETS:
        raise ValueError(f"unknown BM25 preset {preset!r}; choose one of: {', '.join(BM25_PRESETS)}")
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(BM25_KEYS)
    if unknown:
        raise ValueError(f"unknown BM25 setting {min(unknown)!r}; choose from: {', '.join(BM25_KEYS)}")
    return {**BM25_PRESETS[preset], **overrides}


@dataclass(frozen=True)
class Retrieval:
    """An opened retriever, the corpus it searches, and what it is.

    Attributes:
        retriever: The retriever of the requested kind (with search engines, a `SourcesRetriever` fusing
            the local one, if any, with them).
        corpus: Its documents (a `StoredCorpus` read on demand when it comes from an index); None when only
            search engines are searched.
        kind: bm25, dense, hybrid or qdrant; `sources` for search engines alone.
        parts: The in-process retrievers it is made of, by name (`bm25`, `dense`, the engines; empty for
            qdrant).
        description: A small JSON-able record for traces and run settings: corpus name and size, kind,
            index folder, BM25 settings, dense model, Qdrant location, search engines (`sources`).
        index: The opened index, when there is one.
    """

    retriever: Retriever
    corpus: Corpus | None
    kind: str
    parts: Mapping[str, Retriever] = field(default_factory=dict)
    description: Mapping[str, Any] = field(default_factory=dict)
    index: Index | None = None


def open_retriever(
    corpus: str | Corpus | None = None,
    *,
    index: str | Path | None = None,
    kind: str = "bm25",
    qdrant_url: str | None = None,
    qdrant_mode: str = "hybrid",
    dense_model: str | None = None,
    bm25: Mapping[str, Any] | None = None,
    bm25_preset: str | None = None,
    data_dir: str | Path | None = None,
    verify: bool = False,
    show_progress: bool = False,
    sources: Sequence[str] = (),
    source_options: Mapping[str, Any] | None = None,
) -> Retrieval:
    """Opens a retriever over a corpus (built in memory) or over a persistent index (memory-mapped), and/or
    over scholarly search engines.

    Args:
        corpus: A corpus spec (`deepresearch.retrievers.sources`: a path, a dataset name in `data_dir`, `hf:NAME`...) or a
            loaded `Corpus`. With `index` it is optional, and checked to be the index's corpus.
        index: A folder written by `deepresearch index` / `build_index`.
        kind: bm25, dense, hybrid (reciprocal-rank fusion of both) or qdrant.
        qdrant_url: A Qdrant server for kind qdrant; without one the collection is kept in the index folder
            (`DIR/qdrant`), or in memory when there is no index.
        qdrant_mode: What the Qdrant collection is searched with: bm25, dense or hybrid.
        dense_model: The encoder for dense retrieval in memory (default all-MiniLM-L6-v2); with an index,
            it must be the index's.
        bm25: Explicit BM25 settings (tokenizer, k1, b, epsilon, method, text_format); with an index, each
            must equal the index's.
        bm25_preset: A name in `BM25_PRESETS` (default "default"); with an index, checked like `bm25`.
        data_dir: The folder dataset names are looked up in.
        verify: With an index, re-read the corpus source and compare fingerprints (slow on a big corpus).
        show_progress: Draw the encoder's progress bar when embedding in memory.
        sources: Search engines to search as well (`deepresearch.retrievers.engines`: openalex, semanticscholar, arxiv,
            pubmed), fused with the corpus's retriever by reciprocal rank, or searched alone without a corpus.
        source_options: Options of every engine (`open_sources`: cache_dir, cache, timeout_s, base_urls...).

    Raises:
        ValueError: for an unknown kind, mode, setting or engine, or no corpus, index or engine.
        IndexMismatchError: for an index that cannot serve this request (another corpus, settings or
            model, a missing part, a changed corpus source, an older format).
        CorpusError: for a corpus spec that names nothing, or malformed data.

    Example:
        >>> retrieval = open_retriever(index="idx/scifact")  # doctest: +SKIP
        >>> retrieval.retriever.search("vitamin D and fractures", k=5)  # doctest: +SKIP
    """
    if kind not in KINDS:
        raise ValueError(f"unknown retriever {kind!r}; choose one of: {', '.join(KINDS)}")
    if qdrant_mode not in QDRANT_MODES:
        raise ValueError(f"unknown Qdrant mode {qdrant_mode!r}; choose one of: {', '.join(QDRANT_MODES)}")
    if qdrant_url and kind != "qdrant":
        raise ValueError(f"a Qdrant URL needs the qdrant retriever, not {kind}; pass --retriever qdrant")
    if corpus is None and index is None and not sources:
        raise ValueError(
            "nothing to search: pass a corpus (--corpus SPEC) or an index (--index DIR), or a search "
            "engine (--source openalex|semanticscholar|arxiv|pubmed)"
        )
    if sources:
        from deepresearch.retrievers.engines import engine_name  # lazy: start-up

        sources = list(dict.fromkeys(engine_name(s) for s in sources))  # a wrong name fails before anything is read
        if corpus is None and index is None:
            if qdrant_url:
                raise ValueError("a Qdrant URL needs a corpus or an index to search; search engines need none")
            return _with_engines(None, sources, source_options)
    bm25_settings("default" if bm25_preset is None else bm25_preset, bm25)  # a wrong name fails before anything is read
    if index is not None:
        local = _from_index(
            Path(index), corpus, kind, qdrant_url, qdrant_mode, dense_model, bm25, bm25_preset, data_dir, verify
        )
    else:
        if isinstance(corpus, Corpus):
            loaded = corpus
        else:
            assert corpus is not None  # no index: a corpus, or search engines alone (returned above)
            loaded, _ = load_source(resolve_source(corpus, data_dir=data_dir))
        local = _in_memory(
            loaded,
            kind,
            qdrant_url,
            qdrant_mode,
            dense_model,
            bm25_settings(bm25_preset or "default", bm25),
            show_progress,
        )
    return _with_engines(local, sources, source_options) if sources else local


def _with_engines(local: Retrieval | None, sources: Sequence[str], options: Mapping[str, Any] | None) -> Retrieval:
    """The search engines, fused with the local retrieval when there is one: its papers keep their corpus ids."""
    from deepresearch.retrievers.engines import open_sources  # lazy: start-up

    fused = open_sources(sources, local=None if local is None else local.retriever, **dict(options or {}))
    if local is None:  # search engines alone
        description = {
            "name": "+".join(sources),
            "documents": None,
            "retriever": "sources",
            "index": None,
            "bm25": None,
            "dense": None,
            "qdrant": None,
        }
        local = Retrieval(fused, None, "sources", description=description)
    parts = {**local.parts, **{n: fused.parts[n] for n in sources}}
    return Retrieval(
        fused, local.corpus, local.kind, parts, {**local.description, "sources": fused.describe()}, local.index
    )


def _in_memory(
    corpus: Corpus,
    kind: str,
    qdrant_url: str | None,
    qdrant_mode: str,
    dense_model: str | None,
    settings: dict[str, Any],
    show_progress: bool,
) -> Retrieval:
    parts: dict[str, Retriever] = {}
    model = dense_model or embed.DEFAULT_MODEL
    uses_dense = kind in ("dense", "hybrid") or (kind == "qdrant" and qdrant_mode != "bm25")
    if kind in ("bm25", "hybrid"):
        parts["bm25"] = BM25Retriever(corpus, **settings)
    if kind in ("dense", "hybrid"):
        logger.warning(
            "embedding %d documents in memory with %s; slow on a big corpus, where `deepresearch index "
            "CORPUS --out DIR --dense-model MODEL` embeds them once",
            len(corpus),
            model,
        )
        parts["dense"] = DenseRetriever(corpus, model, show_progress=show_progress)
    description = {
        "name": corpus.name,
        "documents": len(corpus),
        "retriever": kind,
        "index": None,
        "bm25": settings if kind in ("bm25", "hybrid", "qdrant") else None,
        "dense": model if uses_dense else None,
        "qdrant": None,
    }
    if kind == "qdrant":
        location = {"url": qdrant_url} if qdrant_url else {"path": ":memory:"}
        retriever = _qdrant(corpus, location, qdrant_mode, model, None, settings)
        description.update(qdrant=qdrant_url or ":memory:", qdrant_mode=qdrant_mode)
        return Retrieval(retriever, corpus, kind, {}, description)
    retriever = HybridRetriever(parts) if kind == "hybrid" else parts[kind]
    return Retrieval(retriever, corpus, kind, parts, description)


def _from_index(
    folder: Path,
    corpus: str | Corpus | None,
    kind: str,
    qdrant_url: str | None,
    qdrant_mode: str,
    dense_model: str | None,
    bm25: Mapping[str, Any] | None,
    bm25_preset: str | None,
    data_dir: str | Path | None,
    verify: bool,
) -> Retrieval:
    parts = {"bm25": ("bm25",), "dense": ("dense",), "hybrid": ("bm25", "dense"), "qdrant": ("dense",)}[kind]
    given = corpus if isinstance(corpus, Corpus) else None
    opened = open_index(folder, given, parts=parts, verify=verify)
    manifest = opened.manifest
    if isinstance(corpus, str):
        _check_same_corpus(folder, manifest, corpus, data_dir)
    stored = manifest.get("bm25")
    explicit = {**(BM25_PRESETS[bm25_preset] if bm25_preset else {}), **(bm25 or {})}
    for key, value in explicit.items():
        if stored and stored.get(key) != value:
            raise IndexMismatchError(
                f"index {folder} was built with {key}={stored.get(key)!r}, not {value!r}; leave the {key} setting "
                f"out (the index's own applies) or rebuild it with "
                f"{rebuild_command(folder, manifest, f' {_flag(key)} {value}')}"
            )
    dense = manifest.get("dense")
    if dense_model and dense and embed.resolve_model(dense_model) != embed.resolve_model(dense["model"]):
        raise IndexMismatchError(
            f"index {folder} holds embeddings of {dense['model']!r}, not {dense_model!r}; leave "
            f"the model out or rebuild it with "
            f"{rebuild_command(folder, manifest, f' --dense-model {dense_model}')}"
        )
    settings = {k: stored[k] for k in BM25_KEYS} if stored else bm25_settings(bm25_preset or "default", bm25)
    recorded = manifest["corpus"]
    description = {
        "name": recorded["name"],
        "documents": recorded["documents"],
        "retriever": kind,
        "index": str(folder),
        "fingerprint": recorded["fingerprint"][:12],
        "bm25": settings if kind != "dense" and stored else None,
        "dense": dense["model"] if dense and kind != "bm25" else None,
        "qdrant": None,
    }
    if kind == "qdrant":
        model = dense["model"] if dense else (dense_model or embed.DEFAULT_MODEL)
        embeddings = opened.dense.embeddings if opened.dense is not None else None
        location = {"url": qdrant_url} if qdrant_url else {"path": folder / "qdrant"}
        retriever = _qdrant(opened.corpus, location, qdrant_mode, model, embeddings, settings)
        description.update(
            bm25=settings, dense=model, qdrant=qdrant_url or str(folder / "qdrant"), qdrant_mode=qdrant_mode
        )
        return Retrieval(retriever, opened.corpus, kind, {}, description, opened)
    retriever = opened.retriever(kind)
    parts_by_name = {name: getattr(opened, name) for name in ("bm25", "dense") if getattr(opened, name) is not None}
    return Retrieval(retriever, opened.corpus, kind, parts_by_name, description, opened)


def _flag(key: str) -> str:
    """The `deepresearch index` option of a BM25 setting (`text_format` -> `--text-format`)."""
    return "--idf" if key == "method" else "--" + key.replace("_", "-")


def _check_same_corpus(folder: Path, manifest: Mapping, spec: str, data_dir: str | Path | None) -> None:
    """Refuses a corpus spec naming another corpus than the index's (by source, else by fingerprint)."""
    recorded = manifest["corpus"]
    source = resolve_source(spec, data_dir=data_dir)
    if same_source(source, recorded.get("source")):
        return
    corpus, _ = load_source(source)
    if corpus.fingerprint() != recorded["fingerprint"]:
        raise IndexMismatchError(
            f"index {folder} holds corpus {recorded['name']!r} ({recorded['documents']} documents), "
            f"not {spec} ({len(corpus)} documents); leave the corpus out or rebuild the index "
            f"with `deepresearch index {spec} --out {folder}`"
        )


def _qdrant(
    corpus: Corpus, location: Mapping[str, Any], mode: str, model: str, embeddings, settings: Mapping[str, Any]
) -> Retriever:
    # one collection per corpus, so a server can hold several; its BM25 settings are checked on reuse
    collection = f"deepresearch-{corpus.fingerprint()[:12]}"
    return QdrantRetriever(
        corpus,
        **location,
        collection=collection,
        mode=mode,
        model=model,
        embeddings=embeddings,
        tokenizer=settings["tokenizer"],
        k1=settings["k1"],
        b=settings["b"],
        text_format=settings["text_format"],
    )
