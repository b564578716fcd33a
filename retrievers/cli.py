"""`deepresearch index CORPUS --out DIR [--dense-model MODEL]`: build a persistent index once.

Also the retrieval options every command shares (`add_retriever_arguments`) and the one call that opens
what they name (`open_from_args`): `run`, the `eval` runners and `optimize` all read corpora, indexes and
BM25 settings the same way. Dataset names are looked up in $DEEPRESEARCH_DATA.
"""

from __future__ import annotations

import argparse
import sys
import time

from deepresearch.programs import environment
from deepresearch.programs.cli_options import add_output_arguments, deprecated
from deepresearch.retrievers.bm25 import TEXT_FORMATS
from deepresearch.retrievers.index import build_index
from deepresearch.retrievers.open import (
    BM25_KEYS,
    BM25_PRESETS,
    KINDS,
    QDRANT_MODES,
    Retrieval,
    bm25_settings,
    open_retriever,
)
from deepresearch.retrievers.scoring import IDF
from deepresearch.retrievers.sources import open_corpus
from deepresearch.retrievers.tokenize import TOKENIZERS

CORPUS_HELP = (
    "a .jsonl file, a BEIR folder, a ScholarGym paper DB (.json), a dataset name under "
    "$DEEPRESEARCH_DATA (e.g. scifact; BeIR/scifact finds the same folder), hf:NAME or a Hugging Face "
    "owner/name"
)


def data_dir() -> str | None:
    """The folder dataset names are looked up in ($DEEPRESEARCH_DATA)."""
    return environment.data_dir()


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
    parser.add_argument("--idf", default=None, choices=sorted(IDF), help=f"BM25 IDF form (default {default['method']})")
    parser.add_argument(
        "--text-format",
        default=None,
        choices=sorted(TEXT_FORMATS),
        help=f"how title and text are joined (default {default['text_format']})",
    )


def bm25_overrides(args: argparse.Namespace) -> dict:
    """The BM25 settings given explicitly on the command line (`--idf` sets `method`, a name commands use for
    other things)."""
    given = {k: getattr(args, "idf" if k == "method" else k, None) for k in BM25_KEYS}
    return {k: v for k, v in given.items() if v is not None}


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
    corpus_default: str | None = None,
    kinds: tuple[str, ...] = KINDS,
    default_kind: str = "bm25",
    everyday=None,
):
    """--corpus, --index, --source, --retriever, --qdrant-url and the BM25 and dense options, in one group,
    which is returned; `everyday` (an argument group of the command) takes --corpus instead."""
    group = parser.add_argument_group("retrieval", "what to search and how (the same options in every command)")
    (everyday or group).add_argument("--corpus", default=corpus_default, help=corpus_help)
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
        choices=kinds,
        help="what searches: "
        + ", ".join(f"{k} ({meaning[k]})" for k in kinds)
        + f"; default {default_kind}"
        + (", or qdrant when --qdrant-url is given" if "qdrant" in kinds else ""),
    )
    if "qdrant" in kinds:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("corpus", help=CORPUS_HELP)
    add_output_arguments(parser, required=True, out_help="index folder to write")
    parser.add_argument(
        "--dense-model",
        default=None,
        metavar="MODEL",
        help="also embed the corpus with this sentence-transformers model (e.g. all-MiniLM-L6-v2)",
    )
    deprecated(parser, "--dense", "--dense-model")
    parser.add_argument("--no-bm25", action="store_true", help="build only the dense part")
    parser.add_argument("--batch-size", type=int, default=64, help="encoder batch size")
    add_corpus_arguments(parser)
    add_bm25_arguments(parser)


def main(args: argparse.Namespace) -> int:
    if args.no_bm25 and not args.dense_model:
        raise ValueError("nothing to build: --no-bm25 needs --dense-model MODEL")
    if not args.out.strip():
        raise ValueError("--out is empty; pass the folder to write the index to")
    settings = bm25_settings(args.bm25_preset or "default", bm25_overrides(args))
    # the command line's own lock (a CLI module may use the runtime's): one build, or one run, per folder
    from deepresearch.programs.runtime.outputs import OutFolderError, held_question, out_folder_lock  # lazy: start-up

    with out_folder_lock(args.out, "index build"):  # a second build into the same folder stops here, at once
        if held_question(args.out) is not None:
            raise OutFolderError(
                f"--out {args.out} holds a research run (run.json, report.md); an index goes in a "
                f"folder of its own: pass another --out"
            )
        return _build(args, settings)


def _build(args: argparse.Namespace, settings: dict) -> int:
    started = time.perf_counter()
    corpus, source, skipped = open_corpus(
        args.corpus,
        data_dir=data_dir(),
        skip_bad=args.skip_bad,
        hf_config=args.hf_config,
        hf_split=args.split,
        fields=parse_fields(args.field),
    )
    if skipped:
        print(f"skipped {skipped} bad lines in {args.corpus}", file=sys.stderr)
    loaded = time.perf_counter() - started
    index = build_index(
        corpus,
        args.out,
        source,
        bm25=None if args.no_bm25 else settings,
        dense_model=args.dense_model,
        batch_size=args.batch_size,
        show_progress=sys.stderr.isatty() and not getattr(args, "quiet", False),
    )
    parts = ", ".join(f"{name} {secs:.1f}s" for name, secs in index.manifest["build_seconds"].items())
    bm25 = "" if args.no_bm25 else f"; tokenizer {settings['tokenizer']}"
    print(
        f"indexed {len(corpus)} documents from {args.corpus} into {args.out} "
        f"(load {loaded:.1f}s; {parts}; fingerprint {index.manifest['corpus']['fingerprint'][:12]}{bm25})"
    )
    return 0
