"""The retrieval options every command shares (`add_retriever_arguments`): `run`, the `eval` commands,
`optimize` and `index` read corpora, indexes and BM25 settings the same way. What they name is opened by
`deepresearch.programs.retrieval.open_from_args`. Nothing here loads numpy, so --help answers at once.
"""

from __future__ import annotations

import argparse

from deepresearch.retrievers.settings import BM25_PRESETS, IDF_FORMS, KINDS, QDRANT_MODES, TEXT_FORMATS
from deepresearch.retrievers.tokenize import TOKENIZERS

CORPUS_HELP = (
    "a .jsonl file, a BEIR folder, a ScholarGym paper DB (.json), a dataset name under "
    "$DEEPRESEARCH_DATA (e.g. scifact; BeIR/scifact finds the same folder), hf:NAME or a Hugging Face "
    "owner/name"
)


def parse_fields(items: list[str]) -> dict[str, str]:
    """`attr=column` pairs from repeated --field options."""
    fields = {}
    for item in items:
        attr, sep, column = item.partition("=")
        if not sep or not attr or not column:
            raise ValueError(f"--field {item!r} should be ATTRIBUTE=COLUMN, e.g. --field text=abstract")
        fields[attr] = column
    return fields


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip-bad", action="store_true", help="skip malformed corpus lines and count them")
    parser.add_argument("--hf-config", default=None, help="dataset configuration, for hf:NAME corpora")
    parser.add_argument("--split", default="train", help="dataset split, for hf:NAME corpora")
    parser.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="ATTR=COLUMN",
        help="map a Doc attribute to a dataset column (repeatable), for hf:NAME corpora",
    )


def add_bm25_arguments(parser) -> None:
    """BM25 options, all unset by default: a preset's value applies, or with --index the index's own."""
    default = BM25_PRESETS["default"]
    parser.add_argument(
        "--bm25-preset",
        default=None,
        choices=sorted(BM25_PRESETS),
        help="named BM25 settings (default: default, i.e. "
        + ", ".join(f"{k}={v}" for k, v in default.items())
        + "; scholargym is ScholarGym's rank-bm25 setup)",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        choices=sorted(TOKENIZERS),
        help=f"BM25 tokenizer (default {default['tokenizer']}, which keeps tokens with digits)",
    )
    parser.add_argument("--k1", type=float, default=None, help=f"BM25 k1 (default {default['k1']})")
    parser.add_argument("--b", type=float, default=None, help=f"BM25 b (default {default['b']})")
    parser.add_argument("--epsilon", type=float, default=None, help="floor for negative IDF, okapi only (default 0.25)")
    parser.add_argument(
        "--idf", default=None, choices=sorted(IDF_FORMS), help=f"BM25 IDF form (default {default['method']})"
    )
    parser.add_argument(
        "--text-format",
        default=None,
        choices=sorted(TEXT_FORMATS),
        help=f"how title and text are joined (default {default['text_format']})",
    )


def source_name(value: str) -> str:
    """An engine name for --source (`s2` is `semanticscholar`), or argparse's one-line error."""
    from deepresearch.retrievers.engines import engine_name  # lazy: start-up

    try:
        return engine_name(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_retriever_arguments(
    parser: argparse.ArgumentParser,
    *,
    corpus_help: str = CORPUS_HELP,
    default_kind: str = "bm25",
    everyday=None,
):
    """--corpus, --index, --source, --retriever, --qdrant-url and the BM25 and dense options, in one group,
    which is returned; `everyday` (an argument group of the command) takes --corpus instead."""
    group = parser.add_argument_group("retrieval", "what to search and how (the same options in every command)")
    (everyday or group).add_argument("--corpus", default=None, help=corpus_help)
    group.add_argument(
        "--source",
        action="append",
        default=[],
        type=source_name,
        metavar="ENGINE",
        help="also search a scholarly search engine, repeatable: openalex, semanticscholar (s2), "
        "arxiv, pubmed; several are fused by reciprocal rank (with --corpus or --index too) and "
        "deduplicated by DOI, arXiv id or title. Keys from $OPENALEX_MAILTO, $S2_API_KEY, "
        "$NCBI_API_KEY; servers from $DEEPRESEARCH_<ENGINE>_URL",
    )
    group.add_argument(
        "--source-cache",
        default=None,
        metavar="DIR",
        help="folder of the search engines' response cache (default $DEEPRESEARCH_ENGINE_CACHE, else "
        "~/.cache/dspy-deepresearch/engines)",
    )
    group.add_argument(
        "--no-source-cache",
        action="store_true",
        help="ask the search engines again instead of reading their cached answers",
    )
    group.add_argument(
        "--index",
        default=None,
        metavar="DIR",
        help="a folder built by `deepresearch index`: opens memory-mapped in well under a second at any "
        "size, with the tokenizer and BM25 settings it was built with (--corpus may be left out)",
    )
    meaning = {
        "bm25": "BM25",
        "dense": "embeddings",
        "hybrid": "reciprocal-rank fusion of both",
        "qdrant": "a Qdrant collection",
    }
    group.add_argument(
        "--retriever",
        default=None,
        choices=KINDS,
        help="what searches: "
        + ", ".join(f"{k} ({meaning[k]})" for k in KINDS)
        + f"; default {default_kind}, or qdrant when --qdrant-url is given",
    )
    group.add_argument(
        "--qdrant-url",
        default=None,
        metavar="URL",
        help="a Qdrant server for --retriever qdrant (default: a collection in the index folder, "
        "or in memory without --index)",
    )
    group.add_argument(
        "--qdrant-mode", default="hybrid", choices=QDRANT_MODES, help="what Qdrant searches with (default hybrid)"
    )
    group.add_argument(
        "--dense-model",
        default=None,
        metavar="MODEL",
        help="encoder for dense retrieval without an index (default all-MiniLM-L6-v2); an index uses its own",
    )
    group.add_argument(
        "--verify-index",
        action="store_true",
        help="re-read the corpus source and compare it with the index's fingerprint (slow on a big "
        "corpus; by default file sizes and times are compared)",
    )
    add_bm25_arguments(group)
    return group
