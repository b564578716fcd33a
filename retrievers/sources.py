"""One grammar for corpus and dataset specs, shared by every command.

A spec is read as the first of these that applies:
  1. an existing path: a `.jsonl` file, a BEIR folder (holding `corpus.jsonl`), a `.json` ScholarGym
     paper DB, a reference file (`.bib`, `.ris`, `.csv`: `deepresearch.retrievers.references`), or full text: a
     folder of `.pdf`, `.txt` and `.md` files, or one such file, read as passages (`deepresearch.retrievers.pdf`);
  2. `hf:NAME`: a Hugging Face dataset (a hub name, or a local path `datasets` can read);
  3. a dataset name in the data folder (`$DEEPRESEARCH_DATA` on the command line), case-insensitive; for
     `owner/name` the folder `name`, so `BeIR/scifact` is the local `scifact` when there is one;
  4. a dataset embedded in the package (`EMBEDDED`: `scifact`, the demo corpus), by the same names; a copy in
     the data folder is preferred, so an index built over it stays valid;
  5. a bare `owner/name`: a Hugging Face hub dataset.
Query sets use the same lookup (`find_local`). The `source` record `resolve_source` returns is what a
persistent index stores to reopen its corpus, and to notice when it changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from deepresearch.retrievers.corpus import Corpus, CorpusError, read_jsonl, resolve_corpus_file
from deepresearch.retrievers.hf import load_hf_corpus
from deepresearch.retrievers.passages import MAX_CHARS, OVERLAP
from deepresearch.retrievers.pdf import SUFFIXES as FULLTEXT_SUFFIXES
from deepresearch.retrievers.pdf import fulltext_files, load_fulltext
from deepresearch.retrievers.references import SUFFIXES as REFERENCE_SUFFIXES
from deepresearch.retrievers.references import load_references
from deepresearch.retrievers.scholargym import load_paper_db

HF_PREFIX = "hf:"
# Datasets shipped inside the package: SciFact's BEIR release (5,183 abstracts, corpus gzipped), the corpus a
# run searches when none is named. Licences and source: embedded-corpora/scifact/ATTRIBUTION.md.
# (a folder name that is no Python identifier, so setuptools does not take it for a package)
EMBEDDED = Path(__file__).resolve().parent / "embedded-corpora"
DEFAULT_CORPUS = "scifact"


def data_names(data_dir: str | Path | None) -> dict[str, Path]:
    """Lower-cased names of the dataset folders in the data folder, and their paths (none without one)."""
    root = Path(data_dir).expanduser() if data_dir else None
    if root is None or not root.is_dir():
        return {}
    return {p.name.lower(): p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")}


def _is_hub_name(spec: str) -> bool:
    return spec.count("/") == 1 and not spec.startswith((".", "/", "~")) and all(spec.split("/"))


def find_local(spec: str | Path, data_dir: str | Path | None = None) -> Path | None:
    """The local file or folder `spec` names: an existing path, else an entry of `data_dir` (rule 3 above).

    Returns None for anything else (`hf:NAME`, a hub name with no local copy, a missing path).
    """
    path = Path(spec).expanduser()
    if path.exists():
        return path
    spec = str(spec)
    if spec.startswith(HF_PREFIX):
        return None
    names = {**data_names(EMBEDDED), **data_names(data_dir)}  # the data folder's win over the embedded ones
    candidates = [spec, spec.rsplit("/", 1)[-1]] if _is_hub_name(spec) else [spec]
    return next((names[c.lower()] for c in candidates if c.lower() in names), None)


def not_found_message(spec: str, data_dir: str | Path | None, what: str = "corpus") -> str:
    names = ", ".join(data_names(data_dir)) or "none"
    where = f"under $DEEPRESEARCH_DATA ({names})" if data_dir else "under $DEEPRESEARCH_DATA (not set)"
    embedded = ", ".join(data_names(EMBEDDED))
    return (
        f"{what} not found: {spec}; pass a .jsonl file, a BEIR folder, a ScholarGym paper DB (.json), "
        f"a folder of PDFs, a .bib/.ris/.csv reference file, hf:NAME or a Hugging Face owner/name, a dataset name "
        f"{where}, or an embedded one ({embedded})"
    )


def _is_fulltext(path: Path) -> bool:
    """One `.pdf`/`.txt`/`.md` file, or a folder of them holding no JSON data (a dataset folder keeps its README)."""
    if path.is_file():
        return path.suffix.lower() in FULLTEXT_SUFFIXES
    return (
        path.is_dir() and not any(path.glob("*.json")) and not any(path.glob("*.jsonl")) and bool(fulltext_files(path))
    )


def resolve_source(
    spec: str,
    *,
    data_dir: str | Path | None = None,
    skip_bad: bool = False,
    hf_config: str | None = None,
    hf_split: str = "train",
    fields: Mapping[str, str] | None = None,
) -> dict:
    """The source record of `spec`, without reading the corpus.

    Raises:
        CorpusError: when the spec names nothing (the message lists the data folder's datasets).
    """
    spec = str(spec)
    hf = {"kind": "hf", "name": spec, "config": hf_config, "split": hf_split, "fields": dict(fields or {})}
    if spec.startswith(HF_PREFIX):
        local = Path(spec[len(HF_PREFIX) :]).expanduser()
        return {**hf, "name": str(local.resolve()) if local.exists() else spec[len(HF_PREFIX) :]}
    path = find_local(spec, data_dir)
    if path is None:
        if _is_hub_name(spec):
            return hf
        raise CorpusError(not_found_message(spec, data_dir))
    named = Path(spec).expanduser().exists()  # reference files and full text only by path, never by dataset name
    path = path.resolve()
    if path.is_file() and path.suffix == ".json":
        return {"kind": "paper_db", "path": str(path), "skip_bad": skip_bad}
    if named and path.is_file() and path.suffix.lower() in REFERENCE_SUFFIXES:
        return {"kind": "refs", "path": str(path)}
    if named and _is_fulltext(path):
        return {"kind": "fulltext", "path": str(path), "passage_chars": MAX_CHARS, "passage_overlap": OVERLAP}
    resolve_corpus_file(path)  # a folder without corpus.jsonl fails here, before anything is read
    return {"kind": "jsonl", "path": str(path), "skip_bad": skip_bad}


def source_extras(source: Mapping) -> dict[str, str]:
    """The extras reading a source record needs (extra -> what needs it), for `extras.check_extras`: `hf` for
    a Hugging Face dataset, `pdf` for full text holding a PDF, `refs` for a BibTeX file."""
    kind, path = source.get("kind"), Path(source.get("path") or "")
    if kind == "hf":
        return {"hf": f"the Hugging Face dataset {source.get('name')}"}
    if kind == "fulltext" and any(f.suffix.lower() == ".pdf" for f in fulltext_files(path)):
        return {"pdf": f"reading the PDFs of {path.name}"}
    if kind == "refs" and path.suffix.lower() == ".bib":
        return {"refs": f"reading the BibTeX file {path.name}"}
    return {}


def load_source(source: Mapping) -> tuple[Corpus, int]:
    """Reads the corpus a source record describes; returns it and the number of skipped bad lines."""
    kind = source.get("kind")
    skip_bad = bool(source.get("skip_bad"))
    if kind == "hf":
        corpus = load_hf_corpus(
            source["name"], source.get("config"), source.get("split", "train"), source.get("fields"), skip_bad=skip_bad
        )
        return corpus, 0
    if kind == "paper_db":
        return load_paper_db(source["path"], skip_bad=skip_bad), 0
    if kind == "refs":
        docs, skipped = load_references(source["path"])
        return Corpus(docs, name=Path(source["path"]).name), skipped
    if kind == "fulltext":
        docs, skipped = load_fulltext(
            source["path"],
            max_chars=source.get("passage_chars", MAX_CHARS),
            overlap=source.get("passage_overlap", OVERLAP),
        )
        return Corpus(docs, name=Path(source["path"]).name), skipped
    if kind == "jsonl":
        path = Path(source["path"])
        file = resolve_corpus_file(path)
        docs, skipped = read_jsonl(file, skip_bad=skip_bad)
        return Corpus(docs, name=path.name or file.stem), skipped
    raise CorpusError(f"unknown corpus source kind {kind!r}; rebuild the index with `deepresearch index`")


def open_corpus(
    spec: str,
    *,
    data_dir: str | Path | None = None,
    skip_bad: bool = False,
    hf_config: str | None = None,
    hf_split: str = "train",
    fields: Mapping[str, str] | None = None,
) -> tuple[Corpus, dict, int]:
    """Loads the corpus named by `spec`; returns it, its source record and the number of skipped bad lines.

    Args:
        spec: See the module docstring.
        data_dir: The folder dataset names are looked up in.
        skip_bad: Skip malformed lines (counted) instead of raising.
        hf_config, hf_split, fields: For Hugging Face datasets: configuration, split, and a mapping of Doc
            attributes to columns.

    Raises:
        CorpusError: for a spec naming nothing, or malformed data (file and line named).

    Example:
        >>> corpus, source, _ = open_corpus("scifact", data_dir=os.environ["DEEPRESEARCH_DATA"])  # doctest: +SKIP
    """
    source = resolve_source(
        spec, data_dir=data_dir, skip_bad=skip_bad, hf_config=hf_config, hf_split=hf_split, fields=fields
    )
    try:
        corpus, skipped = load_source(source)
    except UnicodeDecodeError as err:  # the codec's message names no file
        files = ", ".join(str(f) for f in source_files(source)) or spec
        raise CorpusError(
            f"{files}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start} of "
            f"a line or a file); save the corpus as UTF-8"
        ) from None
    return corpus, source, skipped


def source_files(source: Mapping) -> list[Path]:
    """The local files a source reads (none for a hub dataset), to notice when they change."""
    if source.get("kind") == "jsonl":
        return [resolve_corpus_file(source["path"])]
    if source.get("kind") in ("paper_db", "refs"):
        return [Path(source["path"])]
    if source.get("kind") == "fulltext":  # the folders too: adding or removing a paper changes their mtime
        root = Path(source["path"])
        folders = [root, *sorted(p for p in root.rglob("*") if p.is_dir())] if root.is_dir() else []
        return folders + fulltext_files(root)
    local = Path(source.get("name") or "")
    if source.get("kind") == "hf" and local.is_absolute() and local.exists():
        return sorted(p for p in local.rglob("*") if p.is_file()) if local.is_dir() else [local]
    return []


def same_source(a: Mapping | None, b: Mapping | None) -> bool:
    """True when two source records name the same data (skipping bad lines or not aside)."""
    if not a or not b:
        return False
    keys = ("kind", "path", "name", "config", "split", "fields", "passage_chars", "passage_overlap")
    return all(a.get(k) == b.get(k) for k in keys)
