"""`deepresearch eval gather`: run the gathering loop or a baseline over a query set and score it.

The runner is `deepresearch.eval.run_gather`; see its docstring for what is written under --out, how a rerun
resumes and where the queries run.
"""

from __future__ import annotations

import argparse

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import (
    add_data_arguments,
    add_output_arguments,
    add_workers_arguments,
    deprecated,
)
from deepresearch.eval.protocols import DISTANCE_VARIANTS, FAILED_POLICIES, PROTOCOLS

METHODS = ("loop", "direct", "raw")
IN_PROCESS_QUERIES = 8  # queries run at once in this process (no --workers, no --ray)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(
        parser,
        required=True,
        old=("--queries",),
        limit_help="only the first N queries",
        help="the queries: a BEIR folder with qrels or a ScholarGym JSONL file, or a name found under "
        "$DEEPRESEARCH_DATA (scifact, csfcube, scholargym; shenhao/ScholarGym finds the local copy)",
    )
    parser.add_argument("--qrels", default=None, help="BEIR qrels split to evaluate (default test)")
    parser.add_argument("--split", default=None, help="ScholarGym split: all, test or dev (default all)")
    parser.add_argument("--min-relevance", type=int, default=1, help="lowest qrels grade counted as ground truth")
    parser.add_argument(
        "--method",
        default="loop",
        choices=METHODS,
        help="loop: plan-retrieve-assess; direct: one LM-written query, no assessment; raw: the question itself, no LM",
    )
    parser.add_argument("--iterations", type=int, default=5, help="rounds of the loop (T)")
    add_workers_arguments(
        parser,
        help=f"run the queries on this many processes of this machine, one query each at "
        f"a time (each loads the corpus; default: {IN_PROCESS_QUERIES} at once in this "
        f"process)",
        ray_help="run the queries as tasks on a Ray cluster: auto or its HOST:PORT (the [ray] extra)",
    )
    parser.add_argument("--ranking-depth", type=int, default=100, help="ranks recorded per search for Avg.Distance")
    parser.add_argument("--distance", default="per_iteration", choices=DISTANCE_VARIANTS)
    parser.add_argument("--failed", default="excluded", choices=FAILED_POLICIES, help="failed queries in the means")
    parser.add_argument(
        "--protocol",
        default="official",
        choices=PROTOCOLS,
        help="edge rules of the scoring: official (ScholarGym's released scorer, comparable to the "
        "paper's tables) or spec (the paper's prose as read before); docs/reference/protocols.md",
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples for the 95%% intervals")
    parser.add_argument("--program", default=None, help="a compiled Gatherer (DSPy JSON state) to load")
    parser.add_argument(
        "--full-text",
        action="store_true",
        help="the second look at an uncertain candidate reads its open-access PDF (fetched once, "
        "cached) instead of its abstract (--method loop only)",
    )
    parser.add_argument(
        "--full-text-cache",
        default=None,
        metavar="DIR",
        help="folder of fetched PDFs (default ~/.cache/dspy-deepresearch/fulltext)",
    )
    add_output_arguments(
        parser,
        out_help="output folder (default runs/gather-<data>-<method>)",
        overwrite_help="discard earlier results in --out",
        old=("--restart",),
    )
    deprecated(parser, "--no-progress", "-q", dest="quiet", action="store_true")  # the dispatcher's -q
    add_retriever_arguments(
        parser,
        corpus_help="the corpus to search (default: the --data BEIR folder): "
        "a path, a name under $DEEPRESEARCH_DATA, hf:NAME; BM25 defaults "
        "to ScholarGym's settings (--bm25-preset scholargym) for ScholarGym "
        "queries",
    )
    add_lm_arguments(parser)


def main(args: argparse.Namespace) -> int:
    from deepresearch.eval.run_gather import run  # lazy: start-up

    return run(args, IN_PROCESS_QUERIES)
