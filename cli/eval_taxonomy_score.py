"""`deepresearch eval taxonomy-score`: score a prediction file in TaxoBench's format against the reference.

Each line of the prediction file: {"id": int, "hierarchy_tree": tree, "retrieved_papers": [titles] (optional)}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from deepresearch.cli.eval_taxonomy import add_scoring_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("predictions", help="JSONL prediction file (id, hierarchy_tree, optional retrieved_papers)")
    add_scoring_arguments(parser)


def main(args: argparse.Namespace) -> int:
    from deepresearch.eval.judges import judge_lm  # lazy: start-up
    from deepresearch.eval.run_taxonomy import finish, resolve_data  # lazy: start-up
    from deepresearch.eval.taxobench import load_predictions, load_taxobench  # lazy: start-up
    from deepresearch.programs import environment  # lazy: start-up

    surveys = load_taxobench(resolve_data(args.data, environment.data_dir()), limit=args.limit)
    predictions = load_predictions(args.predictions)
    unknown = sorted(set(predictions) - {s.survey_id for s in surveys})
    if unknown:
        raise ValueError(f"predictions for surveys not in the data: {unknown[:10]}; check --data")
    out = Path(args.out or Path(args.predictions).with_suffix("").as_posix() + "-scores")
    return finish(args, surveys, predictions, out, judge_lm(args.judge_lm) if args.judge_lm else None)
