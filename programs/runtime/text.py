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
    """TaxoBench's title key (spec 003 §4.1, `paper` profile): lowercase, drop non-word characters, collapse whitespace.

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
