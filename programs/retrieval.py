"""What a command's retrieval options name, opened: the one call `run`, the `eval` runners, `optimize` and
their worker processes make (`open_from_args`), with the corpus folder from the environment.

The options themselves are `deepresearch.cli.corpus_options`; dataset names are looked up in
$DEEPRESEARCH_DATA.
"""

from __future__ import annotations

import argparse
import sys

from deepresearch.programs import environment
from deepresearch.programs.environment import data_dir
from deepresearch.retrievers.open import BM25_KEYS, Retrieval, open_retriever


def bm25_overrides(args: argparse.Namespace) -> dict:
    """The BM25 settings given explicitly on the command line (`--idf` sets `method`, a name commands use for
    other things)."""
    given = {k: getattr(args, "idf" if k == "method" else k, None) for k in BM25_KEYS}
    return {k: v for k, v in given.items() if v is not None}


def open_from_args(
    args: argparse.Namespace, corpus=None, *, default_preset: str = "default", kind: str | None = None
) -> Retrieval:
    """Opens what the retrieval options name.

    Args:
        args: Parsed options of `add_retriever_arguments`.
        corpus: A corpus spec or loaded `Corpus` to use instead of --corpus (a command's own default).
        default_preset: The BM25 preset when neither --bm25-preset nor --index gives one.
        kind: The retriever kind when --retriever is unset (default bm25, or qdrant with --qdrant-url).

    Raises:
        ValueError: as `open_retriever`, and for an unreachable Qdrant server.
    """
    qdrant_url = getattr(args, "qdrant_url", None)
    kind = args.retriever or kind or ("qdrant" if qdrant_url else "bm25")
    preset = args.bm25_preset if args.index else (args.bm25_preset or default_preset)
    sources = getattr(args, "source", None) or ()
    # the engines' servers, keys and cache folder from the environment; --source-cache over the cache folder
    source_options = {
        **(environment.engine_settings(sources) if sources else {}),
        "cache": not getattr(args, "no_source_cache", False),
    }
    if getattr(args, "source_cache", None):
        source_options["cache_dir"] = args.source_cache
    try:
        return open_retriever(
            corpus if corpus is not None else args.corpus,
            index=args.index,
            kind=kind,
            qdrant_url=qdrant_url,
            qdrant_mode=getattr(args, "qdrant_mode", "hybrid"),
            dense_model=args.dense_model,
            bm25=bm25_overrides(args),
            bm25_preset=preset,
            data_dir=data_dir(),
            verify=args.verify_index,
            show_progress=sys.stderr.isatty() and not getattr(args, "quiet", False),
            sources=sources,
            source_options=source_options,
        )
    except ConnectionError as err:  # a Qdrant server that cannot be reached: one line, like other bad input
        raise ValueError(str(err)) from err


def describe(retrieval: Retrieval) -> str:
    """One line naming what is searched, for a command's first output."""
    d = retrieval.description
    engines = " + ".join(s["name"] for s in d.get("sources") or () if s.get("engine"))
    if retrieval.corpus is None:
        return f"search engines {engines}"
    how = f"index {d['index']}" if d.get("index") else "built in memory"
    bm25 = f", tokenizer {d['bm25']['tokenizer']}" if d.get("bm25") else ""
    fused = f" · fused with {engines}" if engines else ""
    return f"corpus {d['name']} ({d['documents']} documents) · {d['retriever']} · {how}{bm25}{fused}"
