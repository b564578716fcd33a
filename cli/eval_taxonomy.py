"""`deepresearch eval taxonomy`: build a taxonomy per TaxoBench survey and score it against the expert tree.

The runner is `deepresearch.eval.run_taxonomy`; see its docstring for what is written under --out and how a
rerun resumes.
"""

from __future__ import annotations

import argparse

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import (
    add_data_arguments,
    add_judge_arguments,
    add_output_arguments,
    add_overwrite_argument,
    add_tree_arguments,
)
from deepresearch.eval.taxobench import HF_DATASET, PROFILES


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(
        parser,
        limit_help="score only the first N surveys",
        help=f"TaxoBench JSONL, a folder with data.jsonl, or {HF_DATASET} "
        "(default: $DEEPRESEARCH_DATA/taxobench_examples)",
    )
    parser.add_argument("--profile", default="paper", choices=PROFILES, help="title alignment profile")
    parser.add_argument(
        "--sim",
        default="embedding",
        choices=("embedding", "exact"),
        help="label similarity: all-MiniLM-L6-v2 cosine (the benchmark's) or exact match",
    )
    add_output_arguments(parser, out_help="output folder")
    add_judge_arguments(
        parser,
        lm_help="also score each tree with TaxoBench's LLM judge (four 1-5 dimensions) "
        "using this DSPy/LiteLLM model, e.g. openai/gpt-4o; verdicts are cached "
        "under --out",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_scoring_arguments(parser)
    parser.add_argument(
        "--mode",
        default="bottom-up",
        choices=("bottom-up", "deep-research"),
        help="bottom-up: organise the expert papers; deep-research: find papers first",
    )
    add_tree_arguments(
        parser,
        depth_default=2,
        depth_help="deep-research mode: research depth",
        breadth_default=3,
        breadth_help="deep-research mode: research breadth",
    )
    parser.add_argument(
        "--max-papers-per-call", type=int, default=60, help="larger paper sets are organised in groups and merged"
    )
    add_overwrite_argument(parser, help="discard earlier predictions in --out", old=("--restart",))
    add_retriever_arguments(
        parser,
        corpus_help="deep-research mode: the corpus to search (default: the benchmark's "
        "own papers, pooled over all loaded surveys): a path, a name under "
        "$DEEPRESEARCH_DATA, hf:NAME (see `run`)",
    )
    add_lm_arguments(parser)  # --lm offline: the clustering baseline; --judge-lm shares --api-base, --lm-timeout


def main(args: argparse.Namespace) -> int:
    from deepresearch.eval.run_taxonomy import run  # lazy: start-up

    return run(args)
