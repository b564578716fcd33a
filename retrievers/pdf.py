"""Full-text documents: PDFs (with pypdf), plain text and Markdown files, one file a paper.

pypdf (BSD licence, pure Python) reads the text and the document information: its title, author and
creation date. A file with no title there takes its first non-empty line as the title. A folder of such
files is a corpus of passages (`deepresearch.retrievers.passages`): `smith2020.pdf` gives `smith2020#1`, `#2`, ...
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepresearch.retrievers.corpus import CorpusError
from deepresearch.retrievers.extras import require
from deepresearch.retrievers.passages import MAX_CHARS, OVERLAP, PASSAGE_SEP, passage_docs
from deepresearch.retrievers.types import Doc

logger = logging.getLogger(__name__)

SUFFIXES = (".pdf", ".txt", ".md")
_PDF_DATE = re.compile(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?")
_AUTHOR_SPLIT = re.compile(r"\s*;\s*|\s+and\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Paper:
    """The text of one full-text document and what it says about itself.

    Attributes:
        title: From the PDF's document information, else the first non-empty line.
        text: The whole text, pages joined by blank lines.
        authors: From the PDF's `Author` entry (split at `;` and `and`), else none.
        published: `YYYY`, `YYYY-MM` or `YYYY-MM-DD` from the PDF's creation date, else None.
        pages: Pages of a PDF (0 for a text file).
    """

    title: str
    text: str
    authors: tuple[str, ...] = ()
    published: str | None = None
    pages: int = 0


def first_line(text: str, max_chars: int = 200) -> str:
    """The first non-empty line, without Markdown heading marks, cut to `max_chars`."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:max_chars]
    return ""


def _pdf_date(value) -> str | None:
    m = _PDF_DATE.match(str(value or "").strip())
    if not m or not 1000 <= int(m.group(1)) <= 9999:
        return None
    return "-".join(p for p in m.groups() if p)


def read_pdf(source: str | Path | bytes, name: str = "") -> Paper:
    """Reads the text and document information of a PDF (a path or its bytes).

    Raises:
        CorpusError: for a file pypdf cannot read, an encrypted file, or a PDF without extractable text
            (a scanned one), naming `name` (or the path) and what to do.
        MissingExtra: when pypdf is not installed, naming the extra to install.
    """
    require("pypdf", "pdf", "reading PDFs")  # one line naming the extra when pypdf is missing
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    name = name or (str(source) if not isinstance(source, bytes) else "PDF")
    try:
        reader = PdfReader(io.BytesIO(source) if isinstance(source, bytes) else str(source))
        if reader.is_encrypted and not reader.decrypt(""):
            raise CorpusError(f"{name}: the PDF is encrypted; save a copy without a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        info: Mapping[str, Any] = reader.metadata or {}
        title, author, created = (str(info.get(k) or "").strip() for k in ("/Title", "/Author", "/CreationDate"))
    except CorpusError:
        raise
    except (PyPdfError, OSError, ValueError, KeyError, TypeError) as err:
        raise CorpusError(
            f"{name}: not a readable PDF ({type(err).__name__}: {err}); check the file or remove it"
        ) from err
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise CorpusError(f"{name}: the PDF has no extractable text (a scanned PDF?); run OCR on it or remove it")
    authors = tuple(a for a in _AUTHOR_SPLIT.split(author) if a) if author else ()
    return Paper(
        title=title or first_line(text), text=text, authors=authors, published=_pdf_date(created), pages=len(pages)
    )


def read_text_file(path: str | Path) -> Paper:
    """A `.txt` or `.md` file: its first non-empty line is the title, the whole file the text."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); convert it to UTF-8") from err
    if not text.strip():
        raise CorpusError(f"{path}: the file is empty; remove it")
    return Paper(title=first_line(text), text=text)


def paper_doc(paper: Paper, doc_id: str, path: Path | None = None, url: str | None = None) -> Doc:
    """The whole paper as one Doc (before it is split into passages)."""
    year = int(paper.published[:4]) if paper.published else None
    meta: dict = {}
    if paper.authors:
        meta["authors"] = list(paper.authors)
    if path is not None:
        meta["path"] = str(path)
    if paper.pages:
        meta["pages"] = paper.pages
    return Doc(
        doc_id=doc_id, title=paper.title, text=paper.text, url=url, year=year, published=paper.published, metadata=meta
    )


def fulltext_files(path: str | Path) -> list[Path]:
    """The `.pdf`, `.txt` and `.md` files of a folder (and its subfolders), in name order; or the file itself."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file()
        and p.suffix.lower() in SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def _paper_ids(files: list[Path], root: Path) -> list[str]:
    """Ids from file names without suffix (`sub/smith2020`); a name two files share keeps its suffix."""
    base = root if root.is_dir() else root.parent
    stems = [str(f.relative_to(base).with_suffix("")).replace(PASSAGE_SEP, "_") for f in files]
    return [
        s if stems.count(s) == 1 else str(f.relative_to(base)).replace(PASSAGE_SEP, "_") for s, f in zip(stems, files)
    ]


def load_fulltext(
    path: str | Path, *, max_chars: int = MAX_CHARS, overlap: int = OVERLAP, skip_bad: bool = True
) -> tuple[list[Doc], int]:
    """The passages of every full-text file under `path` (a folder, or one file), and how many files failed.

    Args:
        path: A folder of `.pdf`, `.txt` and `.md` files, or one such file.
        max_chars, overlap: Passage length and overlap (`deepresearch.retrievers.passages.split_passages`).
        skip_bad: Skip a file that cannot be read (counted, and named in one warning) instead of raising.

    Raises:
        CorpusError: for a folder with no such files, or (without `skip_bad`) an unreadable file.
    """
    root = Path(path).expanduser()
    files = fulltext_files(root)
    if not files:
        raise CorpusError(f"no .pdf, .txt or .md files in {root}; point --corpus to a folder of papers")
    docs, bad = [], []
    for file, pid in zip(files, _paper_ids(files, root)):
        try:
            paper = read_pdf(file) if file.suffix.lower() == ".pdf" else read_text_file(file)
            docs.extend(passage_docs(paper_doc(paper, pid, file), max_chars, overlap))
        except CorpusError as err:
            if not skip_bad:
                raise
            bad.append(str(err))
    if bad:
        logger.warning("%s: skipped %d unreadable files (first: %s)", root, len(bad), bad[0])
    return docs, len(bad)
