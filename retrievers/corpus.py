"""Loading corpora from JSONL files and BEIR folders."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from deepresearch.retrievers.ranking import month_key
from deepresearch.retrievers.types import Doc

logger = logging.getLogger(__name__)


class CorpusError(ValueError):
    """A corpus that cannot be read, with the file, the line and what to do."""


# Field names accepted for each Doc attribute, first match wins (BEIR, ScholarGym, generic).
ID_KEYS = ("_id", "doc_id", "id", "arxiv_id", "paper_id", "corpus_id")
TITLE_KEYS = ("title",)
TEXT_KEYS = ("text", "abstract", "contents", "body")
URL_KEYS = ("url", "link")


class Corpus(Sequence[Doc]):
    """An ordered, id-addressable collection of documents.

    Args:
        docs: The documents, in corpus order (which is also the tie-break order of retrievers).
        name: A short name for messages and traces.

    Raises:
        CorpusError: when `docs` is empty or two documents share an id.
    """

    def __init__(self, docs: Sequence[Doc], name: str = "corpus"):
        if not docs:
            raise CorpusError(f"corpus {name!r} has no documents; point to a file with at least one record")
        self.docs = list(docs)
        self.name = name
        self._by_id: dict[str, int] = {}
        for i, doc in enumerate(self.docs):
            if doc.doc_id in self._by_id:
                raise CorpusError(f"corpus {name!r} repeats document id {doc.doc_id!r}; ids must be unique")
            self._by_id[doc.doc_id] = i

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i):
        return self.docs[i]

    def __iter__(self) -> Iterator[Doc]:
        return iter(self.docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._by_id

    def get(self, doc_id: str) -> Doc | None:
        i = self._by_id.get(doc_id)
        return None if i is None else self.docs[i]

    def index_of(self, doc_id: str) -> int:
        return self._by_id[doc_id]

    def month_keys(self) -> np.ndarray:
        """Each document's publication month as the integer YYYYMM (0 when unknown), for date filters."""
        return np.fromiter((month_key(d.published) for d in self.docs), dtype=np.int32, count=len(self.docs))

    def fingerprint(self) -> str:
        """SHA-1 over ids, titles and texts: changes whenever the content does."""
        h = hashlib.sha1()
        for d in self.docs:
            for part in (d.doc_id, d.title, d.text):
                h.update(part.encode("utf-8"))
                h.update(b"\x00")
        return h.hexdigest()


def _first(record: dict, keys: Sequence[str]):
    return next((record[k] for k in keys if record.get(k) is not None), None)


def _year(record: dict) -> tuple[int | None, str | None]:
    published = _first(record, ("published", "date", "publication_date"))
    year = _first(record, ("year",))
    nested = record.get("metadata")
    if published is None and year is None and isinstance(nested, dict):  # BEIR keeps them there; top level wins
        published, year = _first(nested, ("published", "date", "publication_date")), _first(nested, ("year",))
    if published is not None:
        published = str(published)
        if year is None and published[:4].isdigit():
            year = int(published[:4])
    try:
        year = int(year) if year is not None else None
    except (TypeError, ValueError):
        year = None
    if year is not None and not 1000 <= year <= 9999:  # "801" is no year (CSFCube has one)
        year = None
    return year, published


def doc_from_record(record: dict, where: str) -> Doc:
    """Builds a Doc from one JSON record.

    Raises:
        CorpusError: when the record has no id or no text, naming `where` (file:line).
    """
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}; fix or remove the line")
    doc_id = _first(record, ID_KEYS)
    if doc_id is None or str(doc_id) == "":
        raise CorpusError(f"{where}: record has no id (expected one of {', '.join(ID_KEYS)}); fix or remove the line")
    title = _first(record, TITLE_KEYS) or ""
    text = _first(record, TEXT_KEYS)
    if text is None:
        raise CorpusError(
            f"{where}: record {doc_id!r} has no text (expected one of {', '.join(TEXT_KEYS)}); fix or remove the line"
        )
    year, published = _year(record)
    known = set(ID_KEYS + TITLE_KEYS + TEXT_KEYS + URL_KEYS) | {"year", "published"}
    meta = {k: v for k, v in record.items() if k not in known}
    return Doc(
        doc_id=str(doc_id),
        title=str(title),
        text=str(text),
        url=_first(record, URL_KEYS),
        year=year,
        published=published,
        metadata=meta,
    )


def read_jsonl(path: Path, skip_bad: bool = False) -> tuple[list[Doc], int]:
    """Reads one Doc per non-empty line (of a gzip file when the name ends in .gz); returns the docs and the
    number of skipped bad lines."""
    docs, skipped = [], 0
    with _open_text(path) as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise CorpusError(f"{where}: line is not valid JSON ({err.msg}); fix or remove the line") from err
                docs.append(doc_from_record(record, where))
            except CorpusError:
                if not skip_bad:
                    raise
                skipped += 1
    if skipped:
        logger.warning("skipped %d bad lines in %s", skipped, path)
    return docs, skipped


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def resolve_corpus_file(path: str | Path) -> Path:
    """Finds the corpus file: a JSONL file itself (`.jsonl` or `.jsonl.gz`), or `corpus.jsonl` (else
    `corpus.jsonl.gz`) inside a BEIR folder."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = next((f for f in (p / "corpus.jsonl", p / "corpus.jsonl.gz") if f.exists()), p / "corpus.jsonl")
    if not p.exists():
        raise CorpusError(f"corpus not found at {path}; pass a .jsonl file or a BEIR folder containing corpus.jsonl")
    return p


def load_corpus(path: str | Path, skip_bad: bool = False) -> Corpus:
    """Loads a corpus from a JSONL file or a BEIR folder.

    Args:
        path: A `.jsonl` file (one object per line with an id, optional title, and text; `.jsonl.gz` when
            compressed) or a folder holding `corpus.jsonl` or `corpus.jsonl.gz` (BEIR layout: `_id`, `title`,
            `text`).
        skip_bad: Skip malformed lines (counted in a warning) instead of raising.

    Raises:
        CorpusError: for a missing path, a malformed line (file and line named) or an empty corpus.

    Example:
        >>> corpus = load_corpus("data/scifact")  # doctest: +SKIP
    """
    file = resolve_corpus_file(path)
    docs, _ = read_jsonl(file, skip_bad=skip_bad)
    name = Path(path).name or file.stem
    return Corpus(docs, name=name)
