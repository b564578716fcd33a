"""`deepresearch eval report`: run DeepResearch over a question set and score every report.

The runner and the scores are `deepresearch.eval.run_report`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearch.cli.corpus_options import add_retriever_arguments
from deepresearch.cli.lm_options import add_lm_arguments
from deepresearch.cli.options import (
    add_data_arguments,
    add_judge_arguments,
    add_output_arguments,
    add_tree_arguments,
    add_workers_arguments,
)

if TYPE_CHECKING:
    from deepresearch.eval.questions import Question
    from deepresearch.programs.artifacts import Report


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
    from deepresearch.eval.judges import JudgeCache, judge_lm  # lazy: start-up
    from deepresearch.eval.protocols import protocol_lines, protocols_of  # lazy: start-up
    from deepresearch.eval.questions import load_questions  # lazy: start-up
    from deepresearch.eval.run_report import Judges, evaluate, evaluate_on, mean_table  # lazy: start-up
    from deepresearch.programs import environment  # lazy: start-up
    from deepresearch.programs.config import preset  # lazy: start-up
    from deepresearch.programs.lm.models import preflight  # lazy: start-up
    from deepresearch.programs.lm.session import open_lm  # lazy: start-up
    from deepresearch.programs.research.program import DeepResearch  # lazy: start-up
    from deepresearch.programs.retrieval import open_from_args  # lazy: start-up
    from deepresearch.programs.runtime.outputs import atomic_write_text  # lazy: start-up

    overrides = {k: v for k, v in {"depth": args.depth, "breadth": args.breadth}.items() if v is not None}
    config = preset(args.preset, **overrides, lm_timeout_s=args.lm_timeout)
    # both LMs are checked before the questions and the corpus are loaded: a bad key or a dead server fails
    # in seconds, not after the program ran over every question
    session = open_lm(args, num_retries=0)  # the program's scheduler retries, and counts each request
    judges = None
    out = Path(args.out)
    if args.judge_lm and args.judge_lm != "offline":
        judge = judge_lm(args.judge_lm, args.api_base, environment.api_key(), timeout_s=args.lm_timeout)
        if not args.no_preflight and args.judge_lm != session.model:  # that one was checked already
            preflight(judge, timeout_s=min(args.lm_timeout, 60.0))
        judges = Judges.build(judge, JudgeCache(args.judge_cache or out / "judge_cache"))
    questions = load_questions(args.data, data_dir=environment.data_dir(), limit=args.limit)
    retrieval = open_from_args(args, args.corpus or (None if args.index else "scifact"))
    corpus = retrieval.corpus
    assert corpus is not None  # a corpus (scifact by default) or an index: a local corpus is searched
    program = DeepResearch(retriever=retrieval.retriever, config=config, offline=session.is_offline)
    reports_dir = out / "reports"
    reports_dir.mkdir(parents=True, exist_ok=True)

    def save(q: Question, report: Report) -> None:
        (reports_dir / f"{q.qid}.md").write_text(report.markdown, encoding="utf-8")

    def text_of(doc_id: str) -> str | None:
        doc = corpus.get(doc_id)
        return doc.text if doc is not None else None

    if args.workers or args.ray:
        from deepresearch.programs.runtime.executor import open_executor  # lazy: start-up

        with session.context():  # the judges' LM
            rows = evaluate_on(
                open_executor(workers=args.workers, ray=args.ray), args, questions, text_of, judges, on_report=save
            )
    else:
        with session.context():
            rows = asyncio.run(evaluate(questions, program, text_of, judges, on_report=save))
    with (out / "scores.jsonl").open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(
        f"{len(rows)} questions from {args.data} · program LM {session.model} · judge "
        f"{args.judge_lm or 'none (offline metrics only)'}"
    )
    means = mean_table(rows)
    for key, value in means.items():
        print(f"  {key:<34} {value:10.4f}")
    # every figure names the released scorer it was checked against and how ours differs
    protocols = protocols_of(means)
    atomic_write_text(out / "protocols.json", json.dumps(protocols, indent=2))
    print("what each metric matches (docs/reference/protocols.md):")
    for line in protocol_lines(means):
        print(f"  {line}")
    print(f"reports: {reports_dir}")
    print(f"scores:  {out / 'scores.jsonl'}")
    print(f"protocols: {out / 'protocols.json'}")
    return 0
