"""`deepresearch index CORPUS --out DIR [--dense-model MODEL]`: build a persistent index once."""

from __future__ import annotations

import argparse
import sys
import time

from deepresearch.cli.corpus_options import CORPUS_HELP, add_bm25_arguments, add_corpus_arguments, parse_fields
from deepresearch.cli.options import add_output_arguments, deprecated


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
    from deepresearch.programs.retrieval import bm25_overrides  # lazy: start-up
    from deepresearch.programs.runtime.outputs import OutFolderError, held_question, out_folder_lock  # lazy: start-up
    from deepresearch.retrievers.open import bm25_settings  # lazy: start-up

    settings = bm25_settings(args.bm25_preset or "default", bm25_overrides(args))
    with out_folder_lock(args.out, "index build"):  # a second build into the same folder stops here, at once
        if held_question(args.out) is not None:
            raise OutFolderError(
                f"--out {args.out} holds a research run (run.json, report.md); an index goes in a "
                f"folder of its own: pass another --out"
            )
        return _build(args, settings)


def _build(args: argparse.Namespace, settings: dict) -> int:
    from deepresearch.programs.retrieval import data_dir  # lazy: start-up
    from deepresearch.retrievers.index import build_index  # lazy: start-up
    from deepresearch.retrievers.sources import open_corpus  # lazy: start-up

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
