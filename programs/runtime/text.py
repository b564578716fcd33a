"""Normalised text keys shared by the programs and the evaluation: when two queries, labels or titles are the same."""

from __future__ import annotations

import re


def collapse_whitespace(text: str | None) -> str:
    """`text` on one line: runs of whitespace become one space, the ends are trimmed (None gives '')."""
    return " ".join((text or "").split())


def shorten(text: str | None, limit: int) -> str:
    """`text` on one line, cut to at most `limit` characters with an ellipsis (for one-line messages)."""
    text = collapse_whitespace(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def norm_text(text: str | None) -> str:
    """Case- and whitespace-insensitive key of a query or label: lowercase, whitespace collapsed.

    Example:
        >>> norm_text("  Soil  Carbon\\nLoss ") == norm_text("soil carbon loss")
        True
    """
    return collapse_whitespace(text).lower()


def norm_title(title: str) -> str:
    """TaxoBench's title key (`paper` profile): lowercase, drop non-word characters, collapse whitespace.

    Punctuation is dropped, not replaced, so "Self-Attention" and "SelfAttention" share a key.
    """
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", title.lower())).strip()


# terminal escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \\`, two-character ones) and other
# control characters, tab and newline excepted
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def printable(text: str) -> str:
    """`text` without terminal escape sequences and control characters (tab and newline kept), so that a
    question pasted with colour codes or a cursor move is written to a report as the words it holds."""
    return _ESCAPES.sub("", text)


# Text from a corpus or a model is data in a deliverable (report.md, answer.md, report.html, references.bib): it
# shows as the characters it holds and adds no structure. In Markdown, a backslash before ASCII punctuation shows
# that character as text (CommonMark), so `<` and `>` (HTML, autolinks, quotes) and the brackets of links and
# images are escaped. A bracket group that can only be a citation (`[3]`, `[1, 4]`, `[5a7b0fd1_1]`, not after
# `!` nor followed by `(` or `:`, which would make it an image, a link or a link definition) stays, so the
# program's citations keep working, side by side too (`[3][4]`: a reference link only where a definition
# `[4]: url` exists, and a definition is always escaped); a backslash pair already there stays too, so escaping
# twice changes nothing.
# A line that would open a heading, a code fence, or a setext underline or rule starts with a backslash.
_INLINE_UNSAFE = re.compile(r"(?P<keep>\\[!-/:-@\[-`{-~]|(?<!!)\[[\w ,;.\-]{1,200}\](?![(:]))|(?P<char>[<>\[\]])")
_BLOCK_START = re.compile(r"^([ \t]*)(#|```|~~~|[=\-*_+](?:[ \t]*[=\-*_])*[ \t]*$)")
_HEADING_START = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]")


def inert_markdown(text: str | None, *, one_line: bool = False, headings: bool = False) -> str:
    """`text` from a corpus or a model as Markdown that shows it as written and adds no structure: control
    characters and terminal escapes removed (`printable`), no link, image, autolink or HTML tag left live (see
    above), and a line that would start a heading (`# ...`), a code fence, or a setext underline or rule starts
    with a backslash. With `one_line`, whitespace is collapsed first (a title, a query, a quoted sentence); with
    `headings`, ATX heading lines stay (a writer's draft, asked for `###` sections). Applying it twice changes
    nothing.

    Example:
        >>> inert_markdown("# Heading\\n![img](http://e.x/p.png) text")
        '\\\\# Heading\\n!\\\\[img\\\\](http://e.x/p.png) text'
    """
    text = printable(collapse_whitespace(text) if one_line else (text or ""))
    text = _INLINE_UNSAFE.sub(lambda m: m.group("keep") or "\\" + m.group("char"), text)
    return "\n".join(
        line if headings and _HEADING_START.match(line) else _BLOCK_START.sub(r"\1\\\2", line)
        for line in text.split("\n")
    )


_SCRIPT = re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|$)", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>|<!--.*?(?:-->|$)", re.DOTALL)


def strip_markup(text: str | None, *, tags: bool = True) -> str:
    """`text` without control characters, HTML tags and the content of script and style elements (what a
    corpus record's title may carry: `<i>`, `<sub>`, a `<script>`), for a field that is not HTML (BibTeX).
    Without `tags`, other tags stay (a DOI may hold `<` and `>`: `10.1002/(SICI)...30:1<1::AID-JBM1>3.0.CO;2-Z`).

    Example:
        >>> strip_markup("The <i>p53</i> gene<script>alert(1)</script>\\x07")
        'The p53 gene'
    """
    text = _SCRIPT.sub("", printable(text or ""))
    return _TAG.sub("", text) if tags else text


# The words structured abstracts head their parts with ("BACKGROUND", "METHODS AND RESULTS", "Aims:"). A run of
# them at the start of a sentence is a label, not part of what the sentence says; a word outside this set
# ("VEGF regulates ...") is not.
LABEL_WORDS = frozenset(
    """abstract acquisition aim aims analysis and authors' availability background case clinical collection
    conclusion conclusions context criteria data design discussion evidence experimental exposure exposures
    extraction findings funding goal goals hypothesis implementation importance interpretation intervention
    interventions introduction key limitations main materials measure measurement measurements measures method
    methodology methods motivation objective objectives observations of outcome outcomes participants patients
    points population presentation principal procedures purpose rationale recent registration relevance research
    result results review sample scope search selection setting settings significance sources study subjects
    summary synthesis trial unlabelled""".split()
)
_HEAD_LABELS = LABEL_WORDS - {"and", "of", "main", "key", "recent", "case", "clinical", "experimental", "data"}
_LABEL_TOKEN = re.compile(r"[A-Za-z']+(?=[ /:.,]|$)")


def split_label(sentence: str) -> tuple[str, str]:
    """The section label of a structured abstract at the start of `sentence`, and the rest: ("", `sentence`)
    when it opens with none. The rest is '' when the sentence is only a label. See `strip_label`."""
    text = sentence.lstrip()
    words: list[str] = []
    pos, cut = 0, None
    while len(words) < 5:
        m = _LABEL_TOKEN.match(text, pos)
        if m is None or m.group(0).lower() not in LABEL_WORDS:
            break
        words.append(m.group(0))
        pos = m.end()
        colon = text.startswith(":", pos)
        heads = any(w.lower() in _HEAD_LABELS for w in words)
        if heads and (colon or all(w.isupper() for w in words)):
            after = pos + 1 if colon else pos
            if after >= len(text.rstrip(". ")) or text[after] in " \t":  # the label ends the sentence or a word does
                cut = after
        while pos < len(text) and text[pos] in " /,":  # "DESIGN, SETTING, AND PATIENTS"
            pos += 1
    if cut is None:
        return "", sentence
    rest = text[cut:].strip()
    return text[:cut].strip(" :.,"), "" if not rest.strip(".:; ") else rest


def strip_label(sentence: str) -> str:
    """`sentence` without the section label of a structured abstract at its start ("RESULTS", "METHODS AND
    FINDINGS", "DESIGN, SETTING, AND PATIENTS", "Background:"); '' when the sentence is only a label. A label
    is a run of at most five `LABEL_WORDS` (spaces, slashes or commas between them), at least one of which
    heads a part, written in capitals, or in any case when a colon ends it.

    Example:
        >>> strip_label("INTRODUCTION Vitamin D deficiency is common."), strip_label("VEGF regulates bone.")
        ('Vitamin D deficiency is common.', 'VEGF regulates bone.')
    """
    return split_label(sentence)[1]
