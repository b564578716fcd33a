"""`deepresearch eval taxonomy`: build a taxonomy per TaxoBench survey and score it against the expert tree.

The runner is `deepresearch.eval.run_taxonomy`; see its docstring for what is written under --out and how a
rerun resumes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    from deepresearch.eval.run_taxonomy import (  # lazy: start-up
        DAMAGED,
        build_builder,
        check_resume,
        judge_all,
        open_judge,
        prediction_row,
        print_report,
        research_retrieval,
        resolve_data,
        run_settings,
        score_all,
        similarity,
        write_results,
    )
    from deepresearch.eval.taxobench import Prediction, load_taxobench  # lazy: start-up
    from deepresearch.programs import environment  # lazy: start-up
    from deepresearch.programs.formats.jsonl import JsonlAppender, read_jsonl  # lazy: start-up
    from deepresearch.programs.lm.session import open_lm  # lazy: start-up

    # the LMs are checked before the benchmark is loaded: a bad key or a dead server fails in seconds
    session = open_lm(args)
    judge = open_judge(args, session)
    data = resolve_data(args.data, environment.data_dir())
    surveys = load_taxobench(data, limit=args.limit)
    retrieval = research_retrieval(args, surveys) if args.mode == "deep-research" else None
    out = Path(args.out or Path("runs") / f"taxonomy-{args.mode}")
    check_resume(out, run_settings(args, data, session.model, retrieval.corpus if retrieval else None), args.overwrite)
    predictions_path = out / "predictions.jsonl"
    done = {int(row["id"]) for row in read_jsonl(predictions_path, hint=DAMAGED)}
    todo = [s for s in surveys if s.survey_id not in done]
    print(
        f"{len(surveys)} surveys · {len(surveys) - len(todo)} already done · {args.mode} · {session.model}",
        file=sys.stderr,
    )
    if todo:
        builder, _, model = build_builder(args, surveys, session, retrieval=retrieval)
        with JsonlAppender(predictions_path) as sink:  # cuts the line a kill left unfinished
            for s in todo:
                papers = list(s.papers) if args.mode == "bottom-up" else None
                with session.context():
                    result = builder(s.topic, papers)
                sink.append(prediction_row(s, result, args.mode, model))  # fsynced: never built again
                if not getattr(args, "quiet", False):  # a progress line, which -q leaves out
                    print(
                        f"survey {s.survey_id}: {len(result.retrieved_papers)} papers, {len(result.repairs)} repairs",
                        file=sys.stderr,
                    )
    # every score comes from the file, so a resumed run scores exactly what an uninterrupted one would
    rows = {int(row["id"]): row for row in read_jsonl(predictions_path, hint=DAMAGED)}
    by_id = {
        s.survey_id: Prediction(
            s.survey_id,
            rows[s.survey_id]["hierarchy_tree"],
            tuple(rows[s.survey_id]["retrieved_papers"]) if args.mode == "deep-research" else None,
        )
        for s in surveys
        if s.survey_id in rows
    }
    scores = score_all(surveys, by_id, profile=args.profile, sim=similarity(args.sim))
    judgements = (
        judge_all(surveys, by_id, args.judge_lm, api_base=args.api_base, cache_dir=out / "judge_cache", lm=judge)
        if judge is not None
        else None
    )
    summary = write_results(out, scores, judgements=judgements, profile=args.profile)
    print_report(scores, summary, out)
    return 0
