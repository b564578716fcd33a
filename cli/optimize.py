"""`deepresearch optimize`: compile a program (or one stage) against a benchmark metric and save it.

The options are here; what the command does with them is `deepresearch.cli.optimize_run`, loaded by `main`.
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
from deepresearch.optimize.names import OPTIMIZERS
from deepresearch.programs.stages.names import RECORDED_STAGES, RESEARCH_STAGES

PROGRAMS = ("research", "gather", "taxonomy")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--program", default="research", choices=PROGRAMS, help="the program to compile")
    parser.add_argument(
        "--stage",
        default="all",
        help="tune one stage or all: "
        + ", ".join(RESEARCH_STAGES)
        + " (or the module's name: planner, writer...). The assessors run on frozen candidates, "
        "the research planner on planning + retrieval only, and with --from-runs "
        f"{', '.join(RECORDED_STAGES)} on the inputs recorded runs gave them",
    )
    parser.add_argument(
        "--show",
        default=None,
        metavar="COMPILED",
        help="print what a compiled program file records (model, optimizer, metric, data and split, "
        "dev figures before and after) and exit",
    )
    parser.add_argument(
        "--metric",
        default=None,
        help="the metric to tune against; each program and stage has its own (the default is its first; "
        "an unknown name lists the choices)",
    )
    parser.add_argument("--optimizer", default="gepa", choices=OPTIMIZERS)
    parser.add_argument(
        "--choose-stages",
        action="store_true",
        help="after tuning, answer each stage with the LM or its offline twin, whichever scores higher end to end "
        "on the training split (never below the offline floor there); saved with the program; whole programs only",
    )
    parser.add_argument(
        "--teacher",
        choices=("offline",),
        default=None,
        help="offline: the demonstrations come from the program's offline twins (no LM call), which record their "
        "answers under the LM predictors' names; with --optimizer bootstrap-rs or miprov2, whole programs only",
    )
    add_data_arguments(
        parser,
        old=("--train",),
        limit_help="use at most this many training examples",
        help="the training examples: research: a BEIR folder or a JSONL of questions (with optional "
        "key_points); gather: a ScholarGym file or BEIR folder; taxonomy: TaxoBench data (not "
        "with --from-runs)",
    )
    parser.add_argument(
        "--from-runs",
        default=None,
        metavar="DIR",
        help="tune --stage on the inputs the runs recorded under DIR gave it (each run folder's "
        "stages.jsonl): no retrieval, no earlier stage",
    )
    parser.add_argument("--split", default=None, help="split of --data (qrels file of a BEIR folder; ScholarGym split)")
    parser.add_argument("--dev", default=None, help="dev examples (same forms as --data); default: 30%% of --data")
    parser.add_argument("--dev-split", default=None, help="split of --dev (default: --split)")
    parser.add_argument(
        "--candidates",
        default=None,
        help="frozen assessor inputs: research: a recorded candidates file; gather: the "
        "results.jsonl of a `deepresearch eval gather` run",
    )
    parser.add_argument(
        "--record-candidates",
        default=None,
        help="research assessor: where to write the candidates recorded from --data",
    )
    parser.add_argument("--budget", type=int, default=100, help="metric calls the optimizer may spend")
    parser.add_argument("--max-lm-calls", type=int, default=None, help="LM calls the whole run may spend")
    add_judge_arguments(
        parser,
        lm_help="the judge of the writing metrics (citation support, key points), kept "
        "apart from --lm; on the --api-base server when one is given. Default: the "
        "offline lexical rule",
        api_base_help="the judge's OpenAI-compatible server, when it is not --api-base's (e.g. a "
        "hosted judge for a model served locally); its key is read from "
        "DEEPRESEARCH_JUDGE_API_KEY",
        cache_help="judge verdict cache folder (default: ~/.cache/dspy-deepresearch/judge)",
    )
    parser.add_argument(
        "--prompt-lm", default=None, help="LM that proposes instructions (default: --lm; same server and settings)"
    )
    add_tree_arguments(
        parser,
        preset_default="quick",
        preset_help="research tree preset (default quick)",
    )
    parser.add_argument("--hits", type=int, default=None, help="documents retrieved per search (research)")
    parser.add_argument("--iterations", type=int, default=5, help="gathering rounds")
    add_workers_arguments(
        parser,
        default=4,
        help="examples evaluated at once (the optimizer's threads)",
        ray_help="score the dev split before and after on a Ray cluster, one task per example "
        "(the [ray] extra); the optimizer itself runs here on --workers",
        old=("--threads",),
    )
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(
        parser,
        out_help="compiled program file (JSON); required unless --show. Until it is written, OUT's working "
        "folder (compiled.json: compiled.partial/) keeps the run's LM answers and dev scores, so the same "
        "command resumes an interrupted run",
        overwrite_help="discard the working folder an interrupted run left beside --out and start over",
    )
    parser.add_argument(
        "--keep-partial",
        action="store_true",
        help="keep the working folder (LM answers, dev scores) after a run that succeeded",
    )
    add_retriever_arguments(
        parser,
        corpus_help="corpus to search (default: the --data BEIR folder): a path, a name "
        "under $DEEPRESEARCH_DATA, hf:NAME (see `run`)",
    )
    add_lm_arguments(parser, default_offline=False)  # the task LM (--lm): offline cannot be tuned


def main(args: argparse.Namespace) -> int:
    from deepresearch.cli.optimize_run import run  # lazy: start-up

    return run(args)
