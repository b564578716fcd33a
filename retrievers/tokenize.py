"""Pluggable tokenizers for lexical retrieval.

A tokenizer is any callable from text to a list of tokens. The named ones are in `TOKENIZERS`; an index
on disk records the name, so only named tokenizers can be saved.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

Tokenizer = Callable[[str], list[str]]

_LETTERS = re.compile(r"\b[a-z]+\b")
_WORDS = re.compile(r"[a-z0-9]+")
_UNICODE_WORDS = re.compile(r"\w+")

# Lucene's English stop words, the set Elasticsearch's `english` analyzer removes.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)


def scholargym_tokenize(text: str) -> list[str]:
    """ScholarGym's tokenizer: lowercase, whole words of ASCII letters only.

    A word holding a digit or a non-ASCII letter yields nothing ("bm25", "café").
    """
    return _LETTERS.findall(text.lower())


def word_tokenize(text: str) -> list[str]:
    """Lowercase runs of ASCII letters and digits ("covid-19" -> "covid", "19")."""
    return _WORDS.findall(text.lower())


@functools.lru_cache(maxsize=1)
def _porter():
    try:
        import Stemmer
    except ImportError as err:
        raise ImportError("the `english` tokenizer needs PyStemmer; run `pip install PyStemmer`") from err
    stemmer = Stemmer.Stemmer("porter")
    stemmer.maxCacheSize = 200_000
    return stemmer


def english_tokenize(text: str) -> list[str]:
    """An English analyzer like Elasticsearch's `english` (the one BEIR's BM25 baseline uses).

    Unicode words, lowercased, possessive "'s" dropped, Lucene's English stop words removed, then the
    Porter stemmer ("studies" -> "studi").
    """
    words = _UNICODE_WORDS.findall(text.lower().replace("'s ", " ").replace("\u2019s ", " "))
    return _porter().stemWords([w for w in words if w not in ENGLISH_STOPWORDS])


TOKENIZERS: dict[str, Tokenizer] = {
    "scholargym": scholargym_tokenize,
    "words": word_tokenize,
    "english": english_tokenize,
}


def get_tokenizer(name_or_fn: str | Tokenizer) -> Tokenizer:
    """The tokenizer registered under `name_or_fn`, or the callable itself."""
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name_or_fn!r}; choose one of: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name_or_fn]


def tokenizer_name(name_or_fn: str | Tokenizer) -> str | None:
    """The registered name of a tokenizer, or None for an unregistered callable."""
    if isinstance(name_or_fn, str):
        return name_or_fn if name_or_fn in TOKENIZERS else None
    return next((name for name, fn in TOKENIZERS.items() if fn is name_or_fn), None)
