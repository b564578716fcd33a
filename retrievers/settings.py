"""The names and defaults of the retrieval settings, in a module that imports nothing: the command line's
--help lists them without loading numpy (`open`, `bm25` and `scoring` use them)."""

from __future__ import annotations

from typing import Any

KINDS = ("bm25", "dense", "hybrid", "qdrant")
QDRANT_MODES = ("bm25", "dense", "hybrid")

# Named BM25 settings. "default" is every command's: BEIR's Elasticsearch setup (English analyzer with Porter
# stemming, which keeps tokens with digits such as p53, brca1, h1n1 and covid + 19; Lucene IDF; k1 = 1.2),
# SciFact test nDCG@10 0.683 here against 0.662 for `words` and 0.607 for `scholargym`. "scholargym" is
# ScholarGym's own (rank-bm25's BM25Okapi over whole ASCII-letter words), for its gathering evaluation.
BM25_PRESETS: dict[str, dict[str, Any]] = {
    "default": {
        "tokenizer": "english",
        "k1": 1.2,
        "b": 0.75,
        "epsilon": 0.25,
        "method": "lucene",
        "text_format": "plain",
    },
    "scholargym": {
        "tokenizer": "scholargym",
        "k1": 1.5,
        "b": 0.75,
        "epsilon": 0.25,
        "method": "okapi",
        "text_format": "scholargym",
    },
}
BM25_KEYS = tuple(BM25_PRESETS["default"])
TEXT_FORMATS = {"scholargym": "title: {title} abstract: {text}", "plain": "{title} {text}"}
IDF_FORMS = ("lucene", "okapi")  # the keys of scoring.IDF
