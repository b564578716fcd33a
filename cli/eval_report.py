"""`deepresearch eval report`: run DeepResearch over a question set and score every report.

The runner and the scores are `deepresearch.eval.run_report`.
"""

from __future__ import annotations

import argparse

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import (
    add_data_arguments,
    add_judge_arguments,
    add_output_arguments,
    add_tree_arguments,
    add_workers_arguments,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(
        parser,
        required=True,
        old=("--questions",),
        limit_help="use the first N questions",
        help="the questions: a question file (.csv ecology form, .jsonl, .json, .txt), or eco, "
        "researchy, scholarqa (local files under $DEEPRESEARCH_DATA, else the Hugging Face hub), "
        "or hf:owner/name[:split]",
    )
    add_judge_arguments(
        parser,
        lm_help="the judge LM (temperature 0, on the --api-base server when one is given); "
        "without it only offline metrics are computed",
        cache_help="judge verdict cache folder (default OUT/judge_cache)",
    )
    add_tree_arguments(
        parser,
        preset_default="quick",
        preset_help="tree shape preset of the program (default quick)",
    )
    add_output_arguments(parser, out_default="runs/eval_report", out_help="folder for the reports and scores.jsonl")
    add_workers_arguments(
        parser,
        help="research the questions in this many processes (default: one after another here)",
        ray_help="research the questions as tasks on a Ray cluster (the [ray] extra)",
    )
    add_retriever_arguments(
        parser,
        corpus_help="corpus to research (default scifact, or the --index's): a path, a "
        "name under $DEEPRESEARCH_DATA, hf:NAME (see `run`)",
    )
    add_lm_arguments(parser)  # the program's LM (--lm), and the server and settings both LMs share


def main(args: argparse.Namespace) -> int:
    from deepresearch.eval.run_report import run  # lazy: start-up

    return run(args)
