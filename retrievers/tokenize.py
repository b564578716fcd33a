"""Pluggable tokenizers for lexical retrieval."""

from __future__ import annotations

import re
from collections.abc import Callable

Tokenizer = Callable[[str], list[str]]

_LETTERS = re.compile(r"\b[a-z]+\b")
_WORDS = re.compile(r"[a-z0-9]+")


def scholargym_tokenize(text: str) -> list[str]:
    """ScholarGym's tokenizer (spec 004 §2.1): lowercase, whole words of ASCII letters only.

    A word holding a digit or a non-ASCII letter yields nothing ("bm25", "café").
    """
    return _LETTERS.findall(text.lower())


def word_tokenize(text: str) -> list[str]:
    """Lowercase runs of ASCII letters and digits ("covid-19" -> "covid", "19")."""
    return _WORDS.findall(text.lower())


TOKENIZERS: dict[str, Tokenizer] = {"scholargym": scholargym_tokenize, "words": word_tokenize}


def get_tokenizer(name_or_fn: str | Tokenizer) -> Tokenizer:
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name_or_fn!r}; choose one of: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name_or_fn]
