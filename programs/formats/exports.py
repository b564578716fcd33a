"""Exports of a report's references: BibTeX (`deepresearch run --bibtex` writes references.bib) and RIS
(`--ris`, references.ris), the two formats every reference manager imports.

A small writer rather than a library: the entries are flat (title, authors, year, venue, DOI, URL, a note)
and what matters is escaping and keys, which fit in a few lines here; the tests read the file back
with `bibtexparser`, an independent parser, so the writer's output is checked by something it did not write.
The libraries were tried and delete nothing here: bibtexparser 2.1's writer lays out what it is
given and leaves escaping to a pylatexenc middleware that turns every accent into a macro (UTF-8 lost) and
runs over `doi` and `url` too (escaped underscores, a URL macro); pybtex 0.26's leaves `$`, `^`, braces and
backslashes as they are, escapes `_` in URLs and splits an organisation's name into given and family names.

- Text fields are UTF-8 with LaTeX's special characters escaped, so the file reads as written under
  BibTeX and biber; titles are braced twice (`title = {{...}}`) so styles keep their capitals. A record's text
  is data: its HTML tags (`<i>`, a `<script>` with its content) and control characters are dropped
  (`strip_markup`), and a `<` or `>` left is written as LaTeX's `\textless{}`/`\textgreater{}`.
- `doi` and `url` are written verbatim (they are verbatim fields), braces and backslashes percent-encoded,
  control characters and script elements dropped.
- Keys are `<family name><year><first title word>` in ASCII (`smith2020vitamin`; `vitamin2020` without
  authors), letters appended on a clash (`smith2020vitaminb`), so a report's keys are the same every
  time it is exported.
- `@article` with `journal` when the record names a venue, `@inproceedings` with `booktitle` when that
  venue is proceedings or a conference, else `@misc`. `note` names the corpus id and the report's number.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from deepresearch.programs.artifacts import Reference
from deepresearch.programs.runtime.text import collapse_whitespace, strip_markup

# LaTeX's ten special characters and the angle brackets (not in every font encoding); the backslash first, so
# the escapes it adds are not escaped again.
_LATEX = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
_LATEX_CHARS = re.compile("|".join(re.escape(c) for c in _LATEX))
_VERBATIM_UNSAFE = {"{": "%7B", "}": "%7D", "\\": "%5C"}
_PROCEEDINGS = re.compile(r"\b(?:proceedings|proc\.|conference|workshop|symposium)\b", re.I)
_KEY_STOP = frozenset("a an the of on in for and to with from by at is are as via do does".split())

HEADER = "% References of report.md, in citation order. Encoding: UTF-8.\n"


def latex_escape(text: str) -> str:
    r"""`text` on one line, without HTML tags or control characters, with LaTeX's special characters escaped.

    Example:
        >>> latex_escape("R&D: 50% of $x_1$ {sic}")
        'R\\&D: 50\\% of \\$x\\_1\\$ \\{sic\\}'
    """
    return _LATEX_CHARS.sub(lambda m: _LATEX[m.group(0)], collapse_whitespace(strip_markup(text)))


def _verbatim(text: str) -> str:
    return "".join(_VERBATIM_UNSAFE.get(c, c) for c in "".join(strip_markup(text, tags=False).split()))


def _ascii_word(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower())


def citation_key(ref: Reference) -> str:
    """The key before de-duplication: the first author's family name, the year, the first significant title
    word (`smith2020vitamin`); without authors the title word leads (`vitamin2020`); with neither, `doc<id>`.

    Example:
        >>> citation_key(Reference(1, "s", "9", "The Vitamin D trial", year=2020, authors=("José Núñez",)))
        'nunez2020vitamin'
    """
    family = _ascii_word(ref.authors[0].split()[-1]) if ref.authors and ref.authors[0].split() else ""
    words = [w for w in (_ascii_word(x) for x in ref.title.split()) if w and w not in _KEY_STOP]
    word = next((w for w in words if w[0].isalpha()), "")
    year = str(ref.year or "")
    key = f"{family}{year}{word}" if family[:1].isalpha() else f"{word}{year}" if word else ""
    return key or f"doc{_ascii_word(ref.doc_id) or ref.number}"


def citation_keys(references: Iterable[Reference]) -> list[str]:
    """One unique key per reference, in order; a clash gets b, c, ... (then numbers) after the first."""
    keys: list[str] = []
    taken: set[str] = set()
    for ref in references:
        base = key = citation_key(ref)
        n = 1
        while key in taken:
            n += 1
            key = base + (chr(ord("a") + n - 1) if n <= 26 else str(n))
        taken.add(key)
        keys.append(key)
    return keys


def _author_field(names: tuple[str, ...]) -> str:
    # A name holding " and " or a comma (an organisation) is braced, so BibTeX keeps it as one name.
    return " and ".join(f"{{{latex_escape(n)}}}" if re.search(r"\band\b|,", n) else latex_escape(n) for n in names)


def bibtex_entry(ref: Reference, key: str) -> str:
    """One BibTeX entry for a reference, with the fields it has."""
    venue = collapse_whitespace(ref.venue)
    kind, venue_field = (
        (("inproceedings", "booktitle") if _PROCEEDINGS.search(venue) else ("article", "journal"))
        if venue
        else ("misc", "")
    )
    title = collapse_whitespace(strip_markup(ref.title)).removesuffix(".") or ref.doc_id  # styles add their own period
    fields = [("title", f"{{{latex_escape(title)}}}")]
    if ref.authors:
        fields.append(("author", _author_field(ref.authors)))
    if ref.year:
        fields.append(("year", str(ref.year)))
    if venue:
        fields.append((venue_field, latex_escape(venue)))
    if ref.doi:
        fields.append(("doi", _verbatim(ref.doi)))
    if ref.url:
        fields.append(("url", _verbatim(ref.url)))
    fields.append(("note", latex_escape(f"corpus id {ref.doc_id}; cited as [{ref.number}] in report.md")))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{kind}{{{key},\n{body}\n}}\n"


def to_bibtex(references: Iterable[Reference]) -> str:
    """The references as a BibTeX file: one entry each, in citation order, with unique stable keys."""
    references = list(references)
    if not references:
        return HEADER + "% No sources were cited.\n"
    entries = [bibtex_entry(ref, key) for ref, key in zip(references, citation_keys(references))]
    return HEADER + "\n" + "\n".join(entries)


def _ris_text(text: str) -> str:
    # a record is one value per line: no markup, no control character, no line break
    return collapse_whitespace(strip_markup(text))


def ris_entry(ref: Reference) -> str:
    """One RIS record: `JOUR` or `CONF` when the record names a venue (as `@article`/`@inproceedings` above),
    else `GEN`; one `AU` line per author; `ID` the corpus id, `N1` where report.md cites it."""
    venue = _ris_text(ref.venue or "")
    kind = ("CONF" if _PROCEEDINGS.search(venue) else "JOUR") if venue else "GEN"
    lines = [("TY", kind), ("TI", _ris_text(ref.title).removesuffix(".") or ref.doc_id)]
    lines += [("AU", _ris_text(name)) for name in ref.authors if _ris_text(name)]
    if ref.year:
        lines.append(("PY", str(ref.year)))
    if venue:
        lines.append(("T2", venue))
    if ref.doi:
        lines.append(("DO", "".join(strip_markup(ref.doi, tags=False).split())))
    if ref.url:
        lines.append(("UR", "".join(strip_markup(ref.url, tags=False).split())))
    lines += [("ID", _ris_text(ref.doc_id)), ("N1", f"cited as [{ref.number}] in report.md"), ("ER", "")]
    return "".join(f"{tag}  - {value}".rstrip() + "\n" for tag, value in lines)


def to_ris(references: Iterable[Reference]) -> str:
    """The references as an RIS file, one record each in citation order (empty when nothing was cited)."""
    return "\n".join(ris_entry(ref) for ref in references)
