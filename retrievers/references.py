"""Reference files as corpora: BibTeX (`.bib`), RIS (`.ris`) and CSV (`.csv`) exports of a reference manager.

Each entry becomes a Doc: its title, abstract (the text; empty when the entry has none, so only its title
is searched), year, authors, venue and DOI (`deepresearch.retrievers.bibliographic` reads the last three). Ids are the
BibTeX key, else the entry's `ID`/`id`, else its DOI, else `<file stem>-<n>`.

An entry without a title (or with a year that is no number) is skipped; one warning line gives the count
and the first bad entry's line: "refs.ris: skipped 2 bad entries (first at line 14: no title)".
BibTeX is parsed with bibtexparser 2 (MIT; the `refs` extra); RIS and CSV with the standard library.
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deepresearch.retrievers.corpus import CorpusError
from deepresearch.retrievers.extras import require
from deepresearch.retrievers.types import Doc

logger = logging.getLogger(__name__)

SUFFIXES = (".bib", ".ris", ".csv")
_RIS_LINE = re.compile(r"^([A-Z][A-Z0-9])  ?-(?: (.*))?$")
_RIS = {
    "title": ("TI", "T1", "CT"),
    "abstract": ("AB", "N2"),
    "authors": ("AU", "A1", "A2"),
    "year": ("PY", "Y1", "DA"),
    "doi": ("DO",),
    "id": ("ID",),
    "url": ("UR", "L2"),
    "venue": ("JO", "JF", "T2", "J2"),
}
_BRACES = re.compile(r"[{}]")


class BadEntry(ValueError):
    """An entry that cannot be used, with the line it starts at."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line}: {reason}")
        self.line, self.reason = line, reason


def _year(value, line: int) -> int | None:
    text = str(value or "").strip()
    if not text:
        return None
    m = re.match(r"(\d{4})", text)
    if not m:
        raise BadEntry(line, f"year {text[:20]!r} is not a number")
    return int(m.group(1))


def _doc(fields: dict, line: int, fallback_id: str) -> Doc:
    """A Doc from an entry's normalised fields (title, abstract, year, authors, doi, id, url, venue)."""
    title = " ".join(_BRACES.sub("", str(fields.get("title") or "")).split())
    if not title:
        raise BadEntry(line, "no title")
    year = _year(fields.get("year"), line)
    meta = {k: fields[k] for k in ("authors", "venue", "doi") if fields.get(k)}
    doc_id = str(fields.get("id") or fields.get("doi") or fallback_id).strip()
    return Doc(
        doc_id=doc_id,
        title=title,
        text=" ".join(_BRACES.sub("", str(fields.get("abstract") or "")).split()),
        url=(str(fields.get("url")).strip() or None) if fields.get("url") else None,
        year=year,
        published=str(year) if year else None,
        metadata=meta,
    )


def _ris_entries(path: Path) -> Iterator[tuple[int, dict[str, list[str]] | None]]:
    """(line of `TY`, {tag: [values]}) per RIS record; a record cut short by another `TY` or the file's end
    yields its line with `None`."""
    start = 0
    tags: dict[str, list[str]] | None = None
    last: str | None = None
    with path.open(encoding="utf-8-sig") as f:
        for n, raw in enumerate(f, start=1):
            line = raw.rstrip("\r\n")
            m = _RIS_LINE.match(line)
            if m is None:
                if tags is not None and last and line.strip():  # a wrapped value continues the last tag
                    tags[last][-1] += " " + line.strip()
                continue
            tag, value = m.group(1), (m.group(2) or "").strip()
            if tag == "TY":
                if tags is not None:
                    yield start, None
                start, tags, last = n, {}, None
            elif tag == "ER":
                if tags is not None:
                    yield start, tags
                tags, last = None, None
            elif tags is not None:
                tags.setdefault(tag, []).append(value)
                last = tag
    if tags is not None:
        yield start, None


def read_ris(path: Path) -> tuple[list[Doc], list[BadEntry]]:
    docs, bad = [], []
    for i, (line, tags) in enumerate(_ris_entries(path), start=1):
        try:
            if tags is None:
                raise BadEntry(line, "record has no ER end tag")
            first: dict[str, Any] = {k: next((tags[t][0] for t in ts if tags.get(t)), None) for k, ts in _RIS.items()}
            first["authors"] = [a for t in _RIS["authors"] for a in tags.get(t, ()) if a]
            first["abstract"] = " ".join(tags.get("AB") or tags.get("N2") or ())
            docs.append(_doc(first, line, f"{path.stem}-{i}"))
        except BadEntry as err:
            bad.append(err)
    return docs, bad


def read_csv(path: Path) -> tuple[list[Doc], list[BadEntry]]:
    """Columns (case-insensitive): title, abstract, year, authors (`;`-separated), doi, id, url, venue/journal."""
    docs: list[Doc] = []
    bad: list[BadEntry] = []
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f, strict=True)  # an unterminated quote is an error, not one garbage record
        try:
            header = {(h or "").strip().lower(): h for h in reader.fieldnames or ()}
            if "title" not in header:
                raise CorpusError(
                    f"{path}: the CSV has no 'title' column (found: {', '.join(header) or 'none'}); "
                    f"name the columns title, abstract, year, authors, doi"
                )
            for i, row in enumerate(reader, start=1):
                line = reader.line_num
                values = {k: (row.get(h) or "").strip() for k, h in header.items()}
                fields = {k: values.get(k) for k in ("title", "abstract", "year", "doi", "id", "url")}
                fields["venue"] = values.get("venue") or values.get("journal")
                fields["authors"] = [
                    a.strip() for a in (values.get("authors") or values.get("author") or "").split(";") if a.strip()
                ]
                try:
                    docs.append(_doc(fields, line, f"{path.stem}-{i}"))
                except BadEntry as err:
                    bad.append(err)
            return docs, bad
        except csv.Error as err:
            raise CorpusError(
                f'{path}: the CSV is malformed ({err}); check its quotes: a field that opens with " must close with "'
            ) from None


def read_bib(path: Path) -> tuple[list[Doc], list[BadEntry]]:
    bibtexparser = require("bibtexparser", "refs", "reading BibTeX")
    library = bibtexparser.parse_string(path.read_text(encoding="utf-8-sig"))
    docs, bad = [], []
    blocks = [(e.start_line, e) for e in library.entries] + [(b.start_line, None) for b in library.failed_blocks]
    for i, (start, entry) in enumerate(sorted(blocks, key=lambda x: x[0]), start=1):
        line = start + 1  # bibtexparser counts lines from 0
        try:
            if entry is None:
                raise BadEntry(line, "not a BibTeX entry bibtexparser can read")
            f = {k.lower(): v.value for k, v in entry.fields_dict.items()}
            fields = {
                "title": f.get("title"),
                "abstract": f.get("abstract"),
                "year": f.get("year") or f.get("date"),
                "doi": f.get("doi"),
                "url": f.get("url"),
                "id": entry.key,
                "venue": f.get("journal") or f.get("booktitle"),
                "authors": [
                    a.strip() for a in re.split(r"\s+and\s+", _BRACES.sub("", f.get("author") or "")) if a.strip()
                ],
            }
            docs.append(_doc(fields, line, f"{path.stem}-{i}"))
        except BadEntry as err:
            bad.append(err)
    return docs, bad


READERS = {".bib": read_bib, ".ris": read_ris, ".csv": read_csv}


def load_references(path: str | Path) -> tuple[list[Doc], int]:
    """The entries of a `.bib`, `.ris` or `.csv` file as Docs, and how many bad entries were skipped.

    Raises:
        CorpusError: for another suffix, or a file with no usable entry (the first bad one named).
    """
    path = Path(path).expanduser()
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise CorpusError(f"{path}: not a reference file; use .bib, .ris or .csv")
    docs, bad = reader(path)
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):  # two entries with one id (a DOI listed twice) keep the first; the rest get -2, -3
        if d.doc_id in seen:
            seen[d.doc_id] += 1
            docs[i] = Doc(f"{d.doc_id}-{seen[d.doc_id]}", d.title, d.text, d.url, d.year, d.published, d.metadata)
        else:
            seen[d.doc_id] = 1
    if bad:
        first = min(bad, key=lambda b: b.line)
        note = f"{path.name}: skipped {len(bad)} bad entries (first at line {first.line}: {first.reason})"
        if not docs:
            raise CorpusError(f"{note}; no usable entry is left: give each entry a title")
        logger.warning(note)
    elif not docs:
        raise CorpusError(f"{path}: no entries; export at least one reference")
    return docs, len(bad)
