"""Opening a corpus from one spec string: a JSONL file, a BEIR folder, ScholarGym's paper DB or a HF dataset.

The returned `source` record is what a persistent index stores to reopen (and re-verify) its corpus.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from retrievers.corpus import Corpus, read_jsonl, resolve_corpus_file
from retrievers.hf import load_hf_corpus
from retrievers.scholargym import load_paper_db

HF_PREFIX = "hf:"


def open_corpus(spec: str, *, skip_bad: bool = False, hf_config: str | None = None, hf_split: str = "train",
                fields: Mapping[str, str] | None = None) -> tuple[Corpus, dict, int]:
    """Loads the corpus named by `spec`; returns it, its source record and the number of skipped bad lines.

    `spec` is a `.jsonl` file or BEIR folder, a `.json` ScholarGym paper DB, or `hf:NAME` for a Hugging
    Face dataset (hub name or local path; `hf_config`, `hf_split` and `fields` apply).

    Raises:
        CorpusError: for a missing path or malformed data (file and line named).
    """
    if spec.startswith(HF_PREFIX):
        name = spec[len(HF_PREFIX):]
        local = Path(name).expanduser()
        name = str(local.resolve()) if local.exists() else name
        corpus = load_hf_corpus(name, hf_config, hf_split, fields, skip_bad=skip_bad)
        source = {"kind": "hf", "name": name, "config": hf_config, "split": hf_split, "fields": dict(fields or {})}
        return corpus, source, 0
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".json":
        corpus = load_paper_db(path, skip_bad=skip_bad)
        return corpus, {"kind": "paper_db", "path": str(path.resolve())}, 0
    file = resolve_corpus_file(path)
    docs, skipped = read_jsonl(file, skip_bad=skip_bad)
    corpus = Corpus(docs, name=path.resolve().name or file.stem)
    return corpus, {"kind": "jsonl", "path": str(path.resolve()), "skip_bad": skip_bad}, skipped


def reopen_corpus(source: Mapping) -> Corpus:
    """Loads the corpus a source record (from `open_corpus`) describes."""
    kind = source.get("kind")
    if kind == "hf":
        return load_hf_corpus(source["name"], source.get("config"), source.get("split", "train"),
                              source.get("fields"))
    if kind == "paper_db":
        return load_paper_db(source["path"])
    if kind == "jsonl":
        return open_corpus(source["path"], skip_bad=bool(source.get("skip_bad")))[0]
    raise ValueError(f"unknown corpus source kind {kind!r} in the index manifest; rebuild the index")
