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


__all__ = ["collapse_whitespace", "norm_text", "norm_title", "printable", "shorten"]


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
_LABEL_TOKEN = re.compile(r"[A-Za-z']+(?=[ /:.]|$)")


def strip_label(sentence: str) -> str:
    """`sentence` without the section label of a structured abstract at its start ("RESULTS", "METHODS AND
    FINDINGS", "Background:"); '' when the sentence is only a label. A label is a run of at most five
    `LABEL_WORDS`, at least one of which heads a part, written in capitals, or in any case when a colon ends it.

    Example:
        >>> strip_label("INTRODUCTION Vitamin D deficiency is common."), strip_label("VEGF regulates bone.")
        ('Vitamin D deficiency is common.', 'VEGF regulates bone.')
    """
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
        while pos < len(text) and text[pos] in " /":
            pos += 1
    if cut is None:
        return sentence
    rest = text[cut:].strip()
    return "" if not rest.strip(".:; ") else rest
