"""`deepresearch index CORPUS --out DIR [--dense MODEL]`: build a persistent index once."""

from __future__ import annotations

import argparse
import sys
import time

from retrievers.bm25 import TEXT_FORMATS
from retrievers.index import build_index
from retrievers.scoring import IDF
from retrievers.sources import open_corpus
from retrievers.tokenize import TOKENIZERS


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
    parser.add_argument("--field", action="append", default=[], metavar="ATTR=COLUMN",
                        help="map a Doc attribute to a dataset column (repeatable), for hf:NAME corpora")


def add_bm25_arguments(parser: argparse.ArgumentParser, tokenizer: str, k1: float, method: str,
                       text_format: str) -> None:
    parser.add_argument("--tokenizer", default=tokenizer, choices=sorted(TOKENIZERS), help=f"default {tokenizer}")
    parser.add_argument("--k1", type=float, default=k1, help=f"BM25 k1 (default {k1})")
    parser.add_argument("--b", type=float, default=0.75, help="BM25 b (default 0.75)")
    parser.add_argument("--epsilon", type=float, default=0.25, help="floor for negative IDF, okapi only")
    parser.add_argument("--method", default=method, choices=sorted(IDF), help=f"IDF form (default {method})")
    parser.add_argument("--text-format", default=text_format, choices=sorted(TEXT_FORMATS),
                        help=f"how title and text are joined (default {text_format})")


def bm25_settings(args: argparse.Namespace) -> dict:
    return {"k1": args.k1, "b": args.b, "epsilon": args.epsilon, "tokenizer": args.tokenizer,
            "method": args.method, "text_format": args.text_format}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("corpus", help="a .jsonl file, a BEIR folder, a ScholarGym paper DB (.json), or hf:NAME")
    parser.add_argument("--out", required=True, help="index folder to write")
    parser.add_argument("--dense", default=None, metavar="MODEL",
                        help="also embed the corpus with this sentence-transformers model (e.g. all-MiniLM-L6-v2)")
    parser.add_argument("--no-bm25", action="store_true", help="build only the dense part")
    parser.add_argument("--batch-size", type=int, default=64, help="encoder batch size")
    add_corpus_arguments(parser)
    add_bm25_arguments(parser, tokenizer="scholargym", k1=1.5, method="okapi", text_format="scholargym")


def main(args: argparse.Namespace) -> int:
    if args.no_bm25 and not args.dense:
        raise ValueError("nothing to build: --no-bm25 needs --dense MODEL")
    started = time.perf_counter()
    corpus, source, skipped = open_corpus(args.corpus, skip_bad=args.skip_bad, hf_config=args.hf_config,
                                          hf_split=args.split, fields=parse_fields(args.field))
    if skipped:
        print(f"skipped {skipped} bad lines in {args.corpus}", file=sys.stderr)
    loaded = time.perf_counter() - started
    index = build_index(corpus, args.out, source, bm25=None if args.no_bm25 else bm25_settings(args),
                        dense_model=args.dense, batch_size=args.batch_size, show_progress=sys.stderr.isatty())
    parts = ", ".join(f"{name} {secs:.1f}s" for name, secs in index.manifest["build_seconds"].items())
    print(f"indexed {len(corpus)} documents from {args.corpus} into {args.out} "
          f"(load {loaded:.1f}s; {parts}; fingerprint {index.manifest['corpus']['fingerprint'][:12]})")
    return 0
